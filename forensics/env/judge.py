"""Judging the ``nccl_env`` data: hypotheses ``nccl.env`` and ``nccl.env-propagation``.

Pure functions over two loaded data sections (no I/O). Rules:

- ``nccl.env``: a variable of the launching process (or an NCCL config file
  entry) added, removed or changed between the snapshots is implicated, one
  finding per variable, with what it does (:data:`VARIABLES`). Launcher
  bookkeeping (MASTER_PORT, RANK...) is never a finding.
- ``nccl.env-propagation``: a *problem* is a variable whose value in a worker
  (per start method, per launcher rank, per nccl-init rank) differs from the
  launching process, or a "set by environment" value NCCL reported that
  differs from the launching process (unless an nccl.conf entry explains it).
  A problem new in ``after`` -- or gone since ``before`` -- is what changed
  and is implicated at its full severity. A problem present, identical, in
  *both* snapshots is still reported (it is real and worth fixing) but at
  severity low with relevance 0.2 and a summary that says it is not what
  changed: identical snapshots therefore implicate nothing new, only a
  standing propagation problem, and never above low.
- Nothing differs: ``ruled-out`` naming the channels and number of variables
  checked; no worker data on either side: ``inconclusive``.
"""

from __future__ import annotations

from typing import Any

from forensics.env.entries import worker_entries
from forensics.hypotheses import FACT_CANARY_BLIND, FACT_WORKAROUND_REMOVED
from forensics.model import Finding, Severity, implicated, inconclusive, is_missing, ruled_out

H_ENV = "nccl.env"
H_PROP = "nccl.env-propagation"

H, M, L = Severity.HIGH, Severity.MEDIUM, Severity.LOW
VARIABLES: dict[str, tuple[Severity, str]] = {
    "NCCL_ALGO": (
        H,
        "restricts the collective algorithms NCCL may use (Ring, Tree, NVLS, CollNet...)",
    ),
    "NCCL_PROTO": (
        H,
        "restricts the protocols (LL, LL128, Simple); Simple alone slows small messages",
    ),
    "NCCL_P2P_DISABLE": (
        H,
        "1 disables direct GPU-to-GPU (NVLink/PCIe P2P) transport: traffic goes through host memory",
    ),
    "NCCL_P2P_LEVEL": (H, "the furthest topology distance at which NCCL still uses P2P"),
    "NCCL_SHM_DISABLE": (H, "1 disables the shared-memory transport between processes"),
    "NCCL_IB_DISABLE": (
        H,
        "1 disables InfiniBand/RoCE: inter-node traffic falls back to TCP sockets",
    ),
    "NCCL_SOCKET_IFNAME": (
        H,
        "which network interfaces NCCL uses for sockets and bootstrap (^ excludes)",
    ),
    "NCCL_NVLS_ENABLE": (H, "NVLink SHARP (NVSwitch multicast) collectives on or off"),
    "NCCL_MIN_NCHANNELS": (
        H,
        "lower bound on channels (parallel rings/trees); more channels, more SMs used",
    ),
    "NCCL_MAX_NCHANNELS": (H, "upper bound on channels; a low cap limits bandwidth"),
    "NCCL_MIN_CTAS": (M, "lower bound on CTAs per collective"),
    "NCCL_MAX_CTAS": (M, "upper bound on CTAs per collective"),
    "NCCL_BUFFSIZE": (H, "size of the per-channel communication buffers (default 4 MiB)"),
    "NCCL_NET_GDR_LEVEL": (H, "when the NIC may read/write GPU memory directly (GPUDirect RDMA)"),
    "NCCL_NET_GDR_READ": (M, "GPUDirect RDMA for sends"),
    "NCCL_CUMEM_ENABLE": (H, "use cuMem* (VMM) allocations for NCCL buffers, P2P/CUMEM transport"),
    "NCCL_IB_HCA": (H, "which InfiniBand adapters and ports NCCL uses"),
    "NCCL_IB_GID_INDEX": (M, "RoCE GID index"),
    "NCCL_NET": (H, "forces the network plugin (IB or Socket)"),
    "NCCL_NET_PLUGIN": (M, "which libnccl-net plugin is loaded"),
    "NCCL_TUNER_PLUGIN": (M, "which tuner plugin chooses algorithms and protocols"),
    "NCCL_COLLNET_ENABLE": (M, "CollNet (in-network reduction, SHARP) on or off"),
    "NCCL_CROSS_NIC": (M, "whether rings/trees may use different NICs on different nodes"),
    "NCCL_NTHREADS": (M, "CUDA threads per NCCL block"),
    "NCCL_LAUNCH_MODE": (M, "PARALLEL or GROUP kernel launches"),
    "NCCL_GRAPH_REGISTER": (M, "user-buffer registration under CUDA graphs"),
    "NCCL_DEBUG": (L, "log level; INFO costs only at init, TRACE slows every call"),
    "NCCL_DEBUG_SUBSYS": (L, "which subsystems log"),
    "NCCL_VERSION": (L, "a container label, not the NCCL library actually loaded"),
    "CUDA_VISIBLE_DEVICES": (H, "which GPUs the process sees, and their order"),
    "CUDA_LAUNCH_BLOCKING": (H, "1 makes every kernel launch synchronous (large slowdown)"),
    "CUDA_DEVICE_MAX_CONNECTIONS": (
        H,
        "hardware work queues per device; 1 serialises communication and compute",
    ),
    "CUDA_MODULE_LOADING": (M, "LAZY or EAGER kernel loading (start-up time and memory)"),
    "TORCH_NCCL_BLOCKING_WAIT": (M, "torch waits for NCCL work with a blocking wait"),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": (L, "how torch handles failed NCCL work"),
    "TORCH_NCCL_AVOID_RECORD_STREAMS": (M, "caching-allocator stream recording for NCCL tensors"),
    "PYTORCH_CUDA_ALLOC_CONF": (
        M,
        "CUDA caching allocator settings (expandable segments, split sizes)",
    ),
    "OMP_NUM_THREADS": (M, "CPU threads for OpenMP regions (torchrun sets 1 when unset)"),
    "MKL_NUM_THREADS": (M, "CPU threads for MKL"),
    "LD_PRELOAD": (H, "libraries loaded before all others (can replace NCCL, CUDA or malloc)"),
    "LD_LIBRARY_PATH": (M, "where shared libraries are found: can select another NCCL or CUDA"),
    "PYTHONPATH": (M, "where Python modules (and sitecustomize) are found"),
}
"""Variable -> (severity when it changes or fails to propagate, what it does)."""

INTER_NODE_ONLY = frozenset(
    {
        "NCCL_IB_DISABLE",
        "NCCL_IB_HCA",
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_TC",
        "NCCL_IB_SL",
        "NCCL_IB_TIMEOUT",
        "NCCL_IB_RETRY_CNT",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_ADAPTIVE_ROUTING",
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "NCCL_NET",
        "NCCL_NET_PLUGIN",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_NET_GDR_READ",
        "NCCL_CROSS_NIC",
        "NCCL_COLLNET_ENABLE",
        "NCCL_PXN_DISABLE",
        "NCCL_SOCKET_NTHREADS",
        "NCCL_NSOCKS_PERTHREAD",
    }
)
"""Variables of NCCL's network transport (NET/IB, NET/Socket, CollNet, PXN: the NCCL environment-variable
docs): they change how ranks on different machines talk and nothing between GPUs of one machine, which NCCL
joins by P2P or SHM. NCCL_SOCKET_IFNAME is not here: the bootstrap of one machine uses it too."""

LAUNCHER_BOOKKEEPING = frozenset({"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"})


def describe(name: str) -> tuple[Severity, str]:
    """Severity and description of a variable; by prefix for ones not in :data:`VARIABLES`."""
    if name in VARIABLES:
        return VARIABLES[name]
    if name.startswith("NCCL_"):
        return M, "an NCCL setting"
    if name.startswith(("CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_", "NVSHMEM_")):
        return M, "a CUDA / NVIDIA library setting"
    if name.startswith(("TORCH_", "PYTORCH_")):
        return M, "a PyTorch setting"
    return L, "a runtime setting"


def fmt(value: Any) -> str:
    """A stored value for an evidence line: ``'Ring'`` or ``unset``."""
    if is_missing(value):
        return (
            "unset"
            if value.get("detail") == "unset"
            else str(value.get("detail") or value.get("missing"))
        )
    return repr(value)


def _data(result) -> dict[str, Any] | None:
    return result.data if result is not None and result.usable and result.data else None


LAUNCHER_DEFAULTS: dict[str, dict[str, tuple[str | None, str]]] = {
    "torchrun": {
        "OMP_NUM_THREADS": (
            "1",
            "torch/distributed/run.py: with more than one process per node and OMP_NUM_THREADS "
            "unset, torchrun sets it to 1 for each worker and warns 'Setting OMP_NUM_THREADS "
            "environment variable for each process to be 1 in default'",
        ),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": (
            None,
            "torch/distributed/elastic/agent/server/local_elastic_agent.py: "
            "each worker gets os.getenv('TORCH_NCCL_ASYNC_ERROR_HANDLING', '1')",
        ),
        "NCCL_ASYNC_ERROR_HANDLING": (
            None,
            "torch/distributed/elastic/agent/server/local_elastic_agent.py before "
            "torch 2.2: each worker gets os.getenv('NCCL_ASYNC_ERROR_HANDLING', '1')",
        ),
    },
    "srun": {
        "CUDA_VISIBLE_DEVICES": (
            None,
            "Slurm GRES (gres.conf, --gpus/--gres): each step's tasks get "
            "CUDA_VISIBLE_DEVICES naming the GPUs allocated to them",
        ),
    },
    "mpirun": {},
}
"""Variables a launcher sets in its workers by design: launcher -> {variable: (value it sets, or None for any
value; the source)}. A worker seeing such a value while the launching process has the variable unset is a fact
of the launcher, not a propagation problem. ``torchrun`` covers ``python -m torch.distributed.run`` and
``torch.distributed.launch`` (which runs the same code since torch 1.10; before 1.9 it set OMP_NUM_THREADS=1
with the same warning). Open MPI's ``mpirun`` sets only ``OMPI_*``/``PMIX_*`` names, outside the recorded
selection."""

_LAUNCHER_MARKS = (
    ("TORCHELASTIC_RUN_ID", "torchrun"),
    ("TORCHELASTIC_RESTART_COUNT", "torchrun"),
    ("SLURM_PROCID", "srun"),
    ("SLURM_LOCALID", "srun"),
    ("OMPI_COMM_WORLD_RANK", "mpirun"),
    ("PMI_RANK", "mpirun"),
)
_LAUNCHER_WORDS = (
    ("torchrun", "torchrun"),
    ("torch.distributed.run", "torchrun"),
    ("torch.distributed.launch", "torchrun"),
    ("srun", "srun"),
    ("mpirun", "mpirun"),
    ("mpiexec", "mpirun"),
    ("prterun", "mpirun"),
)


def launcher_of(data: dict[str, Any], channel: str, entry: dict[str, Any]) -> str:
    """The launcher that started a worker ("" when none is known): its per-rank variables first
    (TORCHELASTIC_RUN_ID: torchrun; SLURM_PROCID: srun; OMPI_COMM_WORLD_RANK/PMI_RANK: mpirun), then the
    words of ``--launcher``'s command line. Only ``launcher rank N`` channels have one."""
    if not channel.startswith("launcher"):
        return ""
    rv = entry.get("rank_vars")
    for var, name in _LAUNCHER_MARKS:
        if isinstance(rv, dict) and var in rv:
            return name
    cmd = (
        (data.get("launcher") or {}).get("command")
        if isinstance(data.get("launcher"), dict)
        else None
    )
    if isinstance(cmd, str):
        words = [w.rsplit("/", 1)[-1] for w in cmd.split()]
        for word, name in _LAUNCHER_WORDS:
            if word in words:
                return name
    return ""


def launcher_default(
    data: dict[str, Any], channel: str, entry: dict[str, Any], name: str, parent: Any, worker: Any
) -> str:
    """The source line when ``name=worker`` in this worker is its launcher's own default (parent unset), else ""."""
    if not is_missing(parent) or not isinstance(worker, str):
        return ""
    row = LAUNCHER_DEFAULTS.get(launcher_of(data, channel, entry), {}).get(name)
    if row is None or (row[0] is not None and worker.strip() != row[0]):
        return ""
    return row[1]


def launcher_facts(data: dict[str, Any] | None) -> list[str]:
    """Evidence lines for the launcher defaults seen in ``data``'s workers (facts, never problems)."""
    out: list[str] = []
    for channel, entry in worker_entries(data or {}):
        for d in entry.get("differs") or []:
            src = launcher_default(
                data or {}, channel, entry, d.get("name", ""), d.get("parent"), d.get("worker")
            )
            if src:
                line = (
                    f"{d['name']}={d['worker']} in the workers is {launcher_of(data or {}, channel, entry)}'s "
                    f"own default, not a propagation problem ({src})"
                )
                if line not in out:
                    out.append(line)
    return out


def problems(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every propagation problem in one data section.

    Returns:
        ``{(variable, channel, source): {"parent", "worker", "where"}}``;
        source is ``env`` (the worker's environment) or ``nccl`` (NCCL's
        "set by environment" report in that rank).
    """
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for channel, entry in worker_entries(data):
        for d in entry.get("differs") or []:
            if launcher_default(data, channel, entry, d["name"], d.get("parent"), d.get("worker")):
                continue  # the launcher's own default (LAUNCHER_DEFAULTS): a fact, not a problem
            out[(d["name"], channel, "env")] = {
                "parent": d.get("parent"),
                "worker": d.get("worker"),
                "where": d.get("where", "unknown"),
            }
        for d in (entry.get("nccl") or {}).get("nccl_differs") or []:
            if d.get("explained_by"):
                continue
            out[(d["name"], channel, "nccl")] = {
                "parent": d.get("parent"),
                "worker": d.get("nccl"),
                "where": "nccl",
            }
    return out


def _evidence_line(
    var: str, channel: str, source: str, p: dict[str, Any], entry_hooks: str = ""
) -> str:
    if source == "nccl":
        return (
            f"{channel}: NCCL reported '{var} set by environment to {p['worker']}' "
            f"(launching process: {fmt(p['parent'])})"
        )
    where = {
        "startup_hooks": "changed at interpreter start-up (sitecustomize/usercustomize/.pth)",
        "at_exec": "already so when the process started (launcher or start method)",
    }.get(p["where"], "")
    return f"{channel}: {var}={fmt(p['worker'])} vs launching process {fmt(p['parent'])}" + (
        f"; {where}" if where else ""
    )


def _context_notes(data: dict[str, Any], items) -> list[str]:
    """Corroboration from the same workers: the sitecustomize that ran where a start-up hook changed a
    variable, and NCCL's own report where a variable never reached a rank."""
    entries = dict(worker_entries(data))
    notes = []
    for (var, channel, source), p in items:
        entry = entries.get(channel) or {}
        sc = (entry.get("hooks") or {}).get("sitecustomize")
        if source == "env" and p.get("where") == "startup_hooks" and isinstance(sc, str):
            notes.append(f"{channel} imported sitecustomize from {sc}")
        nccl = entry.get("nccl")
        if (
            source == "env"
            and is_missing(p.get("worker"))
            and isinstance(nccl, dict)
            and nccl.get("backend") == "nccl"
        ):
            sbe = nccl.get("set_by_environment") or {}
            if var not in sbe:
                seen = ", ".join(f"{k}={v}" for k, v in sbe.items()) or "none"
                notes.append(
                    f"{channel}: NCCL did not report {var} as set by environment (it reported: {seen})"
                )
    return sorted(set(notes))


def judge_propagation(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Finding]:
    """Findings for ``nccl.env-propagation`` (rules in the module docstring).

    Args:
        before, after: ``nccl_env`` data sections; ``before`` ``None`` judges
            ``after`` alone (``forensics env``), both ``None`` is inconclusive.

    Returns:
        one implicated finding per variable and kind (new, gone, standing),
        else one ruled-out or inconclusive finding.
    """
    if before is None and after is None:
        return [
            inconclusive(
                H_PROP, "no nccl_env data on either side: workers' environment not checked"
            )
        ]
    facts = launcher_facts(after if after is not None else before)
    found = _judge_propagation(before, after)
    for f in found:
        f.evidence.extend(x for x in facts if x not in f.evidence)
    return found


def _judge_propagation(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[Finding]:
    pb = problems(before) if before is not None else {}
    pa = problems(after) if after is not None else {}
    findings: list[Finding] = []
    by_var: dict[str, dict[str, list]] = {}
    for key, p in pa.items():
        kind = "standing" if before is not None and pb.get(key) == p else "new"
        by_var.setdefault(key[0], {}).setdefault(kind, []).append((key, p))
    for key, p in pb.items():
        if key not in pa and after is not None:
            by_var.setdefault(key[0], {}).setdefault("gone", []).append((key, p))
    for var in sorted(by_var):
        sev, what = describe(var)
        for kind in ("new", "gone", "standing"):
            items = by_var[var].get(kind)
            if not items:
                continue
            channels = sorted({k[1] for k, _ in items})
            ev = [
                _evidence_line(var, k[1], k[2], p)
                for k, p in sorted(items, key=lambda kp: (kp[0][1], kp[0][2]))
            ]
            ev += _context_notes(after if kind != "gone" else before, items)
            ev.append(f"{var}: {what}")
            first = items[0][1]
            where = ", ".join(channels)
            if kind == "new":
                findings.append(
                    implicated(
                        H_PROP,
                        sev,
                        f"{var} differs between the launching process "
                        f"({fmt(first['parent'])}) and its workers ({where}: {fmt(first['worker'])})",
                        ev,
                        relevance=0.9 if not sev < H else 0.6,
                        fields=[f"nccl_env.{var}"],
                    )
                )
            elif kind == "gone":
                findings.append(
                    implicated(
                        H_PROP,
                        Severity.MEDIUM if not sev < M else L,
                        f"{var} no longer differs between the launching process and its workers "
                        f"(before: {where} saw {fmt(first['worker'])})",
                        ev,
                        relevance=0.5,
                        fields=[f"nccl_env.{var}"],
                    )
                )
            else:
                findings.append(
                    implicated(
                        H_PROP,
                        L,
                        f"{var} differs between the launching process and its "
                        f"workers ({where}) in both snapshots: a standing problem, not what changed",
                        ev,
                        relevance=0.2,
                        fields=[f"nccl_env.{var}"],
                    )
                )
    if findings:
        return findings
    sides = [d for d in (before, after) if d is not None]
    chans = sorted({c for d in sides for c, _ in worker_entries(d)})
    if not chans:
        return [
            inconclusive(H_PROP, "no worker reported on either side (every start method failed)")
        ]
    silent = []
    for d in sides:
        for key, what in (("launcher", "--launcher"), ("nccl_init", "--nccl-init")):
            sec = d.get(key)
            if (
                isinstance(sec, dict)
                and not is_missing(sec)
                and not sec.get("ranks")
                and not sec.get("under")
            ):
                tail = sec.get("stderr_tail") or sec.get("error") or ""
                why = tail[-1] if isinstance(tail, list) and tail else str(tail)
                code = (
                    f"exit status {sec['returncode']}"
                    if sec.get("returncode") not in (None, 0)
                    else ""
                )
                detail = "; ".join(x for x in (code, why[:200]) if x)
                silent.append(f"{what}: no rank reported" + (f" ({detail})" if detail else ""))
    if silent:
        return [
            inconclusive(
                H_PROP,
                "the workers of the requested launch path were never seen, so it was not "
                "checked: " + "; ".join(sorted(set(silent))),
                [f"checked instead: {', '.join(chans)}"],
            )
        ]
    if (
        before is not None and after is not None
    ):  # "workers saw the same" needs the same workers on both sides
        cb, ca = {c for c, _ in worker_entries(before)}, {c for c, _ in worker_entries(after)}
        if cb != ca:
            one_sided = "; ".join(
                f"{c} only in {'BEFORE' if c in cb else 'AFTER'}" for c in sorted(cb ^ ca)
            )
            return [
                inconclusive(
                    H_PROP,
                    f"workers not seen in both snapshots, so not compared: {one_sided}",
                    [f"seen in both: {', '.join(sorted(cb & ca)) or 'none'}"],
                )
            ]
    n = max(len((d.get("parent") or {}).get("env") or {}) for d in sides)
    nccl = any("nccl" in e for d in sides for _, e in worker_entries(d))
    return [
        ruled_out(
            H_PROP,
            f"workers saw the launching process's values: {n} variables compared in "
            f"{', '.join(chans)}" + ("; NCCL's 'set by environment' report agrees" if nccl else ""),
        )
    ]


def _conf_vars(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.get("value")
        for k, v in ((data.get("config_files") or {}).get("effective") or {}).items()
    }


_P2P_WORKAROUNDS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")
"""Variables that keep NCCL off P2P: a workaround for P2P that hangs or fails (NCCL troubleshooting guide)."""


def _p2p_workaround_removed(var: str, before: Any, after: Any) -> bool:
    """True when ``var`` kept NCCL off P2P before and no longer does (removed, or NCCL_P2P_DISABLE 1 -> 0)."""
    if var not in _P2P_WORKAROUNDS or not isinstance(before, str) or is_missing(before):
        return False
    if var == "NCCL_P2P_DISABLE":
        on = before.strip().lower() in ("1", "true", "yes")
        return on and not (isinstance(after, str) and after.strip().lower() in ("1", "true", "yes"))
    return after is None or is_missing(after)


def canary_on_one_machine(*snapshots: Any) -> bool:
    """Every snapshot with a benchmark ran the canary on this machine alone: ``bench.config.kind`` is
    ``canary`` and ``bench.config.launcher`` is empty (forensics started its ranks itself; a ``--launcher``
    may span machines). False when no snapshot has a canary run."""
    runs = []
    for doc in snapshots:
        bench = doc.get("bench") if isinstance(doc, dict) else None
        cfg = bench.get("config") if isinstance(bench, dict) else None
        if isinstance(cfg, dict) and cfg.get("kind") == "canary":
            runs.append(not cfg.get("launcher"))
    return bool(runs) and all(runs)


CANARY_BLIND_LINE = (
    "the canary's ranks ran on this machine alone, where NCCL joins GPUs by NVLink/PCIe P2P or shared "
    "memory and never by the network: a canary that did not move says nothing about {var}"
)


def judge_env(
    before: dict[str, Any] | None, after: dict[str, Any] | None, canary_one_machine: bool = False
) -> list[Finding]:
    """Findings for ``nccl.env``: the launching process's variables and nccl.conf entries between snapshots.

    Args:
        before, after: ``nccl_env`` data sections (``None`` when absent or unusable).
        canary_one_machine: :func:`canary_on_one_machine` of the two snapshots; a variable of
            :data:`INTER_NODE_ONLY` then carries :data:`forensics.hypotheses.FACT_CANARY_BLIND`.

    Returns:
        one implicated finding per added/removed/changed variable (severity and
        description from :data:`VARIABLES`), else one ruled-out finding;
        nothing when a side is missing (the ledger marks ``nccl.env`` inconclusive then).
    """
    if before is None or after is None:
        return []
    findings: list[Finding] = []
    for source, get in (
        ("environment", lambda d: (d.get("parent") or {}).get("env") or {}),
        ("nccl.conf", _conf_vars),
    ):
        eb, ea = get(before), get(after)
        for var in sorted(set(eb) | set(ea)):
            if eb.get(var) == ea.get(var) or var in LAUNCHER_BOOKKEEPING:
                continue
            sev, what = describe(var)
            change = "added" if var not in eb else "removed" if var not in ea else "changed"
            vb = fmt(eb[var]) if var in eb else "unset"
            va = fmt(ea[var]) if var in ea else "unset"
            facts = (
                [FACT_WORKAROUND_REMOVED]
                if _p2p_workaround_removed(var, eb.get(var), ea.get(var))
                else []
            )
            blind = canary_one_machine and var in INTER_NODE_ONLY
            if blind:
                facts.append(FACT_CANARY_BLIND)
            findings.append(
                implicated(
                    H_ENV,
                    sev,
                    f"{var} {change} in the launching process's {source}: {vb} -> {va}",
                    [f"{var}: {what}", f"before: {vb}; after: {va} (source: {source})"]
                    + ([CANARY_BLIND_LINE.format(var=var)] if blind else []),
                    relevance=0.8 if not sev < H else 0.4,
                    fields=[f"nccl_env.parent.env.{var}"] + facts,
                )
            )
    if findings:
        return findings
    n = len(
        set((after.get("parent") or {}).get("env") or {})
        | set((before.get("parent") or {}).get("env") or {})
    )
    sel = after.get("select") or []
    shown = ", ".join(sel[:4]) + (", ..." if len(sel) > 4 else "")
    return [
        ruled_out(
            H_ENV,
            f"launching process's variables unchanged: {n} set, of {len(sel)} names and "
            f"prefixes checked ({shown}); NCCL config files unchanged",
        )
    ]


def judge(before, after, canary_one_machine: bool = False) -> list[Finding]:
    """Every hypothesis of the ``nccl_env`` probe for two :class:`forensics.probe.ProbeResult` (either may
    be ``None`` or unusable): ``nccl.env``, ``nccl.env-propagation``, ``nccl.transport``
    (:mod:`forensics.env.transport`) and ``host.numa`` (:mod:`forensics.env.numa`).
    ``canary_one_machine``: :func:`canary_on_one_machine` of the two whole snapshots."""
    from forensics.env.numa import judge_numa
    from forensics.env.transport import judge_transport

    b, a = _data(before), _data(after)
    if a is None and b is not None:  # one side: judge what it shows alone
        b, a = None, b
    return (
        judge_env(b, a, canary_one_machine)
        + judge_propagation(b, a)
        + judge_transport(b, a)
        + judge_numa(b, a)
    )
