"""Assemble the ``nccl_env`` data: run the collectors, compare, parse NCCL's log, redact.

:func:`collect_nccl_env` is what the probe's ``collect`` and ``forensics env``
call. It returns the data section described in ``docs/nccl-env-probe.md``
(top-level keys: ``select``, ``parent``, ``config_files``, ``start_methods``,
``launcher``, ``nccl_init``). Values of variables pass through
``Redactor.env`` (names that say "secret") after every comparison is made on
the raw values.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from forensics.env import collect as ec
from forensics.env.workers import envdump
from forensics.env.workers.binding import read_binding
from forensics.model import MissingReason, is_missing, missing
from forensics.procgroup import ChildGroups, probe_children

NOT_ASKED_LAUNCHER = "no --launcher given"
NOT_ASKED_NCCL = "opt-in: run with --nccl-init"
TORCH_SPAWN_SKIPPED = (
    "skipped: it imports torch in a child (1-4 s); runs with --deep, --nccl-init or --launcher"
)


class _Redact:
    def __init__(self, redactor):
        self.r = redactor

    def value(self, name: str, value: Any, where: str) -> Any:
        return (
            value
            if is_missing(value) or not isinstance(value, str)
            else self.r.env(name, value, f"{where}.{name}")
        )

    def env(self, env: dict[str, str], where: str) -> dict[str, Any]:
        return {k: self.value(k, v, where) for k, v in env.items()}

    def diffs(
        self, diffs: list[dict[str, Any]], where: str, keys=("parent", "worker")
    ) -> list[dict[str, Any]]:
        out = []
        for d in diffs:
            d = dict(d)
            for k in keys:
                if k in d:
                    d[k] = self.value(d["name"], d[k], f"{where}.{k}")
            out.append(d)
        return out


def _or_missing(value: Any, detail: str) -> Any:
    return missing(MissingReason.NOT_FOUND, detail) if value is None else value


def hooks_entry(hooks: dict[str, Any]) -> dict[str, Any]:
    """A worker's hooks with "none imported" as a missing value instead of ``None``."""
    out = dict(hooks or {})
    for key in ("sitecustomize", "usercustomize"):
        if out.get(key) is None:
            out[key] = missing(MissingReason.NOT_FOUND, "none imported at start-up")
    user = dict(out.get("user_site") or {})
    if user.get("path") is None and "path" in user:
        user["path"] = missing(MissingReason.NOT_APPLICABLE, "no user site")
    if user:
        out["user_site"] = user
    return out


def worker_entry(
    rec: dict[str, Any],
    parent_raw: dict[str, str],
    red: _Redact,
    where: str,
    ignore=frozenset(),
    conf: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Turn one worker record (:func:`forensics.env.workers.envdump.snapshot`) into its data entry.

    Args:
        rec: the raw record the worker wrote.
        parent_raw: the launching process's selected variables, unredacted.
        red: redaction helper (records each redaction under ``where``).
        where: dotted place for redaction records.
        ignore: names never counted as differences (launcher bookkeeping).
        conf: :func:`forensics.env.collect.conf_effective`, to explain NCCL's report.

    Returns:
        the entry described in docs/nccl-env-probe.md (``env``, ``differs``,
        ``hooks``...; ``nccl`` when the worker ran ``--nccl-init``); rank fields
        the launcher did not set are missing values.
    """
    env = rec.get("env") or {}
    at_exec = rec.get("env_at_exec")
    startup = (
        []
        if at_exec is None
        else sorted(k for k in set(env) | set(at_exec) if env.get(k) != at_exec.get(k))
    )
    out = {
        "method": rec.get("method", ""),
        "host": rec.get("host", ""),
        "pid": rec.get("pid"),
        "rank": _or_missing(rec.get("rank"), "no RANK variable"),
        "local_rank": _or_missing(rec.get("local_rank"), "no LOCAL_RANK variable"),
        "world_size": _or_missing(rec.get("world_size"), "no WORLD_SIZE variable"),
        "python": rec.get("python", {}),
        "hooks": hooks_entry(rec.get("hooks", {})),
        "rank_vars": red.env(rec.get("rank_vars") or {}, f"{where}.rank_vars"),
        "env": red.env(env, f"{where}.env"),
        "changed_at_startup": startup,
        "differs": red.diffs(ec.differences(parent_raw, env, at_exec, ignore), f"{where}.differs"),
        "binding": rec.get("binding")
        or missing(
            MissingReason.NOT_FOUND,
            "the worker recorded no binding (an older forensics in the worker's Python)",
        ),
    }
    if isinstance(rec.get("nccl_init"), dict):
        out["nccl"] = nccl_entry(rec["nccl_init"], parent_raw, red, f"{where}.nccl", conf)
    return out


def nccl_entry(
    info: dict[str, Any],
    parent_raw: dict[str, str],
    red: _Redact,
    where: str,
    conf: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """One rank's NCCL facts, parsed from its own NCCL_DEBUG=INFO log.

    Args:
        info: the rank's ``nccl_init`` record (backend, all-reduce result, ``log_lines``).
        parent_raw: the launching process's selected variables, unredacted.
        red: redaction helper; ``where``: its place label.
        conf: variables NCCL's config files supply (``explained_by``).

    Returns:
        ``version``, ``set_by_environment``, ``channels``, ``transports``,
        ``network``, ``warnings``, ``p2p_failures``, ``bus_id`` (missing values when NCCL wrote no log, e.g.
        gloo), ``failures`` (:func:`forensics.env.nccllog.failures` of the rank's error) and ``nccl_differs``: each variable NCCL reported "set by
        environment" with a value the launching process does not have
        (``NCCL_DEBUG*`` set by the rank itself are left out).
    """
    from forensics.env import nccllog  # only --nccl-init and --launcher ranks have a log to parse

    parsed = nccllog.parse(info.get("log_lines") or [])
    mine = next(iter(list(parsed["ranks"].values()) + list(parsed["unranked"].values())), None)
    no_log = (
        missing(MissingReason.NOT_APPLICABLE, info.get("reason") or "NCCL wrote no log")
        if mine is None
        else None
    )
    out: dict[str, Any] = {
        "backend": info.get("backend", ""),
        "nccl_available": bool(info.get("nccl_available")),
        "allreduce_ok": bool(info.get("allreduce_ok")),
    }
    for key in ("reason", "error", "torch_version", "torch_nccl_version", "phase"):
        if info.get(key):
            out[key] = info[key]
    out["failures"] = nccllog.failures(str(info.get("error") or "").splitlines())
    if mine is None:
        out.update(
            version=no_log,
            set_by_environment={},
            channels=no_log,
            transports={},
            network=no_log,
            warnings=[],
            p2p_failures=[],
            nccl_differs=[],
        )
        return out
    sbe = mine["set_by_environment"]
    diffs = []
    for name, value in sorted(sbe.items()):
        if name in ec.SET_BY_PROBE or parent_raw.get(name) == value:
            continue
        d = {"name": name, "parent": parent_raw.get(name, ec.unset()), "nccl": value}
        src = (conf or {}).get(name)
        if name not in parent_raw and src and src["value"] == value:
            d["explained_by"] = src["from"]
        diffs.append(d)
    if info.get("phase") in (
        "init",
        "allreduce",
    ):  # the rank never finished: keep what NCCL printed last
        out["last_lines"] = [
            red.r.text(ln.split(" NCCL ", 1)[-1], f"{where}.last_lines")
            for ln in (info.get("log_lines") or [])[-5:]
        ]
    out.update(
        version=_or_missing(mine["version"], "no 'NCCL version' line"),
        set_by_environment=red.env(sbe, f"{where}.set_by_environment"),
        channels=_or_missing(mine["channels"], "no channel line"),
        transports=mine["transports"],
        network=_or_missing(mine["network"], "no 'Using network' line"),
        warnings=[red.r.text(w, f"{where}.warnings") for w in mine["warnings"][:20]],
        p2p_failures=mine.get("p2p_failures", [])[:20],
        bus_id=_or_missing(mine.get("bus_id"), "no busId in the comm-init line"),
        nccl_differs=red.diffs(diffs, f"{where}.nccl_differs", keys=("parent", "nccl")),
    )
    return out


def _start_method_entry(
    res: dict[str, Any], parent_raw, red: _Redact, where: str
) -> dict[str, Any]:
    if "failure" in res:
        return {
            "status": "failed",
            "duration_s": res.get("duration_s", 0.0),
            "reason": res["failure"],
        }
    entry = worker_entry(res["record"], parent_raw, red, where)
    entry = {"status": "ok", "duration_s": res.get("duration_s", 0.0), **entry}
    for key in ("rank", "local_rank", "world_size", "rank_vars"):
        entry.pop(key, None)
    return entry


def _recorded(groups: ChildGroups, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn``, recording in ``groups`` the child processes it starts in the pool's thread."""

    def run() -> Any:
        with probe_children(groups):
            return fn()

    return run


def _ranks_run(argv: list[str], out_dir: str, timeout_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        rc, out, err = ec.run_group(argv, timeout_s)
    except OSError as exc:
        return {
            "failure": missing(MissingReason.NOT_FOUND, f"{argv[0]}: {exc.strerror}"),
            "records": [],
            "duration_s": 0.0,
            "stderr": "",
        }
    return {
        "returncode": rc,
        "records": ec.gather(out_dir, out),
        "stderr": err,
        "duration_s": round(time.perf_counter() - t0, 3),
    }


def _ranks_section(
    run: dict[str, Any],
    parent_raw,
    red: _Redact,
    where: str,
    error,
    label: str,
    conf: dict[str, dict[str, str]],
) -> dict[str, Any]:
    ranks = [
        worker_entry(r, parent_raw, red, f"nccl_env.{where}.ranks[{i}]", ec.EXPECTED_IN_RANKS, conf)
        for i, r in enumerate(run["records"])
    ]
    rc = run.get("returncode")
    section: dict[str, Any] = {"duration_s": run.get("duration_s", 0.0), "ranks": ranks}
    if "failure" in run:
        section["returncode"] = run["failure"]
        error(where, f"{label}: {run['failure'].get('detail')}")
    elif rc is None:
        section["returncode"] = missing(
            MissingReason.TIMED_OUT, "killed after the probe's time budget"
        )
        error(where, f"{label} timed out; {len(ranks)} rank(s) reported")
    else:
        section["returncode"] = rc
        if rc != 0:
            error(where, f"{label} exited with status {rc}")
    if rc is None and "failure" not in run:
        hung = mark_hung(ranks, run.get("duration_s", 0.0))
        if hung:
            error(
                f"{where}.ranks",
                f"{hung} rank(s) hung in NCCL and were killed; their NCCL log up to then is "
                "recorded",
            )
    tail = [ln for ln in (run.get("stderr") or "").splitlines() if ln.strip()][-15:]
    if tail and (rc != 0 or not ranks):
        section["stderr_tail"] = [red.r.text(ln, f"{where}.stderr_tail") for ln in tail]
    sizes = {r["world_size"] for r in ranks if isinstance(r["world_size"], int)}
    if sizes and len(ranks) < max(sizes):
        error(f"{where}.ranks", f"only {len(ranks)} of {max(sizes)} ranks reported")
    if not ranks:
        error(f"{where}.ranks", f"no worker reported under the {label}")
    return section


def mark_hung(ranks: list[dict[str, Any]], killed_after_s: float) -> int:
    """Mark each rank of a killed run that never finished its collective (``phase`` ``init`` or
    ``allreduce`` in its record): ``nccl.hung`` = ``{"phase", "killed_after_s"}``. Returns how many."""
    n = 0
    for r in ranks:
        nccl = r.get("nccl")
        if isinstance(nccl, dict) and nccl.get("phase") in ("init", "allreduce"):
            nccl["hung"] = {"phase": nccl["phase"], "killed_after_s": killed_after_s}
            n += 1
    return n


def _nccl_summary(ranks: list[dict[str, Any]], under: str) -> dict[str, Any]:
    infos = [r["nccl"] for r in ranks if "nccl" in r]
    if not infos:
        return {
            "under": under,
            "backend": missing(MissingReason.ERROR, "no rank reported"),
            "ranks_reporting": 0,
        }
    versions = sorted({i["version"] for i in infos if isinstance(i["version"], str)})
    first = infos[0]
    out = {
        "under": under,
        "backend": first["backend"],
        "nccl_available": first["nccl_available"],
        "version": versions[0] if len(versions) == 1 else (versions or first["version"]),
        "allreduce_ok": all(i["allreduce_ok"] for i in infos),
        "ranks_reporting": len(infos),
    }
    hung = sum(1 for i in infos if i.get("hung"))
    if hung:
        out["hung"] = hung
    if first.get("reason"):
        out["reason"] = first["reason"]
    return out


def _parent_side(
    select,
    parent_raw: dict[str, str],
    at_exec_all: dict[str, str] | None,
    files: list[dict[str, Any]],
    conf: dict[str, dict[str, str]],
    red: _Redact,
) -> dict[str, Any]:
    """``select``, ``parent``, ``network`` and ``config_files`` of the data section: the launching
    process's own view (``os.environ``, ``/proc/self/environ``, its start-up hooks and binding,
    ``/sys/class/net``, NCCL's config files)."""
    data: dict[str, Any] = {"select": list(select)}
    changed = (
        []
        if at_exec_all is None
        else ec.differences(envdump.filter_env(at_exec_all, select), parent_raw, None)
    )
    data["parent"] = {
        "env": red.env(parent_raw, "nccl_env.parent.env"),
        "changed_in_process": [d["name"] for d in changed],
        "hooks": hooks_entry(envdump.find_hooks()),
        "python": {"executable": sys.executable, "version": sys.version.split()[0]},
        "binding": read_binding(),
    }
    data["network"] = ec.net_interfaces()
    data["config_files"] = {
        "files": [
            {
                **f,
                "vars": red.env(f["vars"], "nccl_env.config_files")
                if "missing" not in f["vars"]
                else f["vars"],
            }
            for f in files
        ],
        "effective": {
            k: {
                "value": red.value(k, v["value"], "nccl_env.config_files.effective"),
                "from": v["from"],
            }
            for k, v in conf.items()
        },
    }
    return data


def collect_nccl_env(
    options: dict[str, Any], redactor, timeout_s: float, error: Callable[[str, str], None]
) -> dict[str, Any]:
    """Collect the ``nccl_env`` data section.

    Args:
        options: ``launcher`` (str), ``nccl_init`` (bool), ``deep`` (bool),
            ``env_select`` / ``env_select_extra`` (lists).
        redactor: a :class:`forensics.redact.Redactor`.
        timeout_s: the whole budget, seconds; workers get a little less.
        error: ``error(field_path, message)`` for field-level failures.

    Raises:
        ValueError: ``launcher`` cannot be split into a command.
    """
    red = _Redact(redactor)
    select = ec.selection(options)
    parent_raw = envdump.filter_env(os.environ, select)
    at_exec_all = envdump.read_exec_env()
    launcher = options.get("launcher") or ""
    nccl_init = bool(options.get("nccl_init"))
    slow = bool(launcher or nccl_init or options.get("deep"))
    budget = max(1.0, timeout_s - 1.5)
    sel = ",".join(select)
    dirs = [ec.private_dir() for _ in range(3)]
    try:
        jobs: dict[str, Callable[[], Any]] = {
            "start": lambda: ec.run_start_methods(
                select, dirs[0], budget, slow and ec.torch_installed()
            )
        }
        if launcher:
            argv = ec.launcher_argv(
                launcher,
                ["--out-dir", dirs[1], "--select", sel, "--method", "launcher", "--stdout"]
                + (["--nccl-init"] if nccl_init else []),
            )
            jobs["launcher"] = lambda: _ranks_run(argv, dirs[1], budget)
        elif nccl_init:
            argv = ec.worker_argv(
                ["--out-dir", dirs[2], "--select", sel, "--nccl-init", "--method", "nccl_init"]
            )
            jobs["nccl"] = lambda: _ranks_run(argv, dirs[2], budget)
        groups = ChildGroups()
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            # The workers (fresh interpreters, the slow part) start first; the launching process's
            # own side is read while they come up.
            futures = {k: pool.submit(_recorded(groups, fn)) for k, fn in jobs.items()}
            try:
                files = ec.config_files(os.environ)
                conf = ec.conf_effective(files, os.environ)
                data = _parent_side(select, parent_raw, at_exec_all, files, conf, red)
                results = {k: f.result() for k, f in futures.items()}
            except BaseException:
                # Ctrl-C: the launcher and the subprocess worker run in sessions of their own, which a
                # terminal's SIGINT does not reach; stopped here, the pool's threads return at once
                # instead of when the launcher ends.
                groups.close()
                raise
    finally:
        for d in dirs:
            ec.remove_dir(d)
    sm = {}
    for method in ec.START_METHODS:
        if method in results["start"]:
            sm[method] = _start_method_entry(
                results["start"][method], parent_raw, red, f"nccl_env.start_methods.{method}"
            )
            if sm[method]["status"] != "ok":
                error(f"start_methods.{method}", str(sm[method]["reason"].get("detail", "")))
        elif method == "torch_spawn":
            sm[method] = {
                "status": "unavailable",
                "reason": missing(
                    MissingReason.NOT_APPLICABLE,
                    "torch is not installed" if not ec.torch_installed() else TORCH_SPAWN_SKIPPED,
                ),
            }
    data["start_methods"] = sm
    if launcher:
        section = _ranks_section(
            results["launcher"], parent_raw, red, "launcher", error, "launcher", conf
        )
        data["launcher"] = {
            "command": redactor.text(launcher, "nccl_env.launcher.command"),
            **section,
        }
        data["nccl_init"] = (
            _nccl_summary(section["ranks"], "launcher")
            if nccl_init
            else missing(MissingReason.NOT_APPLICABLE, NOT_ASKED_NCCL)
        )
    else:
        data["launcher"] = missing(MissingReason.NOT_APPLICABLE, NOT_ASKED_LAUNCHER)
        if nccl_init:
            section = _ranks_section(
                results["nccl"], parent_raw, red, "nccl_init", error, "nccl-init coordinator", conf
            )
            data["nccl_init"] = {**_nccl_summary(section["ranks"], "subprocess"), **section}
        else:
            data["nccl_init"] = missing(MissingReason.NOT_APPLICABLE, NOT_ASKED_NCCL)
    return data
