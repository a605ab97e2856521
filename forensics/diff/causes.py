"""Root causes and mechanisms: which implicated finding explains which (DESIGN section 17).

The links are one table, :data:`forensics.hypotheses.LINKS` (plus the ``links`` a third-party
probe declares by hypothesis id); this module applies it to a judged ledger (pure, no I/O):

- a link holds when both its hypotheses are implicated (at ``low`` or above; the cause at
  ``min_cause`` or above) and, where the row asks for one, an implicating finding of that side
  carries the row's fact tag in its ``fields`` (a judge writes it: ``fact.limit-lowered``,
  ``fact.p2p-workaround-removed``, ``fact.p2p-blocked``);
- each explained hypothesis gets one cause: of the causes whose links hold, the one with the
  highest score (a standing ACS problem and a new NCCL release can both explain a transport
  change; the ledger keeps the one its evidence ranks higher);
- a cause inherits the score of what it explains (its mechanism's evidence is its evidence), so the
  root of a chain ranks where its strongest link would; the mechanism follows its cause in the
  ledger's order, marked ``explained_by``, and is never a rival suspect;
- :func:`chain_sentence` tells the chain in one sentence for the verdict.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from forensics.hypotheses import LINKS, Link
from forensics.model import Finding, HypothesisStatus, Severity

_SEVERITY = {
    "low": Severity.LOW,
    "medium": Severity.MEDIUM,
    "high": Severity.HIGH,
    "critical": Severity.CRITICAL,
}


def all_links(probes: Iterable[object]) -> list[Link]:
    """:data:`LINKS` plus every ``links`` row the given probe instances declare (those that are not ``None``)."""
    out = list(LINKS)
    for p in probes:
        for link in getattr(p, "links", ()) or ():
            if isinstance(link, Link) and link not in out:
                out.append(link)
    return out


def _strong(findings: Sequence[Finding]) -> list[Finding]:
    return [
        f for f in findings if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0
    ]


def holds(link: Link, cause: Sequence[Finding], effect: Sequence[Finding]) -> bool:
    """Does ``link`` hold between these findings of its cause and its effect (rules in the module doc)?"""
    floor = _SEVERITY.get(link.min_cause, Severity.LOW).weight
    c = [f for f in _strong(cause) if f.severity.weight >= floor]
    e = _strong(effect)
    if not c or not e:
        return False
    if link.cause_fact and not any(link.cause_fact in f.fields for f in c):
        return False
    if link.effect_fact and not any(link.effect_fact in f.fields for f in e):
        return False
    return True


def link(hyps: list, links: Sequence[Link]) -> dict[str, tuple[str, Link]]:
    """Mark causes and mechanisms on ledger lines (:class:`forensics.diff.ledger.Hypothesis`), in place.

    Args:
        hyps: every ledger line, with ``findings`` and ``score`` set.
        links: the table (:func:`all_links`).

    Returns:
        ``{effect id: (cause id, link)}`` for every link drawn. Each line's ``explained_by`` (its cause's
        id, "" for none) and ``explains`` (ids it explains) are set, scores raised along each chain, and
        a line of evidence added on both ends.
    """
    by_id = {h.id: h for h in hyps}
    parent: dict[str, tuple[str, Link]] = {}
    for row in links:
        c, e = by_id.get(row.cause), by_id.get(row.effect)
        if c is None or e is None or c is e or not holds(row, c.findings, e.findings):
            continue
        have = parent.get(row.effect)
        if have is None or by_id[have[0]].score < c.score:
            parent[row.effect] = (row.cause, row)
    # no cycles: a table row that would make a hypothesis its own ancestor is dropped
    for eff in list(parent):
        seen, cur = {eff}, parent[eff][0]
        while cur in parent:
            if cur in seen:
                del parent[eff]
                break
            seen.add(cur)
            cur = parent[cur][0]
    for h in hyps:
        h.explained_by, h.explains = "", []
    for eff, (cause, _row) in parent.items():
        by_id[eff].explained_by = cause
        by_id[cause].explains.append(eff)

    # the root inherits the score of its chain (deepest effects first)
    def depth(hid: str) -> int:
        n = 0
        while hid in parent:
            hid, n = parent[hid][0], n + 1
        return n

    for eff in sorted(parent, key=depth, reverse=True):
        cause, row = parent[eff]
        c, e = by_id[cause], by_id[eff]
        c.score = max(c.score, e.score)
        line = f"explains {eff} ({e.summary}): {row.why}"
        if line not in c.evidence:
            c.evidence.append(line)
        mech = f"mechanism of {cause} ({c.summary}), not a separate cause: {row.why}"
        if mech not in e.evidence:
            e.evidence.insert(1 if e.evidence and e.evidence[0] == e.summary else 0, mech)
    return parent


def order(hyps: list) -> list:
    """Implicated roots by score, each followed by what it explains (depth first); the rest keep their order."""
    imp = [h for h in hyps if h.status is HypothesisStatus.IMPLICATED]
    rest = [h for h in hyps if h.status is not HypothesisStatus.IMPLICATED]
    by_id = {h.id: h for h in imp}
    out: list = []

    def walk(h) -> None:
        out.append(h)
        for kid in sorted((by_id[k] for k in h.explains if k in by_id), key=lambda x: -x.score):
            walk(kid)

    for h in sorted(
        (h for h in imp if not h.explained_by or h.explained_by not in by_id),
        key=lambda x: -x.score,
    ):
        walk(h)
    out += [h for h in imp if h not in out]
    return out + rest


def chain(top, hyps: list) -> list:
    """``[top, its mechanism, the mechanism's mechanism ...]``: the highest-scored path down from ``top``."""
    by_id = {h.id: h for h in hyps}
    path, cur = [top], top
    while cur.explains:
        kids = [by_id[k] for k in cur.explains if k in by_id and by_id[k] not in path]
        if not kids:
            break
        cur = max(kids, key=lambda x: x.score)
        path.append(cur)
    return path


def chain_sentence(top, hyps: list, parent: dict[str, tuple[str, Link]], bench=None) -> str:
    """``nccl.version (NCCL 2.18.5 -> 2.20.5), which changed the transport: nccl.transport (...); measured
    canary.allreduce_us 1.42x slower`` -- the root and its mechanisms in one sentence."""
    path = chain(top, hyps)
    text = f"{top.id} ({top.summary})"
    measured: list[str] = []
    for h in path[1:]:
        row = parent[h.id][1]
        text += f", {row.verb} {h.id} ({h.summary})"
        measured += [m for m in row.measured if m not in measured]
    if bench is not None and measured:
        moved = []
        for r in bench.results:
            if r.name in measured and bench.moved(r.name) and r.comparison is not None:
                moved.append(f"{r.name} {r.comparison.time_ratio:.2f}x slower")
        if moved:
            text += "; measured " + ", ".join(moved[:2])
    return text
