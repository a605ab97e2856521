"""Collect what the launching process and its fresh workers see of the environment.

The machinery behind the ``nccl_env`` probe and ``forensics env`` (data layout
in ``docs/nccl-env-probe.md``). Sources:

- the launching process: ``os.environ`` and ``/proc/self/environ`` (its
  environment at exec, before this interpreter's own start-up hooks);
- NCCL's config files: ``$NCCL_CONF_FILE`` (else ``~/.nccl.conf``) and
  ``/etc/nccl.conf``, which NCCL applies with ``setenv(..., overwrite=0)``;
- one fresh worker per start method (:mod:`forensics.env.workers.envdump`), all
  started at once: multiprocessing ``spawn`` and ``forkserver``, a plain
  ``subprocess`` with inherited environment, and ``torch.multiprocessing.spawn``
  (only when torch is installed and a slow path is asked for: it imports
  torch in a child, about 1-4 s; the parent never imports torch);
- the user's launcher prefix (``torchrun --nproc-per-node 2``, a wrapper
  script), each rank writing its own record;
- ``--nccl-init``: ranks that build a real communicator; NCCL's own log is
  parsed by :mod:`forensics.env.nccllog`.

Comparisons between the launching process and each worker are made here, on
the raw values (so a changed secret is still seen), and stored with redacted
values; the judge (:mod:`forensics.env.judge`) reads the stored differences.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from forensics.env.workers import envdump
from forensics.env.workers.ncclinit import DEBUG_VARS
from forensics.model import MissingReason, missing

START_METHODS = ("spawn", "forkserver", "subprocess", "torch_spawn")
SYSTEM_CONF = "/etc/nccl.conf"
EXTRA_VAR = "FORENSICS_ENV_SELECT_EXTRA"
WORKER_MODULE = "forensics.env.workers.envdump"
# set by a launcher per rank, or by the nccl-init ranks themselves after their dump: never propagation problems
EXPECTED_IN_RANKS = frozenset(envdump.RANK_VARS)
SET_BY_PROBE = frozenset(DEBUG_VARS) | {"NCCL_DEBUG_FILE"}


def unset() -> dict[str, str]:
    """The stored form of "this variable is not set" (a missing value, never ``""`` or ``None``)."""
    return missing(MissingReason.NOT_FOUND, "unset")


def selection(options: dict[str, Any], environ=os.environ) -> tuple[str, ...]:
    """The variables to record.

    Args:
        options: probe options; ``env_select`` (list) replaces the default
            :data:`forensics.env.workers.envdump.DEFAULT_SELECT`, ``env_select_extra`` adds.
        environ: read for ``$FORENSICS_ENV_SELECT_EXTRA`` (comma-separated, adds).

    Returns:
        names and prefixes (a prefix ends in ``_``), de-duplicated, in order.
    """
    base = list(options.get("env_select") or envdump.DEFAULT_SELECT)
    extra = list(options.get("env_select_extra") or [])
    extra += [s.strip() for s in environ.get(EXTRA_VAR, "").split(",") if s.strip()]
    return tuple(dict.fromkeys(base + extra))


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``NAME=value`` lines of an nccl.conf (``#`` comments and blank lines skipped, spaces trimmed)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        if name.strip():
            out[name.strip()] = value.strip()
    return out


def config_files(environ, system_path: str = SYSTEM_CONF) -> list[dict[str, Any]]:
    """NCCL's config files in the order NCCL reads them (an earlier file wins; the environment beats both).

    Returns:
        one entry per candidate: ``path``, ``role`` (``NCCL_CONF_FILE`` /
        ``user`` / ``system``), ``vars`` (raw) or a missing value when absent
        or unreadable.
    """
    files = []
    user = environ.get("NCCL_CONF_FILE")
    if user:
        files.append((user, "NCCL_CONF_FILE"))
    elif environ.get("HOME"):
        files.append((os.path.join(environ["HOME"], ".nccl.conf"), "user"))
    files.append((system_path, "system"))
    out = []
    for path, role in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                out.append({"path": path, "role": role, "vars": parse_nccl_conf(fh.read())})
        except FileNotFoundError:
            out.append(
                {
                    "path": path,
                    "role": role,
                    "vars": missing(MissingReason.NOT_FOUND, "no such file"),
                }
            )
        except OSError as exc:
            out.append(
                {
                    "path": path,
                    "role": role,
                    "vars": missing(
                        MissingReason.NO_PERMISSION
                        if isinstance(exc, PermissionError)
                        else MissingReason.ERROR,
                        str(exc.strerror),
                    ),
                }
            )
    return out


def conf_effective(files: list[dict[str, Any]], env: dict[str, str]) -> dict[str, dict[str, str]]:
    """Variables NCCL takes from its config files.

    NCCL applies each file with ``setenv(name, value, 0)``: the environment
    wins, then the first file that names the variable.

    Args:
        files: :func:`config_files` output.
        env: the environment NCCL starts with.

    Returns:
        ``{name: {"value": str, "from": path}}``.
    """
    out: dict[str, dict[str, str]] = {}
    for f in files:
        if isinstance(f["vars"], dict) and "missing" not in f["vars"]:
            for name, value in f["vars"].items():
                if name not in env and name not in out:
                    out[name] = {"value": value, "from": f["path"]}
    return out


def differences(
    parent: dict[str, str],
    worker: dict[str, str],
    at_exec: dict[str, str] | None,
    ignore=frozenset(),
) -> list[dict[str, Any]]:
    """Variables whose value in ``worker`` differs from ``parent`` (raw values).

    ``where`` says when it changed: ``startup_hooks`` when the worker's
    environment at exec still had the parent's value (so sitecustomize,
    usercustomize or a .pth hook changed it), ``at_exec`` when the process was
    started with the other value (set by the launcher or the parent's start
    method), ``unknown`` without /proc.
    """
    out = []
    for name in sorted(set(parent) | set(worker)):
        if name in ignore or parent.get(name) == worker.get(name):
            continue
        if at_exec is None:
            where = "unknown"
        else:
            where = "startup_hooks" if at_exec.get(name) == parent.get(name) else "at_exec"
        out.append(
            {
                "name": name,
                "parent": parent.get(name, unset()),
                "worker": worker.get(name, unset()),
                "where": where,
            }
        )
    return out


from forensics.procgroup import run_group, terminal_signals_blocked  # noqa: E402  (shared helpers)


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _mp_worker(method: str, path: str, select, timeout_s: float) -> dict[str, Any]:
    import multiprocessing as mp

    if method not in mp.get_all_start_methods():
        return {
            "failure": missing(
                MissingReason.NOT_SUPPORTED, f"start method {method} not on this platform"
            )
        }
    from multiprocessing import resource_tracker

    proc = mp.get_context(method).Process(
        target=envdump.dump_and_exit, args=(path, tuple(select), method), daemon=True
    )
    # The workers (and the forkserver, and the resource tracker) share forensics' process group: the
    # terminal's Ctrl-C must not reach them while their interpreters start (a traceback under
    # forensics' one line). The tracker is started first, as it starts itself (SIGINT blocked for its
    # fork, then unblocked in this thread: inside the block below it would unblock it for the rest).
    resource_tracker.ensure_running()
    with terminal_signals_blocked():
        proc.start()
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join(1)
        return {
            "failure": missing(MissingReason.TIMED_OUT, f"{method} worker after {timeout_s:g} s")
        }
    if proc.exitcode != 0:
        return {"failure": missing(MissingReason.ERROR, f"{method} worker exit {proc.exitcode}")}
    return {"record": _read_json(path)}


def _cmd_worker(argv: list[str], path: str, timeout_s: float) -> dict[str, Any]:
    rc, _out, err = run_group(argv, timeout_s)
    if rc is None:
        return {"failure": missing(MissingReason.TIMED_OUT, f"worker after {timeout_s:g} s")}
    if rc != 0 or not os.path.exists(path):
        last = (err.strip().splitlines() or [""])[-1][:300]
        return {"failure": missing(MissingReason.ERROR, f"worker exit {rc}: {last}")}
    return {"record": _read_json(path)}


def torch_installed() -> bool:
    """True if ``import torch`` would find a package (``importlib.util.find_spec``; torch is not imported)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def worker_argv(extra: list[str]) -> list[str]:
    """``python -m forensics.env.workers.envdump`` plus ``extra``, with this interpreter."""
    return [sys.executable, "-m", WORKER_MODULE, *extra]


def run_start_methods(select, tmpdir: str, timeout_s: float, with_torch: bool) -> dict[str, Any]:
    """Start one worker per start method, all at once (one thread each).

    ``torch_spawn`` is a plain subprocess that imports torch and starts one
    worker with ``torch.multiprocessing.spawn``; it runs only if ``with_torch``.

    Args:
        select: names and prefixes the workers record.
        tmpdir: private folder the workers write ``<method>.json`` in.
        timeout_s: per worker, seconds; a worker still running is killed.
        with_torch: also run ``torch_spawn``.

    Returns:
        ``{method: {"record": dict} | {"failure": missing value}, "duration_s": float}``
        (round trip of that worker, seconds). Never raises for a worker's failure.
    """
    sel = ",".join(select)
    jobs: dict[str, Callable[[], dict[str, Any]]] = {}
    for method in ("spawn", "forkserver"):
        path = os.path.join(tmpdir, f"{method}.json")
        jobs[method] = lambda m=method, p=path: _mp_worker(m, p, select, timeout_s)
    sub = os.path.join(tmpdir, "subprocess.json")
    jobs["subprocess"] = lambda: _cmd_worker(
        worker_argv(["--out", sub, "--select", sel]), sub, timeout_s
    )
    if with_torch:
        tsp = os.path.join(tmpdir, "torch_spawn.json")
        jobs["torch_spawn"] = lambda: _cmd_worker(
            worker_argv(["--out", tsp, "--select", sel, "--via-torch-spawn"]), tsp, timeout_s
        )

    def _timed(fn):
        t0 = time.perf_counter()
        try:
            res = fn()
        except Exception as exc:  # one start method failing must not lose the others
            res = {
                "failure": missing(
                    MissingReason.ERROR, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                )
            }
        res["duration_s"] = round(time.perf_counter() - t0, 3)
        return res

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(_timed, fn) for name, fn in jobs.items()}
        return {name: fut.result() for name, fut in futures.items()}


def launcher_argv(launcher: str, extra: list[str]) -> list[str]:
    """The full command for a launcher prefix.

    ``torchrun`` (and ``python -m torch.distributed.run``) run a Python
    program themselves, so they get ``-m forensics.env.workers.envdump ...``;
    with ``--no-python``, and for every other prefix (``srun``, ``mpirun``,
    ``env -u X``, a wrapper script), the worker is ``<this python> -m ...``.

    Raises:
        ValueError: the prefix is empty or cannot be split (unbalanced quotes).
    """
    prefix = shlex.split(launcher)
    if not prefix:
        raise ValueError("empty launcher")
    names = [os.path.basename(p) for p in prefix]
    torchrun = (
        "torchrun" in names
        or "torch.distributed.run" in prefix
        or "torch.distributed.launch" in prefix
    )
    if torchrun and "--no-python" not in prefix and "--no_python" not in prefix:
        return [*prefix, "-m", WORKER_MODULE, *extra]
    return [*prefix, *worker_argv(extra)]


def gather(out_dir: str, stdout: str) -> list[dict[str, Any]]:
    """Collect the records of a launcher run.

    Reads every ``envdump-*.json`` in ``out_dir`` and every line of
    ``stdout`` that starts with the ``FORENSICS_ENVDUMP_V1`` marker (ranks on
    hosts that do not share ``out_dir``); a file wins over a line for the same
    (host, pid). NCCL logs still in ``out_dir`` replace the lines a rank read
    of its own log (NCCL may not have flushed it then). Unreadable records are skipped.

    Returns:
        records sorted by rank (ranks without one last), then host and pid.
    """
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "envdump-*.json"))):
        try:
            rec = _read_json(path)
        except (OSError, ValueError):
            continue
        records[(rec.get("host"), rec.get("pid"))] = rec
    for line in stdout.splitlines():
        if line.startswith(envdump.STDOUT_MARKER):
            try:
                rec = json.loads(line[len(envdump.STDOUT_MARKER) :])
            except ValueError:
                continue
            records.setdefault((rec.get("host"), rec.get("pid")), rec)
    for rec in records.values():
        info = rec.get("nccl_init")
        if isinstance(info, dict) and info.get("log_file"):
            path = os.path.join(out_dir, info["log_file"])
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as fh:
                    info["log_lines"] = [ln.rstrip("\n") for ln in fh if " NCCL " in ln]
    return sorted(
        records.values(),
        key=lambda r: (
            r.get("rank") is None,
            r.get("rank") or 0,
            str(r.get("host")),
            r.get("pid") or 0,
        ),
    )


_LIVE: set[str] = set()
"""The folders :func:`private_dir` made and :func:`remove_dir` has not removed yet."""
_REGISTERED: list[bool] = []  # the atexit handler is registered once


def private_dir() -> str:
    """A fresh 0700 temp folder for worker records (raw values: deleted after reading).

    Removed by :func:`remove_dir` once read, or at the process's exit (an ``atexit`` handler, which
    ``forensics.cli.common.quick_exit`` runs too) when the reading was abandoned: a probe stopped by
    ``--timeout`` or by Ctrl-C left its three folders in the temp folder, one holding a worker's record of
    the raw variables.
    """
    path = tempfile.mkdtemp(prefix="forensics-env-")
    if not _REGISTERED:
        import atexit

        atexit.register(_remove_live)
        _REGISTERED.append(True)
    _LIVE.add(path)
    return path


def remove_dir(path: str) -> None:
    """Delete a folder made by :func:`private_dir`."""
    shutil.rmtree(path, ignore_errors=True)
    _LIVE.discard(path)


def _remove_live() -> None:
    """Delete every :func:`private_dir` folder still there (at exit)."""
    for path in list(_LIVE):
        remove_dir(path)


NET_DIR = "/sys/class/net"


def net_interfaces(net_dir: str = NET_DIR) -> dict[str, Any]:
    """The host's network interfaces, as NCCL chooses among them for sockets and bootstrap.

    Sources: ``/sys/class/net/<name>/operstate`` and ``mtu``; the address
    families each interface carries from ``psutil.net_if_addrs()`` (``inet``,
    ``inet6``: NCCL only considers interfaces with an IPv4 or IPv6 address).
    Addresses themselves are not recorded.

    Returns:
        ``{"interfaces": {name: {"operstate", "mtu", "families"}}}``, or a missing
        value when ``/sys/class/net`` cannot be listed (no sysfs).
    """
    try:
        names = sorted(os.listdir(net_dir))
    except OSError as exc:
        return missing(MissingReason.NOT_FOUND, f"{net_dir}: {exc.strerror}")
    families: dict[str, list[str]] | None = None
    try:
        import socket

        import psutil

        fam_names = {socket.AF_INET: "inet", socket.AF_INET6: "inet6"}
        families = {
            n: sorted({fam_names[a.family] for a in addrs if a.family in fam_names})
            for n, addrs in psutil.net_if_addrs().items()
        }
    except Exception:  # noqa: BLE001 - psutil absent or failing: states and MTUs still help
        families = None
    out: dict[str, Any] = {}
    for name in names:
        base = os.path.join(net_dir, name)
        entry: dict[str, Any] = {}
        for key in ("operstate", "mtu"):
            try:
                with open(os.path.join(base, key), encoding="utf-8") as fh:
                    raw = fh.read().strip()
                entry[key] = int(raw) if key == "mtu" and raw.isdigit() else raw
            except OSError:
                entry[key] = missing(MissingReason.NOT_FOUND, f"{base}/{key}")
        entry["families"] = (
            families.get(name, [])
            if families is not None
            else missing(MissingReason.NOT_FOUND, "psutil.net_if_addrs unavailable")
        )
        out[name] = entry
    return {"interfaces": out}


def socket_ifname_matches(value: str, interfaces: dict[str, Any]) -> list[str]:
    """The interfaces an ``NCCL_SOCKET_IFNAME`` value lets NCCL use, by NCCL's own rules.

    Rules (NCCL's environment-variable docs; ``matchIfList`` in NCCL's socket code):
    a comma-separated list of name prefixes (``eth`` matches ``eth0``, ``eth1``); a
    leading ``^`` turns it into a list to exclude; a leading ``=`` (after ``^`` if
    any) makes the names exact; ``:port`` after a name is ignored here. Only
    interfaces with an IPv4/IPv6 address count when the families are known.

    Returns:
        the names NCCL could pick, sorted (empty: NCCL finds no interface and fails
        with "Bootstrap : no socket interface found").
    """
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    items = [e.split(":")[0].strip() for e in text.split(",") if e.split(":")[0].strip()]
    out = []
    for name, entry in interfaces.items():
        fams = entry.get("families") if isinstance(entry, dict) else None
        if isinstance(fams, list) and not fams:
            continue  # no address: NCCL skips it
        hit = any(name == i if exact else name.startswith(i) for i in items)
        if hit != exclude:
            out.append(name)
    return sorted(out)
