"""The gpu probe's collection, replayed from the real H200 capture through a fake pynvml."""

import json

import pytest
from _fakenvml import FakePynvml
from forensics_probes.gpu.probe import GpuProbe, parse_topo

from forensics.gpu.nvml import Nvml
from forensics.probe import ProbeContext, key_problems
from forensics.readers import CommandResult
from tests.conftest import FIXTURES

UUID0 = "GPU-00000000-1111-2222-3333-000000000000"
TOPO = (FIXTURES / "h200x2" / "nvidia-smi-topo.txt").read_text()


def collect(state="idle", options=None, **kw):
    probe = GpuProbe(
        nvml=Nvml(FakePynvml(state, **kw), call_timeout_s=kw.get("t", 2.0)),
        topo_runner=lambda argv, timeout: CommandResult(True, TOPO),
    )
    ctx = ProbeContext(options or {})
    assert probe.available(ctx) is None
    return probe.collect(ctx), ctx


@pytest.mark.parametrize("state", ["idle", "under_load"])
def test_collect_is_json_with_unit_keys(state):
    data, ctx = collect(state)
    json.dumps(data)
    assert key_problems(data, GpuProbe.map_fields) == []
    assert ctx.errors == []
    assert set(data["gpus"]) == {UUID0, "GPU-00000000-1111-2222-3333-000000000001"}


def test_under_load_reading_shows_the_sw_power_cap():
    data, _ = collect("under_load")
    g = data["gpus"][UUID0]
    assert g["clocks"]["sm"] == {
        "current_mhz": 1440,
        "max_mhz": 1980,
        "app_mhz": 1980,
        "default_app_mhz": 1980,
    }
    assert g["clocks_event_reasons"]["active"] == ["sw_power_cap"]
    assert g["clocks_event_ns"]["sw_power_cap"] == 2828517600
    assert g["power"]["draw_mw"] == 691921 and g["power"]["enforced_limit_mw"] == 700000
    assert g["processes"][0]["pid"] == 559 and g["processes"][0]["used_memory_bytes"] == 1050673152


def test_idle_reading_is_idle_bit_and_full_link():
    data, _ = collect("idle")
    g = data["gpus"][UUID0]
    assert g["clocks_event_reasons"]["active"] == ["gpu_idle"]
    assert g["clocks_event_reasons"]["supported_mask"] == 511
    assert (g["pcie"]["gen_current"], g["pcie"]["gen_max"], g["pcie"]["width_current"]) == (
        5,
        5,
        16,
    )
    assert g["nvlink"]["active_links"] == 18
    assert g["retired_pages"]["pending"]["missing"] == "not_supported"  # as on the real H200
    assert data["topology"]["matrix"]["GPU0"]["GPU1"] == "NV18"


def test_old_driver_without_clocks_event_api_uses_throttle_call():
    data, _ = collect(
        "under_load",
        not_found={
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetSupportedClocksEventReasons",
        },
    )
    r = data["gpus"][UUID0]["clocks_event_reasons"]
    assert r["source"] == "nvmlDeviceGetCurrentClocksThrottleReasons" and r["active"] == [
        "sw_power_cap"
    ]


def test_old_nvidia_ml_py_without_a_wrapper():
    data, _ = collect("idle", absent={"nvmlDeviceGetGpuMaxPcieLinkGeneration"})
    assert data["gpus"][UUID0]["pcie"]["gen_gpu_max"]["missing"] == "function_not_found"


def test_gpu_lost_is_recorded_not_raised():
    data, ctx = collect("idle", lost=True)
    g = data["gpus"]["index-0"]
    assert ctx.errors  # the probe becomes partial
    assert (
        g["name"]["missing"] == "gpu_lost"
        and g["clocks"]["sm"]["current_mhz"]["missing"] == "gpu_lost"
    )


def test_hung_nvml_call_does_not_hang_the_probe():
    fake = FakePynvml("idle", hang={"nvmlDeviceGetPowerUsage"})
    probe = GpuProbe(
        nvml=Nvml(fake, call_timeout_s=0.2), topo_runner=lambda a, t: CommandResult(True, TOPO)
    )
    ctx = ProbeContext({})
    data = probe.collect(ctx)
    fake.release.set()
    g = data["gpus"][UUID0]
    assert g["power"]["draw_mw"]["missing"] == "timed_out"
    assert g["processes"]["missing"] == "timed_out"  # later calls answered at once, not queued
    assert any(e["field"].endswith("power.draw_mw") for e in ctx.errors)


def test_topology_failure_is_kept_as_missing():
    probe = GpuProbe(
        nvml=Nvml(FakePynvml("idle")),
        topo_runner=lambda a, t: CommandResult(
            False, failure={"missing": "timed_out", "detail": "nvidia-smi after 3 s"}
        ),
    )
    data = probe.collect(ProbeContext({}))
    assert data["topology"]["missing"] == "timed_out"


def test_sample_option_embeds_a_window_and_extends_the_timeout():
    data, _ = collect("under_load", options={"sample_s": 0.3})
    s = data["sample"]
    g = s["gpus"][UUID0]
    assert g["busy_samples"] == g["samples"] > 0
    assert g["reason_fraction"] == {"sw_power_cap": 1.0}
    assert s["gpus"]["GPU-00000000-1111-2222-3333-000000000001"]["busy_samples"] == 0
    assert GpuProbe().extra_timeout_s({"sample_s": 5}) >= 5


def test_driverless_machine_is_unavailable_with_a_reason():
    probe = GpuProbe(nvml=Nvml(FakePynvml("idle", init_error="NVML_ERROR_LIBRARY_NOT_FOUND")))
    assert "no NVIDIA driver" in probe.available(ProbeContext({}))


def test_real_driverless_path_here():
    why = GpuProbe().available(ProbeContext({}))
    if why is None:
        pytest.skip("this machine has an NVIDIA driver")
    assert why


def test_probe_module_never_imports_pynvml_or_torch():
    import forensics_probes.gpu.probe as mod

    src = open(mod.__file__).read()
    assert "import pynvml" not in src and "import torch" not in src


def test_parse_topo_drops_ansi_and_blank_cells():
    m = parse_topo(TOPO.replace("\x1b[4m", "").replace("\x1b[0m", ""))
    assert m["GPU1"] == {
        "GPU0": "NV18",
        "GPU1": "X",
        "CPU Affinity": "0-31",
        "NUMA Affinity": "0",
        "GPU NUMA ID": "N/A",
    }


def _threads_of_device_calls(fake):
    """Record which thread ran each device-level call of ``fake`` (the NVML lanes' workers)."""
    import threading

    seen = []
    for name in dir(fake):
        if name.startswith("nvmlDevice") and callable(getattr(fake, name)):
            fn = getattr(fake, name)

            def wrapped(*args, _fn=fn, _name=name):
                seen.append((_name, threading.current_thread().name))
                return _fn(*args)

            setattr(fake, name, wrapped)
    return seen


@pytest.mark.parametrize("state", ["idle", "under_load"])
def test_gpus_read_concurrently_give_the_serial_result(state):
    runner = lambda argv, timeout: CommandResult(True, TOPO)  # noqa: E731
    serial = GpuProbe(nvml=Nvml(FakePynvml(state)), topo_runner=runner, max_workers=1).collect(
        ProbeContext({})
    )
    fake = FakePynvml(state)
    seen = _threads_of_device_calls(fake)
    concurrent = GpuProbe(nvml=Nvml(fake), topo_runner=runner).collect(ProbeContext({}))
    assert concurrent == serial
    assert list(concurrent["gpus"]) == list(serial["gpus"])  # same order: NVML index
    lanes = {
        t
        for name, t in seen
        if name not in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID")
    }
    assert lanes == {"forensics-nvml-0", "forensics-nvml-1"}  # each GPU on its own NVML worker


def test_a_hung_call_on_one_gpu_stops_every_lane():
    fake = FakePynvml("idle", hang={"nvmlDeviceGetPowerUsage"})
    try:
        probe = GpuProbe(
            nvml=Nvml(fake, call_timeout_s=0.5), topo_runner=lambda a, t: CommandResult(True, TOPO)
        )
        data = probe.collect(ProbeContext({}))
    finally:
        fake.release.set()
    for g in data["gpus"].values():
        assert g["power"]["draw_mw"]["missing"] == "timed_out"
    assert probe.nvml.hung == "nvmlDeviceGetPowerUsage"
