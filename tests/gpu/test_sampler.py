"""The window sampler: summaries of busy samples, counter deltas, and the no-NVML path."""

import json

from _fakenvml import FakePynvml, load_capture

from forensics.gpu.nvml import Nvml
from forensics.gpu.sampler import Sampler, summarise

UUID0 = "GPU-00000000-1111-2222-3333-000000000000"


def _sample(dev):
    return {
        "clock_sm_mhz": dev["clock_sm_mhz"],
        "clock_mem_mhz": dev["clock_mem_mhz"],
        "power_mw": dev["power_mw"],
        "util_gpu_pct": dev["utilization"]["gpu"],
        "temp_c": dev["temp_c"],
        "pcie_gen": dev["pcie_gen_curr"],
        "pcie_width": dev["pcie_width_curr"],
        "pstate": dev["pstate"],
        "reasons": dev["clocks_event_reasons"],
    }


def test_summary_counts_only_busy_samples():
    cap = load_capture()
    idle, load = cap["idle"]["devices"][0], cap["under_load"]["devices"][0]
    samples = [_sample(idle)] * 2 + [_sample(load)] * 8
    start = {"violation_power_ns": 0, "clocks_event_sw_power_cap_ns": 0}
    end = {"violation_power_ns": 2914347072, "clocks_event_sw_power_cap_ns": 2828517600}
    s = summarise(0, "NVIDIA H200", samples, start, end, [])
    assert (s["samples"], s["busy_samples"]) == (10, 8)
    assert s["clock_sm_mhz"] == {
        "min": 1440,
        "median": 1440,
        "max": 1440,
    }  # the idle 345 MHz is left out
    assert s["reason_fraction"] == {"sw_power_cap": 1.0}
    assert s["counter_deltas"]["clocks_event_sw_power_cap_ns"] == 2828517600
    json.dumps(s)


def test_idle_only_window_has_no_statistics():
    dev = load_capture()["idle"]["devices"][0]
    s = summarise(0, "NVIDIA H200", [_sample(dev)] * 5, {}, {}, [])
    assert s["busy_samples"] == 0 and s["clock_sm_mhz"]["missing"] == "not_applicable"
    assert s["reason_fraction"] == {}


def test_sampler_over_fake_nvml_and_context_manager():
    with Sampler(interval_s=0.02, nvml=Nvml(FakePynvml("under_load"))) as s:
        import time

        time.sleep(0.1)
    summary = s.summary
    assert set(summary) == {"duration_s", "interval_s", "gpus"}
    g = summary["gpus"][UUID0]
    assert g["index"] == 0 and g["name"] == "NVIDIA H200" and g["samples"] >= 1
    assert g["counter_deltas"]["violation_power_ns"] == 0  # static capture: no growth
    assert g["counter_deltas"]["energy_mj"]["missing"] == "not_supported"
    assert g["processes"][0]["pid"] == 559
    json.dumps(summary)


def test_sampler_without_nvml_never_raises():
    s = Sampler(nvml=Nvml(FakePynvml("idle", init_error="NVML_ERROR_DRIVER_NOT_LOADED"))).start()
    out = s.stop()
    assert out["missing"] == "not_found" and "not loaded" in out["detail"]
