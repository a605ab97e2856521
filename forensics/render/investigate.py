"""The report of ``forensics investigate``: HTML, Markdown and JSON from one :class:`Investigation`.

Order: the verdict first ("Confirmed by experiment: ..." / "Most likely, not
confirmed: ..."), then each experiment with its A/B numbers, the CI of the
ratio and the share of the slowdown recovered, then the ledger and the
evidence: the ``forensics diff`` report of the same two snapshots
(:mod:`forensics.render.report`), embedded as it is.

- JSON: the diff's keys (:meth:`forensics.diff.ledger.Analysis.to_json`) with
  ``verdict`` now the investigation's (the diff's sentence is kept as
  ``diff_verdict``), plus ``experiments``, ``regression``, ``rule``, ``timings``
  and, without a baseline, ``hardware``.
- HTML: self-contained, Jinja2 autoescape on (``investigate.html.j2``).
- Markdown: ``investigate.md.j2``.

Everything passes through :class:`forensics.redact.Redactor` (step commands
may carry a token).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.investigate.decide import DEFAULT_MIN_SHARE
from forensics.render import templating
from forensics.render.report import format_from_name


def rule(inv) -> dict[str, Any]:
    """The decision rule with this run's settings, as the report states it."""
    s = inv.settings
    return {
        "confirmed": (
            f"B significantly faster than A (Mann-Whitney U on per-process medians, p <= 0.01; bootstrap "
            f"95% CI of the ratio excludes 1; beyond the {s.threshold:.0%} threshold and twice the A/A "
            f"noise floor; IQR/median <= 10%) and the lower end of the 95% CI of the share of the "
            f"slowdown recovered >= {s.min_share:.0%}"
        ),
        "partial": f"B significantly faster, but the share's upper end below {s.min_share:.0%}",
        "refuted": (
            f"no change: the whole CI of the ratio within +-{s.threshold:.0%} (and the share's upper end "
            f"below {s.min_share:.0%}), or B slower"
        ),
        "inconclusive": "anything else; the reason says what would decide it",
        "share": "(today - intervention) / (today - baseline) on the medians; baseline = the baseline "
        "snapshot's measurement of the same result; 95% CI by bootstrap over processes",
        "threshold": s.threshold,
        "min_share": s.min_share,
        "processes_per_side": s.processes,
        "default_min_share": DEFAULT_MIN_SHARE,
    }


def to_json(inv) -> dict[str, Any]:
    """The JSON report (see the module docstring), redacted."""
    from forensics.redact import Redactor

    if inv.analysis is not None:
        doc = inv.analysis.to_json()
    else:
        doc = {
            "verdict": "",
            "hypotheses": [],
            "changes": [],
            "commits": [],
            "bench": None,
            "notes": [],
            "snapshots": {
                "now": {"label": inv.now.get("label", ""), "created": inv.now.get("created", "")}
            },
        }
    doc["diff_verdict"] = doc.get("verdict", "")
    doc["schema"] = "forensics.investigate/1"
    doc["verdict"] = inv.verdict
    doc["exit_code"] = inv.exit_code
    doc["regression"] = {
        "status": inv.regression.value,
        "sentence": inv.regression_sentence,
        "subject": inv.subject.name if inv.subject else None,
        "subject_kind": inv.subject.kind if inv.subject else None,
        "step": inv.subject.cmd if inv.subject and inv.subject.kind == "cmd" else None,
    }
    doc["baseline_source"] = getattr(inv, "baseline_source", "")
    residual = getattr(inv, "residual", None)
    doc["residual"] = residual.to_json() if residual is not None else None
    doc["stopped"] = getattr(inv, "stopped", "")
    from forensics.investigate.run import accounting

    doc["accounting"] = accounting(inv)
    doc["experiments"] = [e.to_json() for e in inv.experiments]
    doc["confirmed"] = [e.id for e in inv.confirmed]
    doc["rule"] = rule(inv)
    doc["plan_only"] = inv.settings.plan_only
    doc["budget_s"] = inv.settings.budget_s
    doc["timings"] = {k: round(v, 2) for k, v in inv.timings.items()}
    doc["interrupted"] = inv.interrupted
    doc["notes"] = list(inv.notes) + list(doc.get("notes") or [])
    doc["hardware"] = inv.hardware
    doc["tool"] = {"name": "forensics", "version": __version__}
    red = Redactor()
    out = red.sweep(doc)
    out["redactions"] = [r.to_json() for r in red.records]
    return out


def _diff_parts(inv, fmt: str) -> tuple[str, str]:
    """(style, body) of the ``forensics diff`` report of the same snapshots, to embed; ("", "") without a baseline."""
    if inv.analysis is None:
        return "", ""
    from forensics.render import report as diff_report

    text = diff_report.render(inv.analysis, fmt)
    if fmt == "md":
        lines = text.splitlines()
        body = "\n".join(("#" + ln) if ln.startswith("#") else ln for ln in lines)  # one level down
        return "", body
    style = text[text.find("<style>") + 7 : text.find("</style>")] if "<style>" in text else ""
    body = text[text.find("<main>") + 6 : text.rfind("</main>")] if "<main>" in text else ""
    body = body.replace("<h1>", '<h2 class="ledger-title">', 1).replace("</h1>", "</h2>", 1)
    return style, body


def render(inv, fmt: str) -> str:
    """The report text in ``fmt`` (``html``, ``md`` or ``json``)."""
    data = to_json(inv)
    if fmt == "json":
        from forensics.docfile import finite_json

        return (
            json.dumps(
                finite_json(data), indent=1, ensure_ascii=False, default=str, allow_nan=False
            )
            + "\n"
        )
    from markupsafe import Markup

    style, body = _diff_parts(inv, fmt)
    name = "investigate.html.j2" if fmt == "html" else "investigate.md.j2"
    return templating.render(
        name, r=data, diff_style=Markup(style), diff_body=Markup(body) if fmt == "html" else body
    )


def write_report(inv, path: Path) -> None:
    """Render in the format named by ``path``'s suffix and write it atomically.

    Raises:
        BadInputError: unknown suffix, or the folder is missing or not writable.
    """
    from forensics.docfile import write_atomic

    write_atomic(Path(path), render(inv, format_from_name(path)))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def print_investigation(c, inv, outputs: list[Path], safe) -> None:
    """The terminal summary of an investigation on the rich console ``c``: where the baseline came from,
    the verdict, the notes, the experiments table (ratio B/A and share of the slowdown recovered, each with
    its 95% CI), what was not run and how to run it, the shares and the residual, the hardware checks,
    the timings, the files written.

    ``safe`` replaces secrets in a line (the CLI's ``forensics.cli.common.safe``: step commands
    may carry a token).
    """
    from rich.markup import escape

    c.soft_wrap = True
    if inv.baseline_source:
        c.print(escape(safe(inv.baseline_source)))
    # the answer, before the notes that qualify it
    c.print(f"[bold]{escape(safe(inv.verdict))}[/bold]")
    for note in inv.notes:
        c.print(f"note: {escape(safe(note))}")
    if inv.experiments:
        c.print(
            "[bold]experiments[/bold] (A = today, B = the intervention; time ratio B/A with its 95% CI, below 1: B "
            "faster; share of the "
            "slowdown recovered with its 95% CI):"
        )
        width = max([11] + [len(e.id) for e in inv.experiments])  # a re-test's id: env-1-on-top
        for e in inv.experiments:
            cmp, sh = e.comparison, e.share
            bits = [f"{e.id:<{width}}", f"{e.outcome.value:<13}", e.hypothesis]
            if cmp:
                bits.append(
                    f"{cmp.a.median:.4g} -> {cmp.b.median:.4g}, ratio {cmp.time_ratio:.3f} "
                    f"({cmp.ci_low:.3f}-{cmp.ci_high:.3f})"
                )
            if sh and sh.point is not None:
                bits.append(
                    f"share {sh.point:.0%}"
                    + (f" ({sh.low:.0%}..{sh.high:.0%})" if sh.low is not None else "")
                )
            bits.append(
                f"est. {e.estimate_s:.0f} s"
                + (f", took {e.elapsed_s:.0f} s" if e.elapsed_s else "")
            )
            c.print(escape(safe("  ".join(bits))), soft_wrap=True)
        for e in inv.experiments:
            if e.outcome.value in ("not-run", "inconclusive", "partial", "planned"):
                text = e.reason if e.outcome.value != "planned" else e.title
                c.print(f"  {escape(e.id)}: {escape(safe(text))}")
                if e.outcome.value in ("not-run", "inconclusive", "planned") and e.command:
                    c.print(f"    to run it: {escape(safe(e.command))}", soft_wrap=True)
    if inv.residual is not None:
        from forensics.investigate.run import accounting

        c.print(escape(safe(f"shares of the slowdown: {accounting(inv)}")))
        c.print(escape(safe(f"  residual: {inv.residual.sentence()}")))
    for check in inv.hardware:
        mark = {"ok": "ok", "below": "BELOW", "unknown": "?"}[check["status"]]
        c.print(
            f"  [{mark}] {escape(check['check'])}: {escape(str(check['measured']))} {escape(check['unit'])} "
            f"(expected {escape(check['expected'])})"
        )
    t = inv.timings
    if t:
        c.print(
            f"took {t.get('total_s', 0):.0f} s: snapshot {t.get('snapshot_s', 0):.0f} s, experiments "
            f"{t.get('experiments_s', 0):.0f} s"
        )
    for out in outputs:
        c.print(f"wrote [bold]{escape(str(out))}[/bold]")
