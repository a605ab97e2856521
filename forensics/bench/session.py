"""A whole bench run: choose the canary's settings, sample GPU telemetry, run, build documents.

Telemetry comes from ``forensics.gpu.sampler.Sampler`` (NVML at ~10 Hz); without
a usable NVML the sampler's summary is itself a missing value. The sampler runs for the whole session.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterator

from forensics.bench.config import CanaryConfig, Variant
from forensics.bench.document import build, canary_results, p2p_note, process_records
from forensics.bench.harness import Side, run_sides, visible_gpus
from forensics.errors import BadInputError
from forensics.gpu.sampler import Sampler
from forensics.model import MissingReason, missing

CANARY_FIELDS = (
    "tp",
    "layers",
    "hidden",
    "heads",
    "ffn",
    "draft_tokens",
    "batch",
    "kv_len",
    "blocks",
    "block_ms",
    "warmup_s",
    "matmul_n",
    "busbw_bytes",
    "copy_bytes",
    "p2p_bytes",
    "graph_timeout_s",
)


@contextlib.contextmanager
def host_cpu() -> Iterator[dict[str, Any]]:
    """How much CPU the rest of the machine used while the block ran; the yielded dict is filled on exit.

    ``{"other_cpus": float, "own_cpus": float, "cpus": int, "wall_s": float, "source": str}``:
    ``other_cpus`` is the CPU time of every process that is neither this one nor a child it waited for
    (the step's processes and their descendants), divided by the wall time: the average number of CPUs
    something else kept busy; ``own_cpus`` the same for this process and those children.
    Source: ``psutil.cpu_times()`` (system-wide busy time: all but idle and iowait) at the start and end,
    less ``resource.getrusage`` of this process and of its waited-for children over the same span. Left
    empty (``{}``) where psutil or getrusage cannot say. Never raises.
    """
    box: dict[str, Any] = {}
    try:
        import resource

        import psutil

        def busy() -> float:  # user includes guest time on Linux; steal is not this machine's work
            t = psutil.cpu_times()
            return t.user + t.system + sum(getattr(t, k, 0.0) for k in ("nice", "irq", "softirq"))

        def own() -> float:
            a, b = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
            return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

        start = (time.monotonic(), busy(), own())
    except Exception:  # noqa: BLE001 - a reading that cannot be taken is left out, never a failure
        yield box
        return
    try:
        yield box
    finally:
        try:
            wall = time.monotonic() - start[0]
            if wall > 0:
                mine = own() - start[2]
                other = max(busy() - start[1] - mine, 0.0) / wall
                box.update(
                    other_cpus=round(other, 2),
                    own_cpus=round(mine / wall, 2),
                    cpus=psutil.cpu_count() or 0,
                    wall_s=round(wall, 3),
                    source="psutil.cpu_times() less getrusage(self and waited-for children)",
                )
        except Exception:  # noqa: BLE001
            pass


@contextlib.contextmanager
def telemetry(enabled: bool = True) -> Iterator[dict[str, Any]]:
    """Sample GPU telemetry while the block runs; the yielded dict is filled on exit."""
    box: dict[str, Any] = {}
    sampler = None
    if not enabled:
        box.update(missing(MissingReason.NOT_APPLICABLE, "CPU run: no GPU to sample"))
    else:
        try:
            sampler = Sampler(interval_s=0.1)
            sampler.start()
        except Exception as exc:  # NVML trouble must not stop a benchmark
            sampler = None
            box.update(missing(MissingReason.ERROR, f"sampler did not start: {exc}"))
    try:
        yield box
    finally:
        if sampler is not None:
            try:
                box.update(sampler.stop())
            except Exception as exc:
                box.update(missing(MissingReason.ERROR, f"sampler failed: {exc}"))


def canary_config(options: dict[str, Any]) -> CanaryConfig:
    """The canary's settings: defaults for this machine, then ``options`` (None values ignored).

    ``device`` defaults to ``cuda`` when NVML sees a GPU, else ``cpu``; ``tp``
    to the number of visible GPUs (2 on CPU, so the gloo all-reduce is present).
    ``cuda_graph=True`` selects the ``graph`` variant.

    Raises:
        BadInputError: invalid sizes, ``cuda`` asked for where no GPU is visible, or more
            ranks than visible GPUs.
    """
    gpus = visible_gpus()
    device = options.get("device") or ("cuda" if gpus else "cpu")
    if device == "cuda" and not gpus:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        hidden = f" (CUDA_VISIBLE_DEVICES={cvd!r})" if cvd is not None else ""
        raise BadInputError(
            f"--device cuda: no CUDA device is visible here{hidden}; give --device cpu (the canary "
            "on the CPU with gloo), or run it on a machine with an NVIDIA GPU"
        )
    tp = options.get("tp") or (gpus if device == "cuda" else 2)
    if device == "cuda" and gpus and tp > gpus:
        raise BadInputError(f"--tp {tp} needs {tp} GPUs, {gpus} visible; lower --tp")
    cfg = CanaryConfig.defaults(device, tp)
    for name in CANARY_FIELDS:
        if options.get(name) is not None:
            setattr(cfg, name, type(getattr(cfg, name))(options[name]))
    if options.get("cuda_graph"):
        cfg.variant = Variant.GRAPH.value
    elif options.get("variant"):
        cfg.variant = str(options["variant"])
    return cfg.validate()


def run_canary(
    cfg: CanaryConfig,
    *,
    processes: int,
    budget_s: float,
    env: dict[str, str] | None = None,
    b_env: dict[str, str] | None = None,
    label: str = "",
    on_process: Callable[[Side, int, dict | None], None] | None = None,
    launcher: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Run the canary; returns one bench document, or two (A, B) when ``b_env`` is given.

    With ``b_env`` the A processes (``env``) and the B processes (``env`` +
    ``b_env``) run interleaved, A B B A A B ..., in the same session.

    Raises:
        BadInputError: a canary process failed or timed out.
    """
    if processes < 1:
        raise BadInputError(f"--processes must be at least 1, got {processes}")
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise BadInputError(
            "the canary needs PyTorch, which is not installed in this Python: "
            "pip install 'forensics[bench]' (or torch), or benchmark your own step with --cmd"
        )
    if budget_s <= 0:
        raise BadInputError(f"--budget must be positive, got {budget_s:g}")
    sides = [
        Side(
            "A" if b_env is not None else "canary",
            cfg,
            dict(env or {}),
            launcher=list(launcher or []),
        )
    ]
    if b_env is not None:
        sides.append(Side("B", cfg, {**(env or {}), **b_env}, launcher=list(launcher or [])))
    t0 = time.time()
    with telemetry(cfg.device == "cuda") as tel:
        run_sides(sides, processes=processes, budget_s=budget_s, on_process=on_process)
    pids = [pid for s in sides for p in s.processes for pid in p["pids"]]
    if "gpus" in tel:
        tel["bench_pids"] = pids
        tel["scope"] = "whole session" + (" (A and B interleaved)" if b_env is not None else "")
    docs = []
    for side in sides:
        config = {
            "kind": "canary",
            **cfg.to_json(),
            "env": side.env,
            "launcher": side.launcher or None,
            "processes_asked": processes,
            "p2p": p2p_note(side.processes),
            "budget_s": budget_s,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
        }
        docs.append(
            build(
                config,
                canary_results(cfg, side.processes),
                telemetry=tel,
                processes=process_records(side.processes),
                label=label or side.name,
            )
        )
    return docs
