"""The ``gpu`` probe: every NVIDIA GPU's identity, clocks, limits, link, counters and users.

All values come from NVML through :class:`forensics.gpu.nvml.Nvml`; the topology matrix too
(:mod:`forensics_probes.gpu.topology`), except where NVML cannot give what ``nvidia-smi topo -m``
prints (network cards, NVLinks through an NVSwitch): then from that command's text. GPUs are
keyed by UUID and read concurrently, one thread and one NVML lane per GPU
(:meth:`GpuProbe._read_gpus`). docs/gpu-probe.md lists every field with its unit and NVML
call; the field table is :data:`forensics_probes.gpu.fields.FIELDS`.

Top-level data keys: ``driver_version``, ``cuda_driver_version``,
``nvml_version``, ``nvidia_ml_py_version``, ``gpu_count``, ``gpus``
(``{uuid: {...}}``, each with ``pci_topology``: bridges above it with their ACS
control, NUMA node, IOMMU group; from sysfs), ``topology`` (the ``nvidia-smi topo -m`` matrix,
its text and ``command``: that command, or the NVML calls that answered it), ``iommu`` (units, groups, mode), ``kernel_cmdline`` (``/proc/cmdline``), and ``sample`` (a :mod:`forensics.gpu.sampler` summary, only with
``--sample SECONDS``).

The probe never imports torch and never creates a CUDA context.
"""

from __future__ import annotations

import re
from typing import Any

from forensics_probes.gpu.fields import FIELDS, TYPES

from forensics.gpu.nvml import Nvml
from forensics.gpu.readings import (
    CLOCK_SM_MHZ,
    CLOCKS_EVENT_FIELDS,
    CURRENT_MHZ,
    PCIE_COUNTER_FIELDS,
    PSTATE,
    decode_reasons,
    read_processes,
    read_reason_masks,
    read_violations,
)
from forensics.model import MissingReason, is_missing, missing
from forensics.probe import JudgeContext, Probe, ProbeContext, ProbeResult

_CLOCKS = (
    ("graphics", "NVML_CLOCK_GRAPHICS", 0),
    ("sm", "NVML_CLOCK_SM", 1),
    ("mem", "NVML_CLOCK_MEM", 2),
    ("video", "NVML_CLOCK_VIDEO", 3),
)
_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_NVLINK_ERRORS = (
    ("replay", "NVML_NVLINK_ERROR_DL_REPLAY", 0),
    ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
TOPO_TIMEOUT_S = 3.0
MAX_READERS = 16  # GPUs read at once (one thread and one NVML lane each)


def _enabled(value: Any) -> Any:
    return value if is_missing(value) else ("enabled" if value else "disabled")


def _pair(value: Any, i: int) -> Any:
    return value if is_missing(value) else value[i]


class GpuProbe(Probe):
    """NVIDIA GPUs via NVML: see the module docstring."""

    name = "gpu"
    description = "NVIDIA GPUs via NVML: clocks, P-state, clocks-event reasons, PCIe, power, counters, NVLink, processes"
    hypotheses = (
        "gpu.throttling",
        "gpu.pcie-link",
        "gpu.contention",
        "gpu.config",
        "gpu.health",
        "gpu.topology",
        "driver.version",
        "gpu.memory",
        "nccl.transport",
    )
    fields = FIELDS
    map_fields = (
        "gpus",
        "gpus.*.nvlink.links",
        "topology.matrix",
        "topology.matrix.*",
        "sample.gpus",
        "kernel_cmdline.params",
        "iommu.group_types",
    )
    types = TYPES

    def __init__(
        self,
        nvml: Nvml | None = None,
        topo_runner=None,
        max_workers: int = MAX_READERS,
        nic_folder: str | None = None,
    ):
        from forensics_probes.gpu.topology import INFINIBAND

        self._nvml = nvml
        self._topo_runner = topo_runner
        self.max_workers = max_workers
        self.nic_folder = nic_folder or INFINIBAND

    @property
    def nvml(self) -> Nvml:
        """The NVML wrapper this probe reads through (created on first use; tests inject a fake)."""
        if self._nvml is None:
            self._nvml = Nvml()
        return self._nvml

    def extra_timeout_s(self, options: dict[str, Any]) -> float:
        """Extra seconds the runner allows for a ``--sample`` window."""
        sample_s = options.get("sample_s") or 0
        return float(sample_s) + 2.0 if sample_s else 0.0

    def available(self, ctx: ProbeContext) -> str | None:
        """Cheap check: NVML starts (``nvmlInit``) and sees at least one GPU."""
        why = self.nvml.unavailable()
        if why:
            return why
        count = self.nvml.call("nvmlDeviceGetCount")
        if is_missing(count):
            return f"nvmlDeviceGetCount failed: {count.get('detail', count['missing'])}"
        return None if count else "NVML sees no GPU"

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        import threading
        import time

        from forensics_probes.gpu import topology

        nv = self.nvml
        data: dict[str, Any] = dict(nv.versions())
        devices = nv.devices()
        if is_missing(devices):
            ctx.error("gpus", str(devices))
            data["gpus"] = devices
            return data
        data["gpu_count"] = len(devices)
        topo: dict[str, Any] = {}
        from forensics.procgroup import carry_children

        # carried: nvidia-smi starts in a session of its own, as the probe's other children do (out of
        # reach of the terminal's Ctrl-C, ended with the probe when its time is up)
        topo_thread = threading.Thread(
            target=carry_children(lambda: topo.update(v=self._read_topology(ctx))), daemon=True
        )
        matrix = topology.from_nvml(nv, devices, self.nic_folder)
        if isinstance(matrix, dict):
            topo["v"] = matrix
        else:  # what NVML cannot say (network cards, an NVSwitch...): nvidia-smi runs while NVML is read here
            topo_thread.start()

        sample_s = ctx.option("sample_s")
        sampler, t_start = None, time.perf_counter()
        if sample_s:
            from forensics.gpu.sampler import Sampler

            sampler = Sampler(nvml=nv).start()
        gpus = self._read_gpus(nv, devices)
        for _index, handle, uuid in devices:
            if handle is None:
                ctx.error(f"gpus.{uuid}", "nvmlDeviceGetHandleByIndex failed")
        data["gpus"] = gpus
        self._read_pci(data, gpus, ctx)
        if topo_thread.ident is not None:
            topo_thread.join(TOPO_TIMEOUT_S + 1.0)
        data["topology"] = topo.get(
            "v", missing(MissingReason.TIMED_OUT, "nvidia-smi topo -m did not finish")
        )
        if sampler is not None:
            time.sleep(max(0.0, float(sample_s) - (time.perf_counter() - t_start)))
            data["sample"] = sampler.stop()
        for uuid, gpu in gpus.items():
            for path, value in _failures(gpu, f"gpus.{uuid}")[:3]:
                ctx.error(path, str(value))
        return data

    @staticmethod
    def _read_pci(data: dict[str, Any], gpus: dict[str, Any], ctx: ProbeContext) -> None:
        """sysfs/procfs facts of :mod:`forensics.gpu.pci`: each GPU's bridges (ACS), NUMA node and IOMMU
        group; the host's IOMMU units and mode; the kernel command line (redacted)."""
        from forensics.gpu import pci

        for gpu in gpus.values():
            bus = gpu.get("pci_bus_id")
            gpu["pci_topology"] = (
                pci.device_topology(bus)
                if isinstance(bus, str)
                else missing(MissingReason.NOT_FOUND, "no PCI bus id from NVML")
            )
        raw = None
        try:
            with open(pci.PROC_CMDLINE, encoding="utf-8", errors="replace") as fh:
                raw = fh.read().strip()
        except OSError as exc:
            data["kernel_cmdline"] = missing(
                MissingReason.NOT_FOUND, f"{pci.PROC_CMDLINE}: {exc.strerror}"
            )
        params = pci.parse_cmdline(raw) if raw is not None else {}
        if raw is not None:
            data["kernel_cmdline"] = {
                "raw": ctx.redactor.text(raw, "gpu.kernel_cmdline"),
                "params": params,
            }
        state = pci.iommu_state()
        types = [
            get_type
            for g in gpus.values()
            if isinstance(g.get("pci_topology"), dict)
            for get_type in [g["pci_topology"].get("iommu_type")]
        ]
        data["iommu"] = {**state, "mode": pci.iommu_mode(params, state, types)}

    def _read_gpus(self, nv: Nvml, devices: list[tuple[int, Any, str]]) -> dict[str, Any]:
        """Every GPU's readings, keyed by UUID in NVML index order; GPUs are read concurrently.

        One thread per GPU (at most ``max_workers``), each calling NVML in its own
        :meth:`forensics.gpu.nvml.Nvml.lane`: an 8-GPU node takes about as long as one
        GPU (docs/gpu-probe.md, 'NVML access', gives one GPU's time). ``max_workers=1`` reads
        them one after another; the result is the same either way.
        """

        def one(dev: tuple[int, Any, str]) -> dict[str, Any]:
            index, handle, uuid = dev
            if handle is None:
                return {"index": index, "handle": missing(MissingReason.ERROR, "no NVML handle")}
            with nv.lane(index):
                return self._read_gpu(nv, index, handle, uuid)

        workers = max(1, min(len(devices), self.max_workers))
        if workers == 1:
            results = [one(d) for d in devices]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="forensics-gpu"
            ) as pool:
                results = list(pool.map(one, devices))
        return {uuid: res for (_, _, uuid), res in zip(devices, results)}

    # -- one GPU ----------------------------------------------------------------
    def _read_gpu(self, nv: Nvml, index: int, h: Any, uuid: str) -> dict[str, Any]:
        mem = nv.call("nvmlDeviceGetMemoryInfo", h)
        cc = nv.call("nvmlDeviceGetCudaComputeCapability", h)
        util = nv.call("nvmlDeviceGetUtilizationRates", h)
        gpu: dict[str, Any] = {
            "index": index,
            "uuid": uuid,
            "name": nv.call("nvmlDeviceGetName", h),
            "serial": nv.call("nvmlDeviceGetSerial", h),
            "pci_bus_id": self._bus_id(nv, h),
            "vbios_version": nv.call("nvmlDeviceGetVbiosVersion", h),
            "board_part_number": nv.call("nvmlDeviceGetBoardPartNumber", h),
            "architecture": nv.call("nvmlDeviceGetArchitecture", h),
            "compute_capability": cc if is_missing(cc) else f"{cc[0]}.{cc[1]}",
            "memory": {
                "total_bytes": mem if is_missing(mem) else int(mem.total),
                "used_bytes": mem if is_missing(mem) else int(mem.used),
            },
            "utilization": {
                "gpu_pct": util if is_missing(util) else int(util.gpu),
                "memory_pct": util if is_missing(util) else int(util.memory),
            },
            "clocks": self._read_clocks(nv, h),
            PSTATE: nv.call("nvmlDeviceGetPerformanceState", h),
        }
        masks = read_reason_masks(nv, h)
        gpu["clocks_event_reasons"] = {
            **masks,
            "active": decode_reasons(masks["current_mask"]),
            "supported": decode_reasons(masks["supported_mask"]),
        }
        gpu["pcie"] = self._read_pcie(nv, h)
        gpu["power"] = self._read_power(nv, h)
        gpu["temperature"] = self._read_temperature(nv, h)
        gpu["violation_ns"] = read_violations(nv, h)
        ev = nv.field_values(h, CLOCKS_EVENT_FIELDS.values())
        gpu["clocks_event_ns"] = {k: ev[f] for k, f in CLOCKS_EVENT_FIELDS.items()}
        gpu["ecc"] = self._read_ecc(nv, h)
        rows = nv.call("nvmlDeviceGetRemappedRows", h)
        gpu["remapped_rows"] = {
            k: _pair(rows, i)
            for i, k in enumerate(("correctable", "uncorrectable", "pending", "failure"))
        }
        gpu["retired_pages"] = self._read_retired(nv, h)
        gpu["modes"] = self._read_modes(nv, h)
        gpu["mig_devices"] = self._read_mig(nv, h, gpu["modes"]["mig_current"])
        gpu["nvlink"] = self._read_nvlink(nv, h)
        gpu["processes"] = read_processes(nv, h)
        return gpu

    @staticmethod
    def _bus_id(nv: Nvml, h: Any) -> Any:
        pci = nv.call("nvmlDeviceGetPciInfo", h)
        if is_missing(pci):
            return pci
        bus = getattr(pci, "busId", None) or getattr(
            pci, "busIdLegacy", ""
        )  # "00000000:00:06.0", as nvidia-smi
        return bus.decode() if isinstance(bus, bytes) else str(bus)

    @staticmethod
    def _read_clocks(nv: Nvml, h: Any) -> dict[str, Any]:
        out = {}
        for key, const, default in _CLOCKS:
            c = nv.constant(const, default)
            out[key] = {
                CURRENT_MHZ: nv.call("nvmlDeviceGetClockInfo", h, c),
                "max_mhz": nv.call("nvmlDeviceGetMaxClockInfo", h, c),
                "app_mhz": nv.call("nvmlDeviceGetApplicationsClock", h, c),
                "default_app_mhz": nv.call("nvmlDeviceGetDefaultApplicationsClock", h, c),
            }
        return out

    @staticmethod
    def _read_pcie(nv: Nvml, h: Any) -> dict[str, Any]:
        counters = nv.field_values(h, PCIE_COUNTER_FIELDS.values())
        replay = counters[PCIE_COUNTER_FIELDS["replay"]]
        if is_missing(replay):
            replay = nv.call("nvmlDeviceGetPcieReplayCounter", h)
        return {
            "gen_current": nv.call("nvmlDeviceGetCurrPcieLinkGeneration", h),
            "gen_max": nv.call("nvmlDeviceGetMaxPcieLinkGeneration", h),
            "gen_gpu_max": nv.call("nvmlDeviceGetGpuMaxPcieLinkGeneration", h),
            "width_current": nv.call("nvmlDeviceGetCurrPcieLinkWidth", h),
            "width_max": nv.call("nvmlDeviceGetMaxPcieLinkWidth", h),
            "speed_mbps": nv.call("nvmlDeviceGetPcieSpeed", h),
            "counters": {
                **{k: counters[f] for k, f in PCIE_COUNTER_FIELDS.items()},
                "replay": replay,
            },
        }

    @staticmethod
    def _read_power(nv: Nvml, h: Any) -> dict[str, Any]:
        cons = nv.call("nvmlDeviceGetPowerManagementLimitConstraints", h)
        return {
            "draw_mw": nv.call("nvmlDeviceGetPowerUsage", h),
            "limit_mw": nv.call("nvmlDeviceGetPowerManagementLimit", h),
            "enforced_limit_mw": nv.call("nvmlDeviceGetEnforcedPowerLimit", h),
            "default_limit_mw": nv.call("nvmlDeviceGetPowerManagementDefaultLimit", h),
            "min_limit_mw": _pair(cons, 0),
            "max_limit_mw": _pair(cons, 1),
            "energy_mj": nv.call("nvmlDeviceGetTotalEnergyConsumption", h),
        }

    @staticmethod
    def _read_temperature(nv: Nvml, h: Any) -> dict[str, Any]:
        out = {
            "gpu_c": nv.call("nvmlDeviceGetTemperature", h, nv.constant("NVML_TEMPERATURE_GPU", 0))
        }
        for key, const, default in (
            ("slowdown_c", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
            ("shutdown_c", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
            ("gpu_max_c", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX", 3),
            ("mem_max_c", "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 2),
        ):
            out[key] = nv.call("nvmlDeviceGetTemperatureThreshold", h, nv.constant(const, default))
        return out

    @staticmethod
    def _read_ecc(nv: Nvml, h: Any) -> dict[str, Any]:
        mode = nv.call("nvmlDeviceGetEccMode", h)
        out = {"mode_current": _enabled(_pair(mode, 0)), "mode_pending": _enabled(_pair(mode, 1))}
        for kind, ec in (
            ("corrected", nv.constant("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)),
            ("uncorrected", nv.constant("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)),
        ):
            for scope, sc in (
                ("volatile", nv.constant("NVML_VOLATILE_ECC", 0)),
                ("aggregate", nv.constant("NVML_AGGREGATE_ECC", 1)),
            ):
                out[f"{kind}_{scope}"] = nv.call("nvmlDeviceGetTotalEccErrors", h, ec, sc)
        return out

    @staticmethod
    def _read_retired(nv: Nvml, h: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, const, default in (
            ("single_bit_ecc", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
            ("double_bit_ecc", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
        ):
            pages = nv.call("nvmlDeviceGetRetiredPages", h, nv.constant(const, default))
            out[key] = pages if is_missing(pages) else len(pages)
        pending = nv.call("nvmlDeviceGetRetiredPagesPendingStatus", h)
        out["pending"] = _enabled(pending) if is_missing(pending) else bool(pending)
        return out

    @staticmethod
    def _read_modes(nv: Nvml, h: Any) -> dict[str, Any]:
        mig = nv.call("nvmlDeviceGetMigMode", h)
        compute = nv.call("nvmlDeviceGetComputeMode", h)
        return {
            "persistence": _enabled(nv.call("nvmlDeviceGetPersistenceMode", h)),
            "compute": compute
            if is_missing(compute)
            else _COMPUTE_MODES.get(compute, f"mode_{compute}"),
            "mig_current": _enabled(_pair(mig, 0)),
            "mig_pending": _enabled(_pair(mig, 1)),
        }

    @staticmethod
    def _read_mig(nv: Nvml, h: Any, mig_current: Any) -> Any:
        """MIG children (uuid, memory) of a parent in MIG mode; physical metrics stay on the parent."""
        if mig_current != "enabled":
            return missing(MissingReason.NOT_APPLICABLE, "MIG mode not enabled")
        count = nv.call("nvmlDeviceGetMaxMigDeviceCount", h)
        if is_missing(count):
            return count
        out = []
        for i in range(int(count)):
            child = nv.call("nvmlDeviceGetMigDeviceHandleByIndex", h, i)
            if is_missing(child):
                continue  # empty slot: NVML_ERROR_NOT_FOUND
            mem = nv.call("nvmlDeviceGetMemoryInfo", child)
            out.append(
                {
                    "slot": i,
                    "uuid": nv.call("nvmlDeviceGetUUID", child),
                    "gpu_instance_id": nv.call("nvmlDeviceGetGpuInstanceId", child),
                    "compute_instance_id": nv.call("nvmlDeviceGetComputeInstanceId", child),
                    "memory_total_bytes": mem if is_missing(mem) else int(mem.total),
                }
            )
        return out

    @staticmethod
    def _read_nvlink(nv: Nvml, h: Any) -> Any:
        links: dict[str, Any] = {}
        first_error = None
        for link in range(int(nv.constant("NVML_NVLINK_MAX_LINKS", 18))):
            state = nv.call("nvmlDeviceGetNvLinkState", h, link)
            if is_missing(state):
                first_error = first_error or state
                if state["missing"] in ("gpu_lost", "timed_out", "not_found"):
                    break
                continue  # unused link index: absent
            entry: dict[str, Any] = {
                "state": "active" if state else "inactive",
                "version": nv.call("nvmlDeviceGetNvLinkVersion", h, link),
            }
            if state:
                entry["errors"] = {
                    k: nv.call("nvmlDeviceGetNvLinkErrorCounter", h, link, nv.constant(c, d))
                    for k, c, d in _NVLINK_ERRORS
                }
            links[str(link)] = entry
        if not links:
            if first_error and first_error["missing"] in (
                "gpu_lost",
                "timed_out",
                "not_found",
                "no_permission",
            ):
                return first_error
            # PCIe-only GPUs answer NotSupported (or InvalidArgument) on every link index.
            return missing(
                MissingReason.NOT_SUPPORTED,
                "no NVLink"
                + (
                    f" (nvmlDeviceGetNvLinkState: {first_error.get('detail', '')})"
                    if first_error
                    else ""
                ),
            )
        return {
            "active_links": sum(1 for e in links.values() if e["state"] == "active"),
            "links": links,
        }

    # -- topology -------------------------------------------------------------
    def _read_topology(self, ctx: ProbeContext) -> Any:
        from forensics.readers import run_command

        runner = self._topo_runner or run_command
        res = runner(["nvidia-smi", "topo", "-m"], min(TOPO_TIMEOUT_S, ctx.timeout_s / 2))
        if not res.ok:
            return res.failure
        raw = _ANSI.sub("", res.stdout)
        return {"matrix": parse_topo(raw), "raw": raw, "command": "nvidia-smi topo -m"}

    # -- judging (pure) ---------------------------------------------------------
    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ):
        from forensics_probes.gpu.judge import judge_gpu

        return judge_gpu(before, after, jctx)

    def headline(self, data: dict[str, Any]) -> str:
        gpus = data.get("gpus")
        if not isinstance(gpus, dict) or is_missing(gpus):
            return ""
        names = sorted({str(g.get("name")) for g in gpus.values()})
        text = f"{len(gpus)} x {', '.join(names)}, driver {data.get('driver_version')}"
        window = data.get("sample")
        for entry in (window.get("gpus") or {}).values() if isinstance(window, dict) else ():
            sm = entry.get(CLOCK_SM_MHZ) if isinstance(entry, dict) else None
            if (
                sm is not None
                and entry.get("busy_samples")
                and isinstance(sm, dict)
                and "median" in sm
            ):
                reasons = ", ".join(
                    f"{r.replace('_', ' ')} {100 * f:.0f}%"
                    for r, f in (entry.get("reason_fraction") or {}).items()
                )
                text += f"; GPU {entry.get('index')} busy: SM {sm['median']} MHz" + (
                    f", {reasons}" if reasons else ""
                )
        return text


def _failures(obj: Any, path: str) -> list[tuple[str, Any]]:
    """(path, value) of missing values that mean a failure (GPU lost, hung call), not "unsupported"."""
    if is_missing(obj):
        return [(path, obj)] if obj["missing"] in ("gpu_lost", "timed_out") else []
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _failures(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _failures(v, f"{path}.{i}")
    return out


def parse_topo(text: str) -> dict[str, dict[str, str]]:
    """Parse ``nvidia-smi topo -m`` text into ``{"GPU0": {"GPU1": "NV18", "CPU Affinity": "0-31"}}``.

    Rows are the lines starting with a device label (GPU0, NIC0...) before the
    legend; columns are the header's tab-separated labels.
    """
    lines = [ln for ln in text.splitlines()]
    header = next((ln for ln in lines if ln.strip().startswith("GPU0")), None)
    if header is None:
        return {}
    cols = [c.strip() for c in header.strip("\n").split("\t") if c.strip()]
    out: dict[str, dict[str, str]] = {}
    for ln in lines[lines.index(header) + 1 :]:
        if not ln.strip() or ln.strip().startswith("Legend"):
            break
        cells = [c.strip() for c in ln.split("\t")]
        label, values = cells[0], cells[1:]
        # Empty cells (e.g. a blank before "GPU NUMA ID") come from double tabs; drop them.
        values = [v for v in values if v != ""]
        out[label] = {c: v for c, v in zip(cols, values)}
    return out
