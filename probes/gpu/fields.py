"""Field table of the ``gpu`` probe: unit, label, NVML source, volatile/counter flags.

Read by the probe's judge and by the report (STYLE habit 10). Paths are
dotted, ``*`` matches one element (the GPU UUID, a link number).
"""

from __future__ import annotations

from forensics.gpu.readings import CURRENT_MHZ, PSTATE
from forensics.probe import FieldSpec

_G = "gpus.*."

FIELDS: dict[str, FieldSpec] = {
    "driver_version": FieldSpec("", "NVIDIA driver", "nvmlSystemGetDriverVersion"),
    "cuda_driver_version": FieldSpec(
        "", "CUDA version the driver supports", "nvmlSystemGetCudaDriverVersion"
    ),
    "nvml_version": FieldSpec("", "NVML version", "nvmlSystemGetNVMLVersion"),
    "nvidia_ml_py_version": FieldSpec("", "nvidia-ml-py", "package metadata"),
    "gpu_count": FieldSpec("", "GPUs", "nvmlDeviceGetCount"),
    _G + "name": FieldSpec("", "GPU model", "nvmlDeviceGetName"),
    _G + "serial": FieldSpec("", "serial number", "nvmlDeviceGetSerial"),
    _G + "pci_bus_id": FieldSpec("", "PCI bus id", "nvmlDeviceGetPciInfo"),
    _G + "vbios_version": FieldSpec("", "VBIOS", "nvmlDeviceGetVbiosVersion"),
    _G + "memory.total_bytes": FieldSpec("B", "memory total", "nvmlDeviceGetMemoryInfo"),
    _G + "memory.used_bytes": FieldSpec(
        "B", "memory used", "nvmlDeviceGetMemoryInfo", volatile=True
    ),
    _G + "utilization.gpu_pct": FieldSpec(
        "%", "GPU utilization", "nvmlDeviceGetUtilizationRates", volatile=True
    ),
    _G + "utilization.memory_pct": FieldSpec(
        "%", "memory utilization", "nvmlDeviceGetUtilizationRates", volatile=True
    ),
    f"{_G}clocks.*.{CURRENT_MHZ}": FieldSpec(
        "MHz", "current clock", "nvmlDeviceGetClockInfo", volatile=True
    ),
    _G + "clocks.*.max_mhz": FieldSpec("MHz", "max clock", "nvmlDeviceGetMaxClockInfo"),
    _G + "clocks.*.app_mhz": FieldSpec(
        "MHz", "application clock", "nvmlDeviceGetApplicationsClock"
    ),
    _G + "clocks.*.default_app_mhz": FieldSpec(
        "MHz", "default application clock", "nvmlDeviceGetDefaultApplicationsClock"
    ),
    _G + PSTATE: FieldSpec("", "P-state", "nvmlDeviceGetPerformanceState", volatile=True),
    _G + "clocks_event_reasons.current_mask": FieldSpec(
        "bitmask", "clocks-event reasons", "nvmlDeviceGetCurrentClocksEventReasons", volatile=True
    ),
    _G + "clocks_event_reasons.active": FieldSpec(
        "", "active clocks-event reasons", "nvmlDeviceGetCurrentClocksEventReasons", volatile=True
    ),
    _G + "clocks_event_reasons.supported_mask": FieldSpec(
        "bitmask", "supported clocks-event reasons", "nvmlDeviceGetSupportedClocksEventReasons"
    ),
    _G + "pcie.gen_current": FieldSpec(
        "", "PCIe generation", "nvmlDeviceGetCurrPcieLinkGeneration", volatile=True
    ),
    _G + "pcie.gen_max": FieldSpec(
        "", "PCIe max generation (GPU in this slot)", "nvmlDeviceGetMaxPcieLinkGeneration"
    ),
    _G + "pcie.gen_gpu_max": FieldSpec(
        "", "PCIe max generation (GPU)", "nvmlDeviceGetGpuMaxPcieLinkGeneration"
    ),
    _G + "pcie.width_current": FieldSpec(
        "lanes", "PCIe width", "nvmlDeviceGetCurrPcieLinkWidth", volatile=True
    ),
    _G + "pcie.width_max": FieldSpec("lanes", "PCIe max width", "nvmlDeviceGetMaxPcieLinkWidth"),
    _G + "pcie.speed_mbps": FieldSpec(
        "MB/s", "PCIe link speed per lane", "nvmlDeviceGetPcieSpeed", volatile=True
    ),
    _G + "pcie.counters.*": FieldSpec(
        "count", "PCIe error counter", "nvmlDeviceGetFieldValues(NVML_FI_DEV_PCIE_*)", counter=True
    ),
    _G + "power.draw_mw": FieldSpec("mW", "power draw", "nvmlDeviceGetPowerUsage", volatile=True),
    _G + "power.limit_mw": FieldSpec(
        "mW", "power limit (configured)", "nvmlDeviceGetPowerManagementLimit"
    ),
    _G + "power.enforced_limit_mw": FieldSpec(
        "mW", "power limit (enforced)", "nvmlDeviceGetEnforcedPowerLimit"
    ),
    _G + "power.default_limit_mw": FieldSpec(
        "mW", "default power limit", "nvmlDeviceGetPowerManagementDefaultLimit"
    ),
    _G + "power.min_limit_mw": FieldSpec(
        "mW", "min power limit", "nvmlDeviceGetPowerManagementLimitConstraints"
    ),
    _G + "power.max_limit_mw": FieldSpec(
        "mW", "max power limit", "nvmlDeviceGetPowerManagementLimitConstraints"
    ),
    _G + "power.energy_mj": FieldSpec(
        "mJ",
        "energy since driver load",
        "nvmlDeviceGetTotalEnergyConsumption",
        volatile=True,
        counter=True,
    ),
    _G + "temperature.gpu_c": FieldSpec(
        "C", "GPU temperature", "nvmlDeviceGetTemperature", volatile=True
    ),
    _G + "temperature.*": FieldSpec(
        "C", "temperature threshold", "nvmlDeviceGetTemperatureThreshold"
    ),
    _G + "violation_ns.*": FieldSpec(
        "ns",
        "violation time",
        "NVML_FI_DEV_PERF_POLICY_* / nvmlDeviceGetViolationStatus",
        counter=True,
    ),
    _G + "clocks_event_ns.*": FieldSpec(
        "ns", "clocks-event time", "NVML_FI_DEV_CLOCKS_EVENT_REASON_*", counter=True
    ),
    _G + "ecc.mode_current": FieldSpec("", "ECC mode", "nvmlDeviceGetEccMode"),
    _G + "ecc.mode_pending": FieldSpec("", "ECC mode after reboot", "nvmlDeviceGetEccMode"),
    _G + "ecc.*": FieldSpec("count", "ECC errors", "nvmlDeviceGetTotalEccErrors", counter=True),
    _G + "remapped_rows.*": FieldSpec(
        "rows", "remapped rows", "nvmlDeviceGetRemappedRows", counter=True
    ),
    _G + "retired_pages.*": FieldSpec(
        "pages", "retired pages", "nvmlDeviceGetRetiredPages", counter=True
    ),
    _G + "modes.persistence": FieldSpec("", "persistence mode", "nvmlDeviceGetPersistenceMode"),
    _G + "modes.compute": FieldSpec("", "compute mode", "nvmlDeviceGetComputeMode"),
    _G + "modes.mig_current": FieldSpec("", "MIG mode", "nvmlDeviceGetMigMode"),
    _G + "modes.mig_pending": FieldSpec("", "MIG mode after reset", "nvmlDeviceGetMigMode"),
    _G + "nvlink.active_links": FieldSpec("links", "active NVLinks", "nvmlDeviceGetNvLinkState"),
    _G + "nvlink.links.*.state": FieldSpec("", "NVLink state", "nvmlDeviceGetNvLinkState"),
    _G + "nvlink.links.*.version": FieldSpec("", "NVLink version", "nvmlDeviceGetNvLinkVersion"),
    _G + "nvlink.links.*.errors.*": FieldSpec(
        "count", "NVLink errors", "nvmlDeviceGetNvLinkErrorCounter", counter=True
    ),
    _G + "processes": FieldSpec(
        "", "processes on the GPU", "nvmlDeviceGetComputeRunningProcesses", volatile=True
    ),
    "topology.matrix": FieldSpec(
        "", "GPU interconnect", "nvidia-smi topo -m's matrix, from NVML or that command"
    ),
    "topology.raw": FieldSpec(
        "", "nvidia-smi topo -m text", "that command, or the same text built from NVML"
    ),
    "topology.command": FieldSpec("", "where the matrix came from", "nvidia-smi topo -m, or NVML"),
    "sample": FieldSpec("", "sampled window (--sample)", "forensics.gpu.sampler", volatile=True),
}

# What each field must hold, checked on load (forensics.fieldtypes): a wrong type refuses the file, an
# impossible reading (NaN, a negative power) becomes a missing value ("malformed value").
_N = "number>=0"
TYPES: dict[str, str] = {
    "driver_version": "string",
    "cuda_driver_version": "string",
    "gpu_count": "integer>=0",
    "gpus": "mapping",
    "gpus.*": "mapping",
    "topology": "mapping",
    "sample": "mapping",
    _G + "index": "integer>=0",
    _G + "uuid": "string",
    _G + "name": "string",
    _G + "pci_bus_id": "string",
    **{
        _G + k: "mapping"
        for k in (
            "memory",
            "utilization",
            "clocks",
            "clocks.*",
            "clocks_event_reasons",
            "pcie",
            "pcie.counters",
            "power",
            "temperature",
            "violation_ns",
            "clocks_event_ns",
            "ecc",
            "remapped_rows",
            "modes",
            "nvlink",
            "nvlink.links",
            "nvlink.links.*",
        )
    },
    _G + "memory.*": _N,
    _G + "utilization.*": _N,
    _G + "clocks.*.*": _N,
    _G + PSTATE: "integer>=0",
    _G + "clocks_event_reasons.active": "list",
    _G + "clocks_event_reasons.active.*": "string",
    _G + "clocks_event_reasons.current_mask": "integer>=0",
    _G + "clocks_event_reasons.supported_mask": "integer>=0",
    **{
        _G + "pcie." + k: _N
        for k in (
            "gen_current",
            "gen_max",
            "gen_gpu_max",
            "width_current",
            "width_max",
            "speed_mbps",
        )
    },
    _G + "pcie.counters.*": _N,
    _G + "power.*": _N,
    _G + "temperature.*": "number",
    _G + "violation_ns.*": _N,
    _G + "clocks_event_ns.*": _N,
    _G + "remapped_rows.*": _N,
    _G + "nvlink.active_links": "integer>=0",
    _G + "processes": "list",
    _G + "processes.*": "mapping",
}
