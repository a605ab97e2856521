"""Judging ``nccl.transport``: how NCCL moved data, whether its collective worked, what it warned about.

Pure functions over two ``nccl_env`` data sections. Facts come from the
``--nccl-init`` ranks (and ``--launcher ... --nccl-init`` ranks): each rank's
NCCL log parsed by :mod:`forensics.env.nccllog`, its all-reduce result and
error, and the host's interfaces (``network``) against ``NCCL_SOCKET_IFNAME``.

Rules (each a finding of ``nccl.transport``):

- *Transport downgrade*: the best path a rank's channels used got worse
  between the snapshots, in the order P2P > NET/IB > SHM > NET/Socket (for
  example ``P2P/CUMEM`` -> ``SHM`` when P2P stopped working, NCCL_P2P_DISABLE,
  or ACS redirecting P2P): high, relevance 0.9. Any other change of the
  transport families: medium, 0.6.
- *Failed collective*: a rank's NCCL all-reduce failed or gave a wrong sum
  (torch's ``NCCL error in: ...``, ``ncclInternalError``, a watchdog
  timeout), or the rank hung and was killed (``nccl.hung``: its record and NCCL
  log up to the kill, with the transport chosen so far): high, relevance 1.0, when new; the same failure on both sides is
  medium, relevance 0.3 ("a standing problem, not what changed").
- *WARN lines*: NCCL WARN lines other than the benign ones of hosts without
  InfiniBand (``Failed to open libibverbs``; :data:`forensics.env.nccllog.BENIGN_WARNINGS`)
  that are new in the second snapshot: medium, 0.6 (low, 0.2 when on both sides).
- *P2P could not be enabled* (``Could not enable P2P between dev ...``, NCCL 2.8-2.11):
  new: medium, 0.7.
- *NCCL_SOCKET_IFNAME matches no interface* of the host (NCCL's prefix, ``^``
  exclusion and ``=`` exact rules, :func:`forensics.env.collect.socket_ifname_matches`),
  in the launching process or in any worker: high, relevance 0.9 when new,
  medium 0.3 when on both sides.

Nothing implicated and ranks reported on both sides: ruled out, naming the
transports. No ``--nccl-init`` data: inconclusive (the interface check alone
cannot rule the transport out).
"""

from __future__ import annotations

from typing import Any

from forensics.env import nccllog
from forensics.env.collect import socket_ifname_matches
from forensics.env.entries import worker_entries
from forensics.model import Finding, Severity, implicated, inconclusive, is_missing, ruled_out

H = "nccl.transport"
ORDER = {"P2P": 4, "NET/IB": 3, "SHM": 2, "NET/Socket": 1}
"""How good a path is, best first (NVLink/PCIe P2P, then InfiniBand/RoCE, host shared memory, TCP)."""
NO_DATA = (
    "no NCCL log on either side: run 'forensics snapshot --nccl-init' (or with --launcher ... "
    "--nccl-init) to record NCCL's transports"
)


def _rank(family: str) -> int:
    cls = nccllog.transport_class(family)
    return ORDER.get(family, ORDER.get(cls, 2))


def nccl_ranks(data: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """``[(label, rank entry)]`` of every rank that ran ``--nccl-init`` (nccl or gloo)."""
    out = []
    if not data:
        return out
    for key, label in (("nccl_init", "nccl-init"), ("launcher", "launcher")):
        sec = data.get(key)
        if not isinstance(sec, dict) or is_missing(sec):
            continue
        for i, rank in enumerate(sec.get("ranks") or []):
            nccl = rank.get("nccl")
            if isinstance(nccl, dict):
                r = rank.get("rank")
                out.append((f"{label} rank {r if isinstance(r, int) else i}", rank))
    return out


def _transports(data) -> dict[str, dict[str, int]]:
    return {
        lbl: dict(r["nccl"].get("transports") or {})
        for lbl, r in nccl_ranks(data)
        if r["nccl"].get("backend") == "nccl"
    }


def _fmt_t(t: dict[str, int]) -> str:
    return (
        ", ".join(f"{k} x{v}" for k, v in sorted(t.items(), key=lambda kv: -_rank(kv[0])))
        or "no connection lines"
    )


def _failed(data) -> dict[str, str]:
    """``{rank label: one line}`` for ranks whose collective failed."""
    out = {}
    for lbl, r in nccl_ranks(data):
        n = r["nccl"]
        if n.get("allreduce_ok"):
            continue
        fails = n.get("failures") or []
        hung = n.get("hung")
        if isinstance(hung, dict):
            where = {
                "init": "while creating the communicator",
                "allreduce": "in its first all-reduce",
            }.get(str(hung.get("phase")), "")
            so_far = _fmt_t(n.get("transports") or {})
            last = (n.get("last_lines") or [""])[-1]
            text = (
                f"hung {where} and was killed after {hung.get('killed_after_s', 0):g} s; transport chosen so "
                f"far: {so_far}" + (f"; last NCCL line: {last}" if last else "")
            )
            out[lbl] = f"{n.get('backend')} {text}"
            continue
        if fails:
            f = fails[0]
            text = (
                f"{f.get('what')} ({f.get('code', 'no code')}), NCCL {f.get('nccl_version')}"
                + (f"; last error: {f['last_error']}" if f.get("last_error") else "")
                if f["kind"] == "nccl_error"
                else f"watchdog timeout of {f['op']} #{f['seq']} after {f['ran_ms'] / 1000:g} s"
            )
        else:
            text = str(n.get("error") or "wrong sum or no result")[:200]
        out[lbl] = f"{n.get('backend')} all-reduce failed: {text}"
    return out


def _warnings(data) -> tuple[dict[str, str], list[str]]:
    """({warning text: meaning} of the non-benign WARN lines, [benign lines as evidence])."""
    bad, benign = {}, []
    for lbl, r in nccl_ranks(data):
        for w in r["nccl"].get("warnings") or []:
            ok, meaning = nccllog.classify_warning(w)
            if ok:
                benign.append(f"{lbl}: NCCL WARN {w} ({meaning}; not a fault)")
            else:
                bad.setdefault(w, f"{meaning} ({lbl})")
    return bad, sorted(set(benign))


def _p2p_failures(data) -> set[str]:
    return {p for _, r in nccl_ranks(data) for p in (r["nccl"].get("p2p_failures") or [])}


def _ifname_problems(data) -> dict[tuple[str, str], list[str]]:
    """``{(where, value): interface names}`` for every NCCL_SOCKET_IFNAME that matches no interface."""
    net = (data or {}).get("network")
    ifs = net.get("interfaces") if isinstance(net, dict) else None
    if not isinstance(ifs, dict):
        return {}
    seen: dict[str, str] = {}
    parent = ((data.get("parent") or {}).get("env") or {}).get("NCCL_SOCKET_IFNAME")
    if isinstance(parent, str):
        seen.setdefault(parent, "launching process")
    for channel, entry in worker_entries(data):
        v = (entry.get("env") or {}).get("NCCL_SOCKET_IFNAME")
        if isinstance(v, str):
            seen.setdefault(v, channel)
    return {
        (where, v): sorted(ifs) for v, where in seen.items() if not socket_ifname_matches(v, ifs)
    }


def judge_transport(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Finding]:
    """Findings for ``nccl.transport`` (rules in the module docstring); ``before`` None judges ``after`` alone."""
    if after is None:
        return []
    found: list[Finding] = []
    evidence: list[str] = []
    tb, ta = _transports(before), _transports(after)
    if tb and ta:
        for lbl in sorted(set(tb) | set(ta)):
            b, a = tb.get(lbl, {}), ta.get(lbl, {})
            if not b or not a or set(b) == set(a):
                continue
            best_b, best_a = max(map(_rank, b)), max(map(_rank, a))
            lost = sorted(set(b) - set(a))
            if best_a < best_b:
                found.append(
                    implicated(
                        H,
                        Severity.HIGH,
                        f"{lbl}: NCCL transport {_fmt_t(b)} -> {_fmt_t(a)}: "
                        f"{', '.join(lost)} no longer used",
                        [
                            f"{lbl} before: {_fmt_t(b)}; after: {_fmt_t(a)} (NCCL INFO 'Channel NN : "
                            "a -> b via ...' lines)",
                            "usual causes: NCCL_P2P_DISABLE/NCCL_P2P_LEVEL, P2P not supported or "
                            "blocked (PCIe ACS redirect, IOMMU), a container without IPC; see gpu.topology",
                        ],
                        relevance=0.9,
                        fields=["nccl_env.nccl_init.ranks.*.nccl.transports"],
                    )
                )
            else:
                found.append(
                    implicated(
                        H,
                        Severity.MEDIUM,
                        f"{lbl}: NCCL transport {_fmt_t(b)} -> {_fmt_t(a)}",
                        [f"{lbl} before: {_fmt_t(b)}; after: {_fmt_t(a)}"],
                        relevance=0.6,
                        fields=["nccl_env.nccl_init.ranks.*.nccl.transports"],
                    )
                )
    for lbl, t in sorted(ta.items()):
        evidence.append(
            f"{lbl}: {_fmt_t(t)}" + (f" (before: {_fmt_t(tb[lbl])})" if lbl in tb else "")
        )
    fb, fa = _failed(before), _failed(after)
    for lbl, text in sorted(fa.items()):
        if before is not None and fb.get(lbl) == text:
            found.append(
                implicated(
                    H,
                    Severity.MEDIUM,
                    f"{lbl}: {text} -- on both sides: a standing problem, not what changed",
                    [text],
                    relevance=0.3,
                )
            )
        else:
            ev = [text]
            ev += [f"NCCL WARN {w} ({m})" for w, m in list(_warnings(after)[0].items())[:5]]
            found.append(
                implicated(
                    H,
                    Severity.HIGH,
                    f"{lbl}: {text}",
                    ev,
                    relevance=1.0,
                    fields=["nccl_env.nccl_init.allreduce_ok"],
                )
            )
    wb, _ = _warnings(before)
    wa, benign = _warnings(after)
    new_w = {w: m for w, m in wa.items() if w not in wb}
    if new_w and not fa:
        found.append(
            implicated(
                H,
                Severity.MEDIUM,
                f"NCCL warned: {next(iter(new_w))}",
                [f"NCCL WARN {w}: {m}" for w, m in list(new_w.items())[:8]],
                relevance=0.6,
            )
        )
    elif wa and not fa and before is not None:
        found.append(
            implicated(
                H,
                Severity.LOW,
                f"NCCL warned on both sides: {next(iter(wa))} (a standing "
                "problem, not what changed)",
                [f"NCCL WARN {w}: {m}" for w, m in list(wa.items())[:8]],
                relevance=0.2,
            )
        )
    evidence += benign
    pa, pb = _p2p_failures(after), _p2p_failures(before)
    if pa - pb:
        found.append(
            implicated(
                H,
                Severity.MEDIUM,
                f"NCCL could not enable P2P between dev {sorted(pa - pb)[0]} "
                "(it falls back to shared memory)",
                [f"Could not enable P2P between dev {p}" for p in sorted(pa - pb)[:6]],
                relevance=0.7,
            )
        )
    ib, ia = _ifname_problems(before), _ifname_problems(after)
    for (where, value), names in sorted(ia.items()):
        standing = any(v == value for _, v in ib)
        line = (
            f"{where}: NCCL_SOCKET_IFNAME={value!r} matches none of this host's interfaces with an address "
            f"({', '.join(names)}, /sys/class/net): NCCL fails with 'Bootstrap : no socket interface found'"
        )
        if standing:
            found.append(
                implicated(
                    H,
                    Severity.MEDIUM,
                    line + " -- on both sides, a standing problem",
                    [line],
                    relevance=0.3,
                    fields=["nccl_env.parent.env.NCCL_SOCKET_IFNAME"],
                )
            )
        else:
            found.append(
                implicated(
                    H,
                    Severity.HIGH,
                    line,
                    [
                        line,
                        "NCCL_SOCKET_IFNAME: prefixes, '^' excludes, "
                        "'=' exact names (NCCL environment variables docs)",
                    ],
                    relevance=0.9,
                    fields=["nccl_env.parent.env.NCCL_SOCKET_IFNAME"],
                )
            )
    if found:
        for f in found:
            f.evidence.extend(e for e in evidence if e not in f.evidence)
        return found
    if not tb and not ta:
        return [inconclusive(H, NO_DATA, evidence)]
    if before is None or not tb or not ta:
        side = "BEFORE" if not tb else "AFTER"
        return [
            inconclusive(
                H,
                f"NCCL's transports recorded on one side only (none in {side}): not compared",
                evidence,
            )
        ]
    return [
        ruled_out(
            H,
            "NCCL used the same transports on both sides ("
            + "; ".join(f"{lbl}: {_fmt_t(t)}" for lbl, t in sorted(ta.items()))
            + "); all-reduce ok; no NCCL warning",
            evidence,
        )
    ]
