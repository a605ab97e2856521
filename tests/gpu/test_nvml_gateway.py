"""The NVML wrapper: error mapping, fallbacks, field values, hangs, and the driverless path."""

import importlib
import json
import re

import pytest
from _fakenvml import FakePynvml

from forensics.gpu.nvml import Nvml
from forensics.model import is_missing

UUID0 = "GPU-00000000-1111-2222-3333-000000000000"


def nvml(state="idle", **kw):
    return Nvml(FakePynvml(state, **kw), call_timeout_s=kw.pop("timeout", 2.0))


def test_values_from_the_capture():
    nv = nvml("under_load")
    devs = nv.devices()
    assert [(i, u) for i, _, u in devs] == [
        (0, UUID0),
        (1, "GPU-00000000-1111-2222-3333-000000000001"),
    ]
    h = devs[0][1]
    assert nv.call("nvmlDeviceGetClockInfo", h, 1) == 1440
    assert nv.call("nvmlDeviceGetCurrentClocksEventReasons", h) == 4
    assert nv.versions()["driver_version"] == "580.159.04"
    assert nv.versions()["cuda_driver_version"] == "13.0"


def test_not_supported_keeps_its_reason():
    nv = nvml()
    h = nv.devices()[0][1]
    value = nv.call(
        "nvmlDeviceGetApplicationsClock", h, 3
    )  # video app clock: ERR NotSupported in capture
    assert value["missing"] == "not_supported"


def test_function_not_found_from_driver_and_missing_wrapper():
    nv = nvml(
        not_found={"nvmlDeviceGetPcieSpeed"}, absent={"nvmlDeviceGetGpuMaxPcieLinkGeneration"}
    )
    h = nv.devices()[0][1]
    assert nv.call("nvmlDeviceGetPcieSpeed", h)["missing"] == "function_not_found"
    assert nv.call("nvmlDeviceGetGpuMaxPcieLinkGeneration", h)["missing"] == "function_not_found"


def test_new_reason_call_falls_back_to_throttle_call():
    nv = nvml("under_load", not_found={"nvmlDeviceGetCurrentClocksEventReasons"})
    h = nv.devices()[0][1]
    value, used = nv.first(
        ("nvmlDeviceGetCurrentClocksEventReasons", h),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", h),
    )
    assert (value, used) == (4, "nvmlDeviceGetCurrentClocksThrottleReasons")


def test_gpu_lost_is_its_own_reason():
    nv = nvml(lost=True)
    h = nv.devices()[0][1]
    assert nv.call("nvmlDeviceGetPowerUsage", h)["missing"] == "gpu_lost"


def test_hung_call_times_out_and_later_calls_do_not_queue_behind_it():
    fake = FakePynvml("idle", hang={"nvmlDeviceGetPowerUsage"})
    nv = Nvml(fake, call_timeout_s=0.2)
    h = nv.devices()[0][1]
    assert nv.call("nvmlDeviceGetPowerUsage", h)["missing"] == "timed_out"
    after = nv.call("nvmlDeviceGetClockInfo", h, 1)
    assert after["missing"] == "timed_out" and "nvmlDeviceGetPowerUsage" in after["detail"]
    assert "nvmlDeviceGetClockInfo" not in fake.calls  # answered without touching NVML again
    fake.release.set()


def test_field_values_by_name_with_per_entry_return_codes():
    nv = nvml("under_load")
    h = nv.devices()[0][1]
    vals = nv.field_values(
        h,
        [
            "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP",
            "NVML_FI_DEV_PCIE_COUNT_BAD_TLP",
            "NVML_FI_DEV_POWER_AVERAGE",
            "NVML_FI_DEV_NOT_A_REAL_FIELD",
        ],
    )
    assert vals["NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"] == 2828517600  # ullVal (type 3)
    assert vals["NVML_FI_DEV_PCIE_COUNT_BAD_TLP"] == 33  # uiVal (type 1)
    assert vals["NVML_FI_DEV_POWER_AVERAGE"]["missing"] == "not_supported"  # entry nvmlReturn=3
    assert vals["NVML_FI_DEV_NOT_A_REAL_FIELD"]["missing"] == "function_not_found"


def test_field_ids_come_from_the_installed_module_not_hard_coded():
    src = open(importlib.import_module("forensics.gpu.readings").__file__).read()
    src += open(importlib.import_module("forensics.gpu.nvml").__file__).read()
    assert not re.search(r"nvmlDeviceGetFieldValues\([^)]*\d", src)


def test_bytes_are_decoded():
    fake = FakePynvml("idle")
    fake.nvmlSystemGetDriverVersion = lambda: b"580.159.04"
    assert Nvml(fake).call("nvmlSystemGetDriverVersion") == "580.159.04"


def test_init_failure_is_a_reason_not_an_exception():
    nv = Nvml(FakePynvml("idle", init_error="NVML_ERROR_LIBRARY_NOT_FOUND"))
    assert "no NVIDIA driver" in nv.unavailable()
    assert is_missing(nv.call("nvmlDeviceGetCount"))


def test_driverless_machine_with_real_pynvml():
    pytest.importorskip("pynvml")
    nv = Nvml()
    why = nv.unavailable()
    if why is None:
        pytest.skip("this machine has an NVIDIA driver")
    assert "driver" in why or "nvidia-ml-py" in why
    assert json.dumps(nv.call("nvmlDeviceGetCount"))


def test_function_not_found_is_logged_once(caplog):
    import logging

    from forensics.gpu import nvml as mod

    mod._LOGGED_NOT_FOUND.discard("nvmlDeviceGetPcieSpeed")
    nv = nvml(not_found={"nvmlDeviceGetPcieSpeed"})
    h = nv.devices()[0][1]
    with caplog.at_level(logging.INFO, logger="forensics.gpu.nvml"):
        nv.call("nvmlDeviceGetPcieSpeed", h)
        nv.call("nvmlDeviceGetPcieSpeed", h)
    assert sum("nvmlDeviceGetPcieSpeed" in r.getMessage() for r in caplog.records) == 1


def test_reason_bits_decode_by_value_and_keep_unknown_bits():
    from forensics.gpu.readings import decode_reasons

    assert decode_reasons(0x1) == ["gpu_idle"]
    assert decode_reasons(0x88) == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert decode_reasons(0x1FF)[-1] == "display_clock_setting"  # the H200's supported mask
    assert decode_reasons(0x804) == ["sw_power_cap", "unknown_0x800"]
    assert decode_reasons({"missing": "not_supported"}) == {"missing": "not_supported"}
