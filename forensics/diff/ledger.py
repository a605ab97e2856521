"""The hypothesis ledger: two snapshots in, every hypothesis judged and ranked (DESIGN section 5).

:func:`analyse` is the core of ``forensics diff``:

1. each probe section of either snapshot gets its probe from the registry
   (:func:`forensics.registry.find_probe_class`; never imported by name) and
   the probe's field table labels its fields in the generic diff
   (:mod:`forensics.diff.changes`);
2. each probe's ``judge(before, after, jctx)`` turns its section pair into
   :class:`~forensics.model.Finding` objects; a judge that crashes is noted and
   its hypotheses end inconclusive;
3. a probe absent, unavailable or failed on one side makes the hypotheses it
   covers ``inconclusive``, said plainly (which side, and the probe's reason);
4. the git judge's ``code.change`` findings get the commits between the two HEADs and how HEAD moved,
   matched by repository path
   (:func:`forensics.diff.commits.attach_evidence`);
5. benchmark results in the snapshots are compared (:mod:`forensics.bench.effect`):
   a slower canary weighs toward the environment, a slower user step with a
   same canary and a clean environment implicates ``code.change`` (``low``
   when the slowdown is a small real change below the threshold);
6. every hypothesis of :data:`forensics.hypotheses.HYPOTHESES` ends
   ``implicated``, ``ruled-out`` or ``inconclusive`` with evidence; implicated
   ones are ranked by :func:`score`: prior x strength x the evidence rules of
   :mod:`forensics.diff.evidence` (the one table; docs/diagnosis.md).

Findings at ``info`` severity never implicate a hypothesis (an idle machine's
temperature is not a cause); they stay in its evidence.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from forensics import docfile
from forensics.bench.effect import BenchEffect, Pointer, compare_bench
from forensics.diff import causes as causes_mod
from forensics.diff import commits as commits_mod
from forensics.diff import evidence as ev_table
from forensics.diff import known as known_mod
from forensics.diff import layers as layers_mod
from forensics.diff.changes import Change, diff_snapshots
from forensics.errors import BadInputError
from forensics.fieldtypes import MALFORMED
from forensics.hypotheses import HYPOTHESES
from forensics.model import Finding, HypothesisStatus, Severity, implicated, inconclusive
from forensics.probe import JudgeContext, Probe, ProbeResult
from forensics.redact import Redactor
from forensics.registry import find_probe_class
from forensics.words import plural

CODE = "code.change"


@dataclass
class Hypothesis:
    """One line of the ledger.

    Attributes:
        id: a stable hypothesis id (``gpu.throttling``).
        status: implicated / ruled-out / inconclusive.
        score: ranking score, 0 unless implicated (see :func:`score`).
        severity: the highest severity among implicating findings (``info`` otherwise).
        summary: the sentence a reader sees first.
        evidence: every evidence line, deduplicated, in finding order.
        findings: the findings behind it.
        known_issues: the known-issues catalog entries that matched it (JSON shapes).
        explained_by: the hypothesis whose finding explains this one ("" when none): this line is the
            mechanism of that root cause, listed under it, never a rival suspect
            (:mod:`forensics.diff.causes`).
        explains: the hypotheses this one explains (its mechanisms).
    """

    id: str
    status: HypothesisStatus
    score: float
    severity: Severity
    summary: str
    evidence: list[str]
    findings: list[Finding] = field(default_factory=list)
    known_issues: list[dict[str, Any]] = field(default_factory=list)
    explained_by: str = ""
    explains: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return HYPOTHESES.get(self.id, "reported by a third-party probe")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "score": round(self.score, 3),
            "severity": self.severity.value,
            "summary": self.summary,
            "description": self.description,
            "evidence": list(self.evidence),
            "findings": [f.to_json() for f in self.findings],
            "known_issues": list(self.known_issues),
            "explained_by": self.explained_by or None,
            "explains": list(self.explains),
        }


@dataclass
class Analysis:
    """Everything a diff report shows. Built by :func:`analyse`; rendered by :mod:`forensics.render.report`.

    Attributes:
        verdict: the one sentence the report leads with.
        hypotheses: implicated first (highest score first), then inconclusive, then ruled-out.
        changes: every changed field.
        repos: ``code.change`` evidence per repository.
        bench: the benchmark comparison, ``None`` when neither side has results.
        machine_note: "" when both snapshots are of the same machine, else the sentence saying they are not.
        notes: problems met while judging (probe not installed, judge crashed).
    """

    before: dict[str, Any]
    after: dict[str, Any]
    verdict: str
    hypotheses: list[Hypothesis]
    changes: list[Change]
    repos: list[commits_mod.RepoChanges]
    bench: BenchEffect | None
    machine_note: str = ""
    notes: list[str] = field(default_factory=list)
    names: tuple[str, str] = ("BEFORE", "AFTER")
    parents: dict[str, Any] = field(default_factory=dict)

    @property
    def implicated(self) -> list[Hypothesis]:
        """The implicated hypotheses, highest score first."""
        return [h for h in self.hypotheses if h.status is HypothesisStatus.IMPLICATED]

    @property
    def causes(self) -> list[Hypothesis]:
        """The implicated hypotheses no other implicated one explains (root causes), highest score first."""
        ids = {h.id for h in self.implicated}
        return [h for h in self.implicated if not h.explained_by or h.explained_by not in ids]

    def mechanisms(self, h: Hypothesis) -> list[Hypothesis]:
        """The implicated hypotheses ``h`` explains, and theirs, in ledger order."""
        out: list[Hypothesis] = []
        todo = [h.id]
        while todo:
            cur = todo.pop(0)
            for x in self.implicated:
                if x.explained_by == cur and x not in out:
                    out.append(x)
                    todo.append(x.id)
        return out

    @property
    def top(self) -> Hypothesis | None:
        """The most likely cause, or ``None`` when nothing is implicated."""
        imp = self.implicated
        return imp[0] if imp else None

    def regression(self, fail_on: str) -> bool | None:
        """Does this analysis fail ``--fail-on``? ``None`` when it cannot tell (exit code 3).

        ``regression``: a benchmark result measured slower, or a hypothesis
        implicated at ``high`` severity or above. ``any``: also any implicated
        hypothesis at all. Undecidable when a benchmark comparison was
        inconclusive and nothing else met the rule.
        """
        slower = self.bench is not None and any(r.slower for r in self.bench.results)
        worst = max(
            (h.severity for h in self.implicated), default=Severity.INFO, key=lambda s: s.weight
        )
        hit = (
            slower
            or worst.weight >= Severity.HIGH.weight
            or (fail_on == "any" and bool(self.implicated))
        )
        if hit:
            return True
        undecided = self.bench is not None and any(
            r.comparison is not None and r.comparison.verdict.value == "inconclusive"
            for r in self.bench.results
        )
        return None if undecided else False

    def to_json(self) -> dict[str, Any]:
        """The stable JSON interface (DESIGN section 5): extend, never rename keys."""
        return {
            "schema": "forensics.diff/1",
            "verdict": self.verdict,
            "same_machine": not self.machine_note,
            "machine_note": self.machine_note,
            "hypotheses": [h.to_json() for h in self.hypotheses],
            "changes": [c.to_json() for c in self.changes],
            "commits": [r.to_json() for r in self.repos],
            "bench": self.bench.to_json() if self.bench else None,
            "notes": list(self.notes),
            "snapshots": {
                "before": _meta(self.before, self.names[0]),
                "after": _meta(self.after, self.names[1]),
            },
        }


def _meta(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    from forensics.snapshot import describe_import as describe

    probes = doc.get("probes") or {}
    return {
        "file": name,
        "label": doc.get("label", ""),
        "created": doc.get("created", ""),
        "source": doc.get("source", "snapshot"),
        "imported": describe(dict(doc)),
        "machine": doc.get("machine") or {},
        "tool": doc.get("tool") or {},
        "redaction": doc.get("redaction", "on"),
        "redactions": doc.get("redactions") or [],
        "probes": {
            n: {
                "status": s.get("status"),
                "reason": s.get("reason", ""),
                "duration_s": s.get("duration_s"),
            }
            for n, s in probes.items()
        },
    }


@functools.lru_cache(maxsize=None)
def _probe(name: str) -> Probe | None:
    """The registered probe ``name`` (judges are pure, so one instance per process serves every diff)."""
    return find_probe_class(name)


def score(findings: list[Finding], multiplier: float = 1.0, hyp: str = "") -> float:
    """Ranking score of a hypothesis from its implicating findings alone (no benchmark, no rules).

    ``prior(hyp) x strength(findings) x multiplier`` (:mod:`forensics.diff.evidence`);
    :func:`analyse` applies the evidence rules on top.
    """
    return ev_table.prior(hyp) * ev_table.strength(findings) * multiplier


def machine_note(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """ "" when both snapshots name the same machine, else a sentence saying they differ or cannot be matched.

    The machine id hash decides when both sides have one. Without it (containers, VMs without
    /etc/machine-id) the hostname and, where both record it, the hardware fingerprint must match;
    when only one side has a machine id, a shared generic hostname ("vm", "localhost") proves
    nothing, so the note says it cannot tell.
    """
    mb, ma = before.get("machine") or {}, after.get("machine") or {}
    imported = [side for side, m in (("BEFORE", mb), ("AFTER", ma)) if m.get("imported")]
    if imported:
        return (
            f"{' and '.join(imported)} {'was' if len(imported) == 1 else 'were'} imported from a pasted text, which "
            "names no machine: differences may be the machines', and what the text does not hold is not "
            "compared (those hypotheses are inconclusive)."
        )
    hb, ha = mb.get("hostname", "?"), ma.get("hostname", "?")
    if mb.get("machine_id") and ma.get("machine_id"):
        same = mb["machine_id"] == ma["machine_id"]
    elif bool(mb.get("machine_id")) != bool(ma.get("machine_id")) and hb == ha:
        which = "AFTER" if ma.get("machine_id") else "BEFORE"
        return (
            f"Cannot tell whether BEFORE and AFTER were taken on the same machine: only {which} records a "
            f"machine id, and a shared hostname ({hb!r}) proves nothing; differences may be the machines'."
        )
    else:
        same = hb == ha
        if same and mb.get("hardware") and ma.get("hardware") and mb["hardware"] != ma["hardware"]:
            return (
                f"BEFORE and AFTER were taken on different hardware ({mb['hardware']} and {ma['hardware']}, "
                f"both named {hb!r}): differences may be the machines', not a change on one machine."
            )
    if same:
        return ""
    return (
        f"BEFORE and AFTER were taken on different machines ({hb} and {ha}): differences may be the "
        "machines', not a change on one machine."
    )


def _judge_all(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    probes: dict[str, Probe | None],
    notes: list[str],
    one_sided: list[str],
) -> list[Finding]:
    """Every probe's findings; ``one_sided`` gets "name (no data in AFTER)" for probes usable on one side only.

    A probe's judge runs when at least one side has data. The hypotheses a probe
    declares (:attr:`forensics.probe.Probe.hypotheses`) that it could not decide
    because a side has no data become inconclusive here, once, for every probe.
    """
    pb, pa = before.get("probes") or {}, after.get("probes") or {}
    jctx = JudgeContext(dict(before), dict(after))
    out: list[Finding] = []
    for name, probe in probes.items():
        sb = ProbeResult.from_json(pb[name]) if name in pb else None
        sa = ProbeResult.from_json(pa[name]) if name in pa else None
        usable = [s for s in (sb, sa) if s is not None and s.usable]
        if len(usable) == 1:
            one_sided.append(f"{name} (no data in {'AFTER' if usable[0] is sb else 'BEFORE'})")
        if probe is None:
            notes.append(
                f"probe {name!r} is not installed here: its changes are listed but not judged"
            )
            continue
        found: list[Finding] = []
        if usable:
            try:
                found = list(probe.judge(sb, sa, jctx))
            except (
                Exception
            ) as exc:  # a third-party judge may break; its hypotheses end inconclusive
                why = f" ({type(exc).__name__}: {exc})" if os.environ.get("FORENSICS_DEBUG") else ""
                notes.append(
                    f"probe {name!r} could not judge these snapshots (a fault in the probe, or data it "
                    f"does not expect); its hypotheses are inconclusive; FORENSICS_DEBUG=1 shows the "
                    f"error{why}"
                )
                found = [
                    inconclusive(h, f"probe {name!r} could not judge these snapshots")
                    for h in probe.hypotheses
                ]
        for f in found:
            f.probe = f.probe or name
        found = _unless_malformed(name, found, before, after)
        if len(usable) < 2:
            # "ruled out" means "did not change": with a side missing nobody can say that. A one-sided
            # problem (an implicated finding) still stands.
            found = [f for f in found if f.status is not HypothesisStatus.RULED_OUT]
            found = _no_data(name, probe, sb, sa, found) + found  # the plainer reason first
        out.extend(found)
    return out


def _unless_malformed(
    name: str, found: list[Finding], before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[Finding]:
    """``found`` with each finding that rests on a malformed value made inconclusive.

    The loader (:func:`forensics.snapshot.check_field_types`) replaced impossible readings (NaN, a
    negative power) by missing values and listed them under :data:`forensics.fieldtypes.MALFORMED`.
    A finding whose ``fields`` cover one of them (or that names no fields) neither implicates nor
    rules out on it.
    """
    bad = [
        (side, tuple(trail))
        for side, doc in (("BEFORE", before), ("AFTER", after))
        for trail in ((doc.get(MALFORMED) or {}).get(name) or [])
    ]
    if not bad:
        return found

    def covers(pattern: str, trail: tuple) -> bool:
        parts = pattern.split(".")
        return len(parts) <= len(trail) and all(p in ("*", t) for p, t in zip(parts, trail))

    out = []
    for f in found:
        hit = [
            (side, trail)
            for side, trail in bad
            if not f.fields or any(covers(p, trail) for p in f.fields)
        ]
        if hit and f.status is not HypothesisStatus.INCONCLUSIVE:
            where = "; ".join(f"{side} {'.'.join(trail)}" for side, trail in hit[:3])
            g = inconclusive(
                f.hypothesis, f"malformed value ({where}); cannot compare", [f.summary]
            )
            g.probe, g.fields = f.probe, f.fields
            f = g
        out.append(f)
    return out


def _why(sec: ProbeResult | None) -> str:
    return (
        "probe absent"
        if sec is None
        else f"{sec.status.value}{': ' + sec.reason if sec.reason else ''}"
    )


def _no_data(
    name: str, probe: Probe, sb: ProbeResult | None, sa: ProbeResult | None, found: list[Finding]
) -> list[Finding]:
    """Inconclusive findings for the hypotheses ``probe`` declares and could not decide for lack of data."""
    decided = {f.hypothesis for f in found if f.status is not HypothesisStatus.INCONCLUSIVE}
    missing = [
        (side, sec)
        for side, sec in (("BEFORE", sb), ("AFTER", sa))
        if sec is None or not sec.usable
    ]
    where = " or ".join(f"{side} ({_why(sec)})" for side, sec in missing)
    out = []
    for hyp in sorted(set(probe.hypotheses) - decided):
        f = inconclusive(hyp, f"probe {name!r} has no data in {where}; cannot compare")
        f.probe = name
        out.append(f)
    return out


def _build(
    hyp: str, findings: list[Finding], scored: ev_table.Scored | float = 1.0, present: str = ""
) -> Hypothesis:
    """One ledger line from a hypothesis's findings; ``scored`` is its evidence score (a bare multiplier scores
    the findings alone, without the evidence rules)."""
    if not isinstance(scored, ev_table.Scored):
        scored = ev_table.Scored(score(findings, float(scored), hyp), [], {})
    strong = [
        f for f in findings if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0
    ]
    ruled = [f for f in findings if f.status is HypothesisStatus.RULED_OUT]
    weak = [
        f for f in findings if f.status is HypothesisStatus.IMPLICATED and f.severity.weight == 0
    ]
    undecided = [f for f in findings if f.status is HypothesisStatus.INCONCLUSIVE]
    if strong:
        strong.sort(key=lambda f: (-f.severity.weight, -f.relevance))
        status, lead = HypothesisStatus.IMPLICATED, strong[0]
        ordered = strong + weak + ruled + undecided
    elif ruled or weak:
        # checked: clean, or changed only in ways the judge rates info (not a cause);
        # parts that could not be checked stay in the evidence, marked as such
        status, lead = HypothesisStatus.RULED_OUT, (ruled or weak)[0]
        ordered = ruled + weak + undecided
    elif undecided:
        status, lead, ordered = HypothesisStatus.INCONCLUSIVE, undecided[0], undecided
    else:
        return Hypothesis(
            hyp,
            HypothesisStatus.INCONCLUSIVE,
            0.0,
            Severity.INFO,
            f"not checked: none of the probes in these snapshots ({present or 'none'}) reported on it",
            [],
            [],
        )
    evidence: list[str] = []
    seen: set[str] = set()  # a set: 20,000 changed packages must not cost 20,000**2 comparisons
    for f in ordered:
        head = f.summary
        if (
            f.status is HypothesisStatus.INCONCLUSIVE
            and status is not HypothesisStatus.INCONCLUSIVE
        ):
            head = f"not checked: {f.summary}"
        for line in [head] + list(f.evidence):
            if line and line not in seen:
                seen.add(line)
                evidence.append(line)
    sev = lead.severity if status is HypothesisStatus.IMPLICATED else Severity.INFO
    sc = scored.score if status is HypothesisStatus.IMPLICATED else 0.0
    if status is HypothesisStatus.IMPLICATED:
        for line in scored.lines:
            if line not in evidence:
                evidence.append(line)
    return Hypothesis(hyp, status, sc, sev, lead.summary, evidence, ordered)


def analyse(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    repo: Path | None = None,
    config: Path | None = None,
    names: tuple[str, str] = ("BEFORE", "AFTER"),
    redact: bool = True,
) -> Analysis:
    """Diff, judge and rank two loaded snapshots.

    Args:
        before, after: validated snapshots (:func:`forensics.snapshot.load`).
        repo: ``--repo``, a clone to read commits from (see :func:`forensics.diff.commits.analyse`).
        config: ``--config``, extra hot-path patterns.
        names: how the report names the two inputs (their file names).
        redact: sweep the finished analysis for secrets (``diff --no-redact``: False).

    Returns:
        an :class:`Analysis`. Pure apart from read-only git commands. It is the
        one object every output (terminal, HTML, Markdown, JSON) is rendered
        from, so with ``redact`` the whole of it -- commit subjects and bodies
        read from the repository, reflog texts, evidence, changes -- passes
        :meth:`forensics.redact.Redactor.sweep` here, once.

    Raises:
        BadInputError: ``repo`` is not a folder or a config file is invalid.
    """
    names_all = list(before.get("probes") or {}) + [
        n for n in (after.get("probes") or {}) if n not in (before.get("probes") or {})
    ]
    probes = {n: _probe(n) for n in names_all}
    specs = {n: dict(p.fields) for n, p in probes.items() if p is not None and p.fields}
    changes = diff_snapshots(before, after, specs)
    notes: list[str] = [
        f"{side}: {note}"
        for side, doc in (("BEFORE", before), ("AFTER", after))
        for note in doc.get(docfile.LOAD_NOTES) or []
    ]
    one_sided: list[str] = []
    findings = _judge_all(before, after, probes, notes, one_sided)
    try:
        repos = commits_mod.analyse(before, after, repo=repo, config=config)
    except BadInputError:
        raise
    except (
        TypeError,
        AttributeError,
        KeyError,
        ValueError,
    ) as exc:  # malformed git data in a snapshot
        repos = []
        notes.append(
            f"the git probe's data could not be read for the commit list ({type(exc).__name__}: {exc}); "
            "code.change rests on the git probe's own judgement"
        )
    if repo is not None and not repos:
        notes.append(
            f"--repo {repo}: the snapshots name no repository on both sides (git probe absent or "
            "unavailable), so there are no two HEADs to list commits between"
        )
    for line in (x for rc in repos for x in rc.skipped_patterns):
        if line not in notes:  # a --config pattern is skipped once per repository: say it once
            notes.append(line)
    findings = commits_mod.attach_evidence(findings, repos)
    findings.extend(layers_mod.library_findings(before, after))
    bench = compare_bench(before, after)
    by_hyp: dict[str, list[Finding]] = {h: [] for h in HYPOTHESES}
    for f in findings:
        by_hyp.setdefault(f.hypothesis, []).append(f)
    env_dirty = any(
        f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0 and f.hypothesis != CODE
        for f in findings
    )
    if bench is not None and bench.pointer is Pointer.CODE and not env_dirty:
        code = [
            f
            for f in by_hyp[CODE]
            if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0
        ]
        unread = [
            f
            for f in by_hyp[CODE]
            if f.status is HypothesisStatus.INCONCLUSIVE and "head.sha" in f.fields
        ]
        if not code and unread and not bench.small:
            # a pull whose commits this machine cannot read is the code change the measurement points at
            unread[0].status, unread[0].severity = HypothesisStatus.IMPLICATED, Severity.HIGH
            unread[0].relevance = 0.8
            code = [unread[0]]
        if code:  # the code change is named already: the measurement supports it
            code[0].evidence.insert(0, f"measured: {bench.sentence}")
            code[0].relevance = max(code[0].relevance, 0.9)
        elif bench.small:
            f = implicated(
                CODE,
                Severity.LOW,
                "a small real change: the user's step is slightly slower while the "
                "canary and the environment did not change",
                [bench.sentence],
                relevance=0.6,
            )
            f.probe = "bench"
            by_hyp[CODE].append(f)
        else:
            f = implicated(
                CODE,
                Severity.HIGH,
                "the user's step slowed down while the canary and the environment "
                "did not change: the cause is in the code",
                [bench.sentence],
                relevance=0.8,
            )
            f.probe = "bench"
            by_hyp[CODE].append(f)
    strong = {
        h: [f for f in fs if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0]
        for h, fs in by_hyp.items()
    }
    for h, lines in layers_mod.brought_by_torch(before, after).items():
        if strong.get(h):
            lead = max(strong[h], key=lambda f: (f.severity.weight, f.relevance))
            lead.evidence = lines + [x for x in lead.evidence if x not in lines]
    facts = ev_table.Facts(bench, {h: fs for h, fs in strong.items() if fs}, findings)
    matches = known_mod.match(before, after, set(facts.implicated), bench)
    facts.known = {m.hypothesis: [] for m in matches}
    for m in matches:
        facts.known[m.hypothesis].append(m.entry["id"])
    present = ", ".join(_probe_state(n, before, after) for n in names_all)
    hyps = []
    for h, fs in by_hyp.items():
        mine = [m for m in matches if m.hypothesis == h]
        # several entries for one change: the strongest counts once (they describe one cause), every link is shown
        factor = max((m.factor for m in mine), key=lambda x: abs(x - 1), default=1.0)
        hyp = _build(h, fs, ev_table.score(h, fs, facts, factor, [m.line() for m in mine]), present)
        hyp.known_issues = [m.to_json() for m in mine]
        hyps.append(hyp)
    order = {
        HypothesisStatus.IMPLICATED: 0,
        HypothesisStatus.INCONCLUSIVE: 1,
        HypothesisStatus.RULED_OUT: 2,
    }
    hyps.sort(key=lambda h: (order[h.status], -h.score))
    parent = causes_mod.link(
        hyps, causes_mod.all_links(p for p in probes.values() if p is not None)
    )
    hyps = causes_mod.order(hyps)
    result = Analysis(
        before, after, "", hyps, changes, repos, bench, machine_note(before, after), notes, names
    )
    result.parents = parent
    result.verdict = _verdict(result) + (
        f" Not compared, their hypotheses inconclusive: {', '.join(sorted(one_sided))}."
        if one_sided
        else ""
    )
    return Redactor(enabled=redact).sweep(result)


def _probe_state(name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``gpu`` or ``gpu unavailable on both sides: no NVIDIA driver found`` (for "not checked" lines)."""
    secs = [(doc.get("probes") or {}).get(name) or {} for doc in (before, after)]
    statuses = {s.get("status", "absent") for s in secs}
    if statuses <= {"ok", "partial"}:
        return name
    reason = next((s.get("reason") for s in secs if s.get("reason")), "")
    state = "/".join(sorted(statuses))
    return f"{name} {state}{': ' + reason if reason else ''}"


def _measured(a: Analysis) -> str:
    """The verdict's lead-in about the benchmark ("" when there is none or it could not decide)."""
    b = a.bench
    if b is None:
        return ""
    if b.pointer is not Pointer.NONE:
        if b.small:
            moved = [r for r in b.results if r.moved]
            worst = max(
                [r for r in moved if r.kind != "component"] or moved,
                key=lambda r: r.comparison.time_ratio,
            )  # type: ignore[union-attr]
            c = worst.comparison
            return (
                f"measured a small real change: {worst.name} {c.time_ratio:.3f}x slower "  # type: ignore[union-attr]
                f"(95% CI {c.ci_low:.3f}-{c.ci_high:.3f}, below the {c.threshold:.0%} threshold); "
            )  # type: ignore[union-attr]
        return f"measured {b.ratio:.2f}x slower; "
    return ""


def _faster(a: Analysis) -> str:
    """The verdict's lead-in when the benchmark measured a speed-up and no slowdown ("" otherwise)."""
    b = a.bench
    if (
        b is None
        or b.pointer is not Pointer.NONE
        or "faster:" not in b.sentence
        or not b.sentence.startswith("no result")
    ):
        return ""
    ratios = [
        r.comparison.time_ratio
        for r in b.results
        if r.kind != "component" and r.comparison is not None and r.comparison.time_ratio > 0
    ]
    return (
        f"measured {1 / min(ratios):.2f}x faster, no slowdown to explain; "
        if ratios and min(ratios) < 1
        else ""
    )


NOT_MEASURED = "no slowdown was measured (no benchmark in either snapshot)"


def _verdict(a: Analysis) -> str:
    imp = a.implicated
    if (
        a.bench is None
    ):  # nothing was timed: say what changed, never "most likely cause" of a slowdown nobody saw
        ruled = sum(h.status is HypothesisStatus.RULED_OUT for h in a.hypotheses)
        unknown = sum(h.status is HypothesisStatus.INCONCLUSIVE for h in a.hypotheses)
        if imp:
            roots = a.causes
            also = (
                f"; also changed: {', '.join(h.id for h in roots[1:4])}" if len(roots) > 1 else ""
            )
            return (
                f"Things changed, but {NOT_MEASURED}; the change likeliest to matter: "
                f"{causes_mod.chain_sentence(roots[0], a.hypotheses, a.parents)}{also}."
            )
        return (
            f"Nothing implicated, and {NOT_MEASURED}: {plural(ruled, 'hypothesis', 'hypotheses')} ruled out, "
            f"{unknown} inconclusive."
        )
    slow = _measured(a)
    if imp:
        roots = a.causes
        top = roots[0]
        also = f"; also implicated: {', '.join(h.id for h in roots[1:4])}" if len(roots) > 1 else ""
        flat = ""
        if (
            not slow
            and a.bench is not None
            and a.bench.sentence.startswith("no benchmark result moved")
        ):
            flat = (
                " The benchmarks measured no slowdown (exact: each process gave one value)."
                if "exact" in a.bench.sentence
                else " The benchmarks measured no slowdown beyond the noise."
            )
        faster = "" if slow else _faster(a)
        lead = f"{faster}what changed: " if faster else f"{slow}most likely cause: "
        if faster:
            also, flat = also.replace("also implicated", "also changed"), ""
        text = (
            f"{lead}{causes_mod.chain_sentence(top, a.hypotheses, a.parents, a.bench)}{also}.{flat}"
        )
        return text[0].upper() + text[1:]
    ruled = sum(h.status is HypothesisStatus.RULED_OUT for h in a.hypotheses)
    unknown = sum(h.status is HypothesisStatus.INCONCLUSIVE for h in a.hypotheses)
    if slow:
        text = (
            f"{slow.rstrip('; ')}, but no checked hypothesis explains it "
            f"({ruled} ruled out, {unknown} inconclusive); see the inconclusive ones."
        )
        return text[0].upper() + text[1:]
    return (
        f"No significant change: {plural(ruled, 'hypothesis', 'hypotheses')} ruled out, {unknown} "
        "inconclusive, nothing implicated."
    )
