"""Probe ``host``: the CPU side of the machine, the usual suspect for launch-bound steps.

Fields (all under ``data``):

- ``cpu.model`` -- ``/proc/cpuinfo`` "model name" (first CPU).
- ``cpu.logical_cores`` / ``cpu.physical_cores`` -- ``psutil.cpu_count()``.
- ``cpu.affinity_cores`` -- ``os.sched_getaffinity(0)``: CPUs this process may run on.
- ``cpu.freq_current_mhz`` / ``freq_min_mhz`` / ``freq_max_mhz`` -- ``psutil.cpu_freq()``
  (sysfs cpufreq); missing in VMs without cpufreq.
- ``cpu.governor`` -- ``/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor``.
- ``load_avg_1m/5m/15m`` -- ``os.getloadavg()`` (volatile).
- ``memory.total_bytes/available_bytes/used_bytes``, ``swap.total_bytes/used_bytes`` --
  ``psutil.virtual_memory()`` / ``swap_memory()`` (used/available volatile).
- ``kernel`` -- ``platform.release()``; ``os_release`` -- ``/etc/os-release`` PRETTY_NAME.
- ``uptime_s`` -- now minus ``psutil.boot_time()`` (volatile).
- ``container`` -- ``{"in_container", "kind"}`` from /.dockerenv, /run/.containerenv,
  ``/proc/1/cgroup``, ``$container``.
- ``cgroup.cpu_limit_cores`` -- cgroup v2 ``cpu.max`` (or v1 cfs quota/period);
  ``cgroup.memory_limit_bytes`` -- ``memory.max`` (v1 ``memory.limit_in_bytes``);
  ``"max"`` in the file is recorded as missing/not_applicable (no limit).
- ``numa_nodes`` -- ``/sys/devices/system/node/node*/cpulist``: ``{node: cpulist}``.
- ``thp_enabled`` / ``thp_defrag`` -- ``/sys/kernel/mm/transparent_hugepage/*`` (the [chosen] value).
- ``top_processes`` -- the 5 processes using the most CPU over a 0.05 s window
  (``psutil`` cpu_times): pid, name, user, cpu_pct, rss_bytes (volatile). Command
  lines are not recorded (they can hold secrets).

Judged hypothesis: ``host.cpu``.
"""

from __future__ import annotations

import os
import platform
import re
import time
from typing import Any

from forensics.model import (
    Finding,
    MissingReason,
    Severity,
    implicated,
    inconclusive,
    is_missing,
    is_unrecorded,
    missing,
    ruled_out,
)
from forensics.probe import FieldSpec, JudgeContext, Probe, ProbeContext, ProbeResult
from forensics.readers import read_first_line, read_text

CGROUP_ROOT = "/sys/fs/cgroup"


def parse_cpuinfo_model(text: str | None):
    """First "model name" (x86) or "Model"/"CPU part" (Arm) value of /proc/cpuinfo text."""
    if not text:
        return missing(MissingReason.NOT_FOUND, "/proc/cpuinfo")
    for key in ("model name", "Model", "Hardware", "cpu model"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return missing(MissingReason.NOT_SUPPORTED, "no model name in /proc/cpuinfo")


def parse_bracketed(text: str | None, source: str):
    """The ``[chosen]`` word of a sysfs multiple-choice file such as THP's ``enabled``."""
    if text is None:
        return missing(MissingReason.NOT_FOUND, source)
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip()


def parse_os_release(text: str | None):
    """PRETTY_NAME of /etc/os-release text."""
    if not text:
        return missing(MissingReason.NOT_FOUND, "/etc/os-release")
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    return m.group(1) if m else missing(MissingReason.NOT_SUPPORTED, "no PRETTY_NAME")


def parse_cpu_max(text: str | None):
    """cgroup v2 ``cpu.max`` ("quota period" or "max period") -> cores as float."""
    if text is None:
        return missing(MissingReason.NOT_FOUND, "cpu.max")
    parts = text.split()
    if not parts or parts[0] == "max":
        return missing(MissingReason.NOT_APPLICABLE, "no CPU limit")
    try:
        return round(int(parts[0]) / int(parts[1] if len(parts) > 1 else 100000), 3)
    except ValueError:
        return missing(MissingReason.ERROR, f"unparsable cpu.max {text.strip()!r}")


def parse_memory_max(text: str | None):
    """cgroup ``memory.max`` / ``memory.limit_in_bytes`` -> bytes; "max" or huge = no limit."""
    if text is None:
        return missing(MissingReason.NOT_FOUND, "memory.max")
    raw = text.strip()
    if raw == "max":
        return missing(MissingReason.NOT_APPLICABLE, "no memory limit")
    try:
        value = int(raw)
    except ValueError:
        return missing(MissingReason.ERROR, f"unparsable memory limit {raw!r}")
    return missing(MissingReason.NOT_APPLICABLE, "no memory limit") if value >= 1 << 60 else value


def detect_container(
    cgroup_text: str | None, env: dict[str, str], exists=os.path.exists
) -> dict[str, Any]:
    """Guess whether we run in a container, and which kind, from cheap markers."""
    if exists("/.dockerenv"):
        return {"in_container": True, "kind": "docker"}
    if exists("/run/.containerenv"):
        return {"in_container": True, "kind": "podman"}
    if env.get("container"):
        return {"in_container": True, "kind": env["container"]}
    for marker in ("kubepods", "docker", "containerd", "lxc"):
        if cgroup_text and marker in cgroup_text:
            return {"in_container": True, "kind": marker}
    return {"in_container": False, "kind": None}


class HostProbe(Probe):
    """CPU, memory, kernel, container/cgroup limits, NUMA, THP and the busiest processes."""

    name = "host"
    description = "CPU model/cores/frequency/governor, load, memory, kernel, cgroup limits, NUMA, THP, top processes"
    hypotheses = ("host.cpu",)
    map_fields = ("numa_nodes",)
    types = {
        "cpu": "mapping",
        "cpu.model": "string?",
        "cpu.logical_cores": "integer>=0?",
        "cpu.physical_cores": "integer>=0?",
        "cpu.affinity_cores": "integer>=0?",
        "kernel": "string",
        "memory": "mapping",
        "memory.*": "number>=0",
        "swap": "mapping",
        "swap.*": "number>=0",
        "cgroup": "mapping",
        "container": "mapping",
        "numa_nodes": "mapping",
        "top_processes": "list",
        "top_processes.*": "mapping",
        "load_avg_1m": "number>=0",
        "load_avg_5m": "number>=0",
        "load_avg_15m": "number>=0",
        "uptime_s": "number>=0",
    }
    fields = {
        "load_avg_1m": FieldSpec("", "load average 1 min", "os.getloadavg()", volatile=True),
        "load_avg_5m": FieldSpec("", "load average 5 min", "os.getloadavg()", volatile=True),
        "load_avg_15m": FieldSpec("", "load average 15 min", "os.getloadavg()", volatile=True),
        "uptime_s": FieldSpec("s", "uptime", "psutil.boot_time()", volatile=True),
        "memory.available_bytes": FieldSpec(
            "B", "memory available", "psutil.virtual_memory()", volatile=True
        ),
        "memory.used_bytes": FieldSpec(
            "B", "memory used", "psutil.virtual_memory()", volatile=True
        ),
        "swap.used_bytes": FieldSpec("B", "swap used", "psutil.swap_memory()", volatile=True),
        "cpu.freq_current_mhz": FieldSpec(
            "MHz", "CPU frequency now", "psutil.cpu_freq()", volatile=True
        ),
        "top_processes": FieldSpec("", "busiest processes", "psutil", volatile=True),
        "cpu.governor": FieldSpec(
            "", "scaling governor", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
        ),
        "cgroup.cpu_limit_cores": FieldSpec("cores", "cgroup CPU limit", "/sys/fs/cgroup/cpu.max"),
    }

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        import psutil

        # The busiest processes are measured over a window; the other facts are read inside it.
        window = _ProcessWindow(psutil)
        data: dict[str, Any] = {
            "cpu": self._read_cpu(psutil),
            "kernel": platform.release(),
            "os_release": parse_os_release(read_text("/etc/os-release")),
            "container": detect_container(read_text("/proc/1/cgroup"), dict(os.environ)),
            "cgroup": self._read_cgroup(),
            "numa_nodes": self._read_numa(),
            "thp_enabled": parse_bracketed(
                read_text("/sys/kernel/mm/transparent_hugepage/enabled"), "THP enabled"
            ),
            "thp_defrag": parse_bracketed(
                read_text("/sys/kernel/mm/transparent_hugepage/defrag"), "THP defrag"
            ),
        }
        try:
            l1, l5, l15 = os.getloadavg()
            data.update(
                load_avg_1m=round(l1, 2), load_avg_5m=round(l5, 2), load_avg_15m=round(l15, 2)
            )
        except OSError:
            data["load_avg_1m"] = missing(MissingReason.NOT_SUPPORTED, "os.getloadavg")
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        data["memory"] = {
            "total_bytes": vm.total,
            "available_bytes": vm.available,
            "used_bytes": vm.used,
        }
        data["swap"] = {"total_bytes": sw.total, "used_bytes": sw.used}
        data["uptime_s"] = round(time.time() - psutil.boot_time(), 1)
        data["top_processes"] = window.top()
        return data

    @staticmethod
    def _read_cpu(psutil) -> dict[str, Any]:
        cpu: dict[str, Any] = {
            "model": parse_cpuinfo_model(read_text("/proc/cpuinfo")),
            "logical_cores": psutil.cpu_count()
            or missing(MissingReason.NOT_SUPPORTED, "psutil.cpu_count"),
            "physical_cores": psutil.cpu_count(logical=False)
            or missing(MissingReason.NOT_SUPPORTED, "psutil.cpu_count(logical=False)"),
            "governor": read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        }
        try:
            cpu["affinity_cores"] = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpu["affinity_cores"] = missing(MissingReason.NOT_SUPPORTED, "os.sched_getaffinity")
        try:
            freq = psutil.cpu_freq()
        except (OSError, NotImplementedError, FileNotFoundError):
            freq = None
        if freq and freq.max:
            cpu.update(
                freq_current_mhz=round(freq.current),
                freq_min_mhz=round(freq.min),
                freq_max_mhz=round(freq.max),
            )
        else:
            cpu["freq_current_mhz"] = missing(
                MissingReason.NOT_SUPPORTED, "no cpufreq (common in VMs)"
            )
        return cpu

    @staticmethod
    def _read_cgroup() -> dict[str, Any]:
        if os.path.exists(f"{CGROUP_ROOT}/cgroup.controllers"):  # v2
            return {
                "version": 2,
                "cpu_limit_cores": parse_cpu_max(read_text(f"{CGROUP_ROOT}/cpu.max")),
                "memory_limit_bytes": parse_memory_max(read_text(f"{CGROUP_ROOT}/memory.max")),
            }
        quota = read_text(f"{CGROUP_ROOT}/cpu/cpu.cfs_quota_us")
        period = read_text(f"{CGROUP_ROOT}/cpu/cpu.cfs_period_us")
        cpu = missing(MissingReason.NOT_FOUND, "no cgroup cpu controller")
        if quota is not None and period is not None:
            q = quota.strip()
            cpu = parse_cpu_max(f"{'max' if q == '-1' else q} {period.strip()}")
        return {
            "version": 1,
            "cpu_limit_cores": cpu,
            "memory_limit_bytes": parse_memory_max(
                read_text(f"{CGROUP_ROOT}/memory/memory.limit_in_bytes")
            ),
        }

    @staticmethod
    def _read_numa() -> dict[str, Any]:
        base = "/sys/devices/system/node"
        try:
            names = sorted(n for n in os.listdir(base) if re.fullmatch(r"node\d+", n))
        except OSError:
            return {}
        return {n: (read_text(f"{base}/{n}/cpulist") or "").strip() for n in names}

    def headline(self, data: dict[str, Any]) -> str:
        cpu = (
            data.get("cpu")
            if isinstance(data.get("cpu"), dict) and not is_missing(data.get("cpu"))
            else {}
        )
        model = cpu.get("model")
        model = model if isinstance(model, str) else "unknown CPU"
        gov = cpu.get("governor")
        gov = f", governor {gov}" if isinstance(gov, str) else ""
        mem = (
            (data.get("memory") or {}).get("total_bytes")
            if isinstance(data.get("memory"), dict)
            else None
        )
        mem_s = f", {mem / 2**30:.0f} GiB RAM" if isinstance(mem, (int, float)) else ""
        load = data.get("load_avg_1m")
        load_s = f", load {load}" if isinstance(load, (int, float)) else ""
        cores = cpu.get("logical_cores") if isinstance(cpu.get("logical_cores"), int) else "?"
        return f"{model}, {cores} CPUs{gov}{mem_s}{load_s}"

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ) -> list[Finding]:
        if not (before and after and before.usable and after.usable):
            return []  # one side alone shows nothing here; the ledger marks host.cpu inconclusive
        b, a = before.data, after.data
        bc, ac = (
            d.get("cpu") if isinstance(d.get("cpu"), dict) and not is_missing(d.get("cpu")) else {}
            for d in (b, a)
        )
        out: list[Finding] = []

        compared: list[str] = []
        unheld: list[str] = []

        def changed(x, y, what: str = "") -> bool:
            if is_unrecorded(x) or is_unrecorded(
                y
            ):  # a side imported from a text without it: not compared
                unheld.append(what)
                return False
            compared.append(what)
            return x != y and not (is_missing(x) and is_missing(y))

        if changed(_sub(b, "cpu", "model"), _sub(a, "cpu", "model"), "CPU model"):
            out.append(
                implicated(
                    "host.cpu",
                    Severity.MEDIUM,
                    f"CPU model changed: {bc.get('model')} -> {ac.get('model')}",
                    ["/proc/cpuinfo model name"],
                    relevance=0.6,
                    fields=["cpu.model"],
                )
            )
        for key, label, sev in (
            ("governor", "CPU scaling governor", Severity.MEDIUM),
            ("logical_cores", "logical CPU count", Severity.MEDIUM),
            ("affinity_cores", "CPUs this process may use", Severity.MEDIUM),
        ):
            if changed(_sub(b, "cpu", key), _sub(a, "cpu", key), label):
                out.append(
                    implicated(
                        "host.cpu",
                        sev,
                        f"{label} changed: {_fmt(bc.get(key))} -> {_fmt(ac.get(key))}",
                        relevance=0.5,
                        fields=[f"cpu.{key}"],
                    )
                )
        bcg, acg = b.get("cgroup") or {}, a.get("cgroup") or {}
        if changed(
            _sub(b, "cgroup", "cpu_limit_cores"),
            _sub(a, "cgroup", "cpu_limit_cores"),
            "cgroup CPU limit",
        ):
            out.append(
                implicated(
                    "host.cpu",
                    Severity.HIGH,
                    f"cgroup CPU limit changed: {_fmt(bcg.get('cpu_limit_cores'))} -> {_fmt(acg.get('cpu_limit_cores'))} cores",
                    ["cgroup cpu.max"],
                    relevance=0.7,
                    fields=["cgroup.cpu_limit_cores"],
                )
            )
        if changed(b.get("numa_nodes"), a.get("numa_nodes"), "NUMA layout"):
            out.append(
                implicated(
                    "host.cpu",
                    Severity.LOW,
                    "NUMA layout changed",
                    relevance=0.3,
                    fields=["numa_nodes"],
                )
            )
        if changed(b.get("thp_enabled"), a.get("thp_enabled"), "transparent huge pages"):
            out.append(
                implicated(
                    "host.cpu",
                    Severity.LOW,
                    f"transparent huge pages: {_fmt(b.get('thp_enabled'))} -> {_fmt(a.get('thp_enabled'))}",
                    relevance=0.2,
                    fields=["thp_enabled"],
                )
            )
        cores = (
            ac.get("affinity_cores")
            if isinstance(ac.get("affinity_cores"), int)
            else ac.get("logical_cores")
        )
        la, lb = a.get("load_avg_1m"), b.get("load_avg_1m")
        if (
            isinstance(la, (int, float))
            and isinstance(cores, int)
            and la > cores
            and not (isinstance(lb, (int, float)) and lb > cores)
        ):
            out.append(
                implicated(
                    "host.cpu",
                    Severity.LOW,
                    f"CPU oversubscribed after: load {la} on {cores} CPUs (before {lb})",
                    ["os.getloadavg()"],
                    relevance=0.4,
                    fields=["load_avg_1m"],
                )
            )
        why = (
            next(
                (
                    d.get("detail")
                    for d in (
                        b.get("cpu"),
                        a.get("cpu"),
                        b.get("cgroup"),
                        a.get("cgroup"),
                        b.get("kernel"),
                        a.get("kernel"),
                    )
                    if is_unrecorded(d)
                ),
                "",
            )
            or "not recorded"
        )
        if not out and not compared:
            out.append(
                inconclusive(
                    "host.cpu",
                    f"nothing to compare: {', '.join(unheld)} not held by an imported side ({why})",
                )
            )
        elif not out:
            out.append(
                ruled_out(
                    "host.cpu",
                    f"CPU {_fmt(ac.get('model'))}, {_fmt(ac.get('logical_cores'))} CPUs, governor "
                    f"{_fmt(ac.get('governor'))}, cgroup CPU limit {_fmt(acg.get('cpu_limit_cores'))} on both",
                    [f"compared: {', '.join(compared)}"]
                    + ([f"not compared ({why}): {', '.join(unheld)}"] if unheld else []),
                )
            )
        return out


class _ProcessWindow:
    """The 5 processes using the most CPU over a window of ``window_s`` (default 0.05 s: the kernel counts
    CPU time in 10 ms ticks, so a process is seen to 20% of a core, enough to tell a busy one from an idle one;
    the window sits on the snapshot's critical path).

    Sources: ``psutil.process_iter`` and each process's ``cpu_times()`` at the
    start and end of the window; then name, user and RSS of the top ones.
    The first reading is taken when the object is made, and :meth:`top` waits
    for whatever is left of the window: the probe reads its other facts inside it.
    """

    def __init__(self, psutil, window_s: float = 0.05, top: int = 5):
        self.psutil, self.window_s, self.count = psutil, window_s, top
        self.first = self._times()
        self.started = time.monotonic()

    def _times(self) -> dict[int, tuple[float, Any]]:
        out = {}
        for p in self.psutil.process_iter(["pid"]):
            try:
                t = p.cpu_times()
                out[p.pid] = (t.user + t.system, p)
            except (self.psutil.Error, OSError):
                continue
        return out

    def top(self) -> list[dict[str, Any]]:
        psutil, window_s = self.psutil, self.window_s
        left = window_s - (time.monotonic() - self.started)
        if left > 0:
            time.sleep(left)
        first, second = self.first, self._times()
        elapsed = max(
            time.monotonic() - self.started, window_s
        )  # the window as it was, not as planned
        deltas = []
        for pid, (t2, proc) in second.items():
            t1 = first.get(pid, (t2, None))[0]
            deltas.append((t2 - t1, pid, proc))
        deltas.sort(key=lambda x: x[0], reverse=True)
        rows = []
        for d, pid, proc in deltas[: self.count]:
            try:
                with proc.oneshot():
                    rows.append(
                        {
                            "pid": pid,
                            "name": proc.name(),
                            "user": proc.username(),
                            "cpu_pct": round(100.0 * d / elapsed, 1),
                            "rss_bytes": proc.memory_info().rss,
                        }
                    )
            except (psutil.Error, OSError, KeyError):
                continue
        return rows


def _sub(data: dict[str, Any], group: str, key: str) -> Any:
    """``data[group][key]``; a ``not_recorded`` group stands for its keys."""
    g = data.get(group)
    if is_unrecorded(g):
        return g
    return (g or {}).get(key) if isinstance(g, dict) else None


def _fmt(value: Any) -> str:
    if is_missing(value):
        return f"n/a ({value.get('missing')})"
    return str(value)
