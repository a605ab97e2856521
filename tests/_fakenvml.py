"""A fake ``pynvml`` module that replays the real H200 capture (tests/fixtures/h200x2/nvml_torch.json).

Each function answers from the capture of one state (``idle`` or ``under_load``).
Values the capture recorded as ``"ERR NVMLError_X: ..."`` raise that NVML error;
calls the capture did not record raise NotSupported (we do not invent readings).
Errors and constants are the real nvidia-ml-py ones, so the wrapper sees what it
would see on a machine. Variants: ``not_found`` (FunctionNotFound from the driver),
``absent`` (wrapper missing from an old nvidia-ml-py: AttributeError), ``lost``
(every device call raises GpuIsLost), ``hang`` (the call blocks), ``init_error``.

Topology calls (``topology=``) answer only when a test asks, so that other tests keep reading the
``nvidia-smi topo -m`` text they pass: CPU affinity and the NUMA node id come from the capture; the
far end of every active NVLink is the other GPU, the memory affinity NUMA node 0 and the PCIe common
ancestor (for GPUs without NVLinks between them) are what nvidia-smi printed on that machine
(tests/fixtures/h200x2/nvidia-smi-topo.txt, the shared capture of that machine: NV18, NUMA Affinity 0).
``topology`` is a dict of overrides: ``far_type`` (NVML_NVLINK_DEVICE_TYPE_*), ``ancestor``
(an NVML_TOPOLOGY_* level), ``memory_nodes`` (mask words).
"""

from __future__ import annotations

import json
import threading
import types
from pathlib import Path

import pynvml as real

FIXTURE = Path(__file__).parent / "fixtures" / "h200x2" / "nvml_torch.json"
_CLOCK_NAMES = {0: "graphics", 1: "sm", 2: "mem", 3: "video"}


def load_capture() -> dict:
    return json.loads(FIXTURE.read_text())


def err(name_or_code):
    code = name_or_code if isinstance(name_or_code, int) else getattr(real, name_or_code)
    return real.NVMLError(code)


def _err_from_text(text: str):
    # "ERR NVMLError_NotSupported: Not Supported"
    cls = text.split()[1].rstrip(":")
    for code_name in dir(real):
        if code_name.startswith("NVML_ERROR_"):
            e = real.NVMLError(getattr(real, code_name))
            if type(e).__name__ == cls:
                return e
    return real.NVMLError(real.NVML_ERROR_UNKNOWN)


class _H:
    def __init__(self, i):
        self.i = i


class FakePynvml(types.ModuleType):
    def __init__(
        self,
        state="idle",
        *,
        not_found=(),
        absent=(),
        lost=False,
        hang=(),
        init_error=None,
        capture=None,
        edit=None,
        topology=None,
    ):
        super().__init__("pynvml")
        self._topology = topology
        self._absent = set()
        cap = capture or load_capture()
        self._r = json.loads(json.dumps(cap[state]))
        if edit:
            edit(self._r)
        for k in dir(real):
            if k.startswith(("NVML_", "NVMLError")):
                setattr(self, k, getattr(real, k))
        self.NVMLError = real.NVMLError
        self.release = threading.Event()
        self.calls = []
        self._init_error = init_error
        for name in dir(type(self)):
            if name.startswith("nvml") and name not in absent:
                fn = getattr(self, name)
                setattr(self, name, self._wrap(name, fn, name in not_found, lost, name in hang))
        self._absent = set(absent)

    def __getattribute__(self, name):
        if name.startswith("nvml") and name in object.__getattribute__(self, "_absent"):
            raise AttributeError(name)  # wrapper missing from an old nvidia-ml-py
        return object.__getattribute__(self, name)

    def _wrap(self, name, fn, not_found, lost, hang):
        def call(*args):
            self.calls.append(name)
            if hang:
                self.release.wait(30)
            if not_found:
                raise err("NVML_ERROR_FUNCTION_NOT_FOUND")
            if (
                lost
                and name.startswith("nvmlDevice")
                and name not in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")
            ):
                raise err("NVML_ERROR_GPU_IS_LOST")
            return fn(*args)

        return call

    # helpers
    def _d(self, h):
        return self._r["devices"][h.i]

    def _v(self, value):
        if isinstance(value, str) and value.startswith("ERR "):
            raise _err_from_text(value)
        return value

    def _key(self, h, key):
        if key not in self._d(h):
            raise err("NVML_ERROR_NOT_SUPPORTED")
        return self._v(self._d(h)[key])

    # system
    def nvmlInit(self):
        if self._init_error:
            raise err(self._init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self._r["driver"]

    def nvmlSystemGetCudaDriverVersion(self):
        return self._r["cuda_driver"]

    def nvmlSystemGetNVMLVersion(self):
        return self._r["nvml_version"]

    def nvmlDeviceGetCount(self):
        return len(self._r["devices"])

    def nvmlDeviceGetHandleByIndex(self, i):
        return _H(i)

    # identity
    def nvmlDeviceGetUUID(self, h):
        return self._key(h, "uuid")

    def nvmlDeviceGetName(self, h):
        return self._key(h, "name")

    def nvmlDeviceGetSerial(self, h):
        return self._key(h, "serial")

    def nvmlDeviceGetVbiosVersion(self, h):
        return self._key(h, "vbios")

    def nvmlDeviceGetBoardPartNumber(self, h):
        return self._key(h, "board_part")

    def nvmlDeviceGetArchitecture(self, h):
        return self._key(h, "arch")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return tuple(self._key(h, "cuda_cc"))

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=self._key(h, "pci_bus_id"))

    def nvmlDeviceGetMemoryInfo(self, h):
        m = self._key(h, "memory")
        return types.SimpleNamespace(total=m["total"], used=m["used"], free=m["free"])

    def nvmlDeviceGetUtilizationRates(self, h):
        u = self._key(h, "utilization")
        return types.SimpleNamespace(gpu=u["gpu"], memory=u["mem"])

    # clocks
    def nvmlDeviceGetClockInfo(self, h, t):
        return self._key(h, f"clock_{_CLOCK_NAMES[t]}_mhz")

    def nvmlDeviceGetMaxClockInfo(self, h, t):
        return self._key(h, f"max_clock_{_CLOCK_NAMES[t]}_mhz")

    def nvmlDeviceGetApplicationsClock(self, h, t):
        return self._key(h, f"app_clock_{_CLOCK_NAMES[t]}_mhz")

    def nvmlDeviceGetDefaultApplicationsClock(self, h, t):
        return self._key(h, f"default_app_clock_{_CLOCK_NAMES[t]}_mhz")

    def nvmlDeviceGetPerformanceState(self, h):
        return self._key(h, "pstate")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._key(h, "clocks_event_reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._key(h, "clocks_throttle_reasons")

    def nvmlDeviceGetSupportedClocksEventReasons(self, h):
        return self._key(h, "supported_clocks_event_reasons")

    def nvmlDeviceGetSupportedClocksThrottleReasons(self, h):
        return self._key(h, "supported_clocks_event_reasons")

    # pcie
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._key(h, "pcie_gen_curr")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._key(h, "pcie_gen_max")

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h):
        return self._key(h, "pcie_gen_gpu_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._key(h, "pcie_width_curr")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._key(h, "pcie_width_max")

    def nvmlDeviceGetPcieSpeed(self, h):
        return self._key(h, "pcie_speed_mbps")

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return self._key(h, "pcie_replay_counter")

    # power, temperature
    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._key(h, "temp_c")

    def nvmlDeviceGetPowerUsage(self, h):
        return self._key(h, "power_mw")

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self._key(h, "power_limit_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._key(h, "enforced_power_limit_mw")

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self._key(h, "power_default_limit_mw")

    def nvmlDeviceGetTemperatureThreshold(self, h, t):
        raise err("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        raise err("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        raise err("NVML_ERROR_NOT_SUPPORTED")

    # modes, health
    def nvmlDeviceGetPersistenceMode(self, h):
        return self._key(h, "persistence_mode")

    def nvmlDeviceGetComputeMode(self, h):
        return self._key(h, "compute_mode")

    def nvmlDeviceGetMigMode(self, h):
        return tuple(self._key(h, "mig_mode"))

    def nvmlDeviceGetEccMode(self, h):
        return tuple(self._key(h, "ecc_mode"))

    def nvmlDeviceGetRemappedRows(self, h):
        return tuple(self._key(h, "remapped_rows"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self._key(h, "retired_pages_pending")

    def nvmlDeviceGetRetiredPages(self, h, cause):
        raise err("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetTotalEccErrors(self, h, etype, counter):
        if (etype, counter) == (1, 0):
            return self._key(h, "ecc_uncorrected_volatile")
        raise err("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetViolationStatus(self, h, policy):
        key = {0: "violation_power", 1: "violation_thermal", 2: "violation_sync_boost"}.get(policy)
        v = self._key(h, key) if key else self._key(h, "no such key")
        return types.SimpleNamespace(referenceTime=v["ref_ns"], violationTime=v["violation_ns"])

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [
            types.SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._key(h, "compute_procs")
        ]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    # nvlink
    def _link(self, h, link):
        links = self._key(h, "nvlink")
        if link >= len(links):
            raise err("NVML_ERROR_INVALID_ARGUMENT")
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self._link(h, link)["state"]

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return self._link(h, link)["version"]

    def nvmlDeviceGetNvLinkErrorCounter(self, h, link, counter):
        raise err("NVML_ERROR_NOT_SUPPORTED")

    # topology (only when the test passes topology=...: otherwise FunctionNotFound)
    def _topo(self, key, default):
        if self._topology is None:
            raise err("NVML_ERROR_FUNCTION_NOT_FOUND")
        return self._topology.get(key, default)

    def nvmlDeviceGetCpuAffinity(self, h, size):
        self._topo("cpu", None)
        return (list(self._key(h, "cpu_affinity")) + [0] * size)[:size]

    def nvmlDeviceGetMemoryAffinity(self, h, size, scope):
        return (list(self._topo("memory_nodes", [1])) + [0] * size)[:size]

    def nvmlDeviceGetNumaNodeId(self, h):
        self._topo("numa", None)
        return self._key(h, "numa_node")

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        self._link(h, link)
        return self._topo("far_type", real.NVML_NVLINK_DEVICE_TYPE_GPU)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        self._link(h, link)
        self._topo("far", None)
        other = self._r["devices"][1 - h.i] if len(self._r["devices"]) == 2 else self._d(h)
        return types.SimpleNamespace(busId=other["pci_bus_id"])

    def nvmlDeviceGetTopologyCommonAncestor(self, h1, h2):
        return self._topo("ancestor", real.NVML_TOPOLOGY_SYSTEM)

    # field values
    def nvmlDeviceGetFieldValues(self, h, ids):
        fv = self._key(h, "field_values")
        out = []
        for fid in ids:
            names = [n for n in fv if getattr(real, n, None) == fid]
            if not names:
                out.append(
                    types.SimpleNamespace(
                        fieldId=fid,
                        nvmlReturn=real.NVML_ERROR_NOT_SUPPORTED,
                        valueType=3,
                        value=types.SimpleNamespace(ullVal=0),
                    )
                )
                continue
            e = fv[names[0]]
            out.append(
                types.SimpleNamespace(
                    fieldId=fid,
                    nvmlReturn=e["ret"],
                    valueType=e["type"],
                    value=types.SimpleNamespace(ullVal=e["ull"], uiVal=e["ui"], ulVal=e["ull"]),
                )
            )
        return out
