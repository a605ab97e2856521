"""Two documents in, one :class:`~forensics.diff.ledger.Analysis` out: what ``diff`` and ``investigate`` share.

Each side is a snapshot file, a text pasted from a ticket (imported on the fly by
:func:`forensics.importers.load`), or a snapshot already loaded (``investigate``'s snapshot
taken now). A side read from a file is swept for secrets again
(:func:`forensics.snapshot.redact_loaded`) so that a ``--no-redact`` snapshot compares like
with like, and the analysis says so in a note.

:func:`load_side` reads every side of every comparison: ``diff`` and ``investigate`` through
:func:`analyse_files`, and ``forensics.fleet.compare`` for a plain snapshot compared with a fleet
(a fleet of one node). Two fleets are analysed by ``forensics.fleet.compare.compare_files``: a fleet
of N nodes is not a snapshot, and its analysis (fleet-wide against few-node changes) is its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from forensics import snapshot as snap
from forensics.diff.ledger import Analysis, analyse

Source = Union[Path, str, dict]
"""A side: the path of a snapshot or pasted text, or a snapshot dict already loaded."""


@dataclass
class Side:
    """One side as it goes into the analysis.

    Attributes:
        doc: the snapshot (swept again when read with ``redact``).
        name: how the report names it (the file name as given, or the caller's name).
        taken_unredacted: the file says it was taken with ``--no-redact`` (``redaction`` is not ``"on"``).
        newly_redacted: how many values the sweep replaced (0 without it).
    """

    doc: dict[str, Any]
    name: str
    taken_unredacted: bool = False
    newly_redacted: int = 0


def load_side(
    source: Source, *, redact: bool = True, name: str | None = None, texts: bool = True
) -> Side:
    """Read one side: a snapshot file or pasted text (:func:`forensics.importers.load`), or a loaded dict.

    With ``redact``, the document is swept again (:func:`forensics.snapshot.redact_loaded`), a
    dict too (a sweep of a swept document replaces nothing). With ``texts=False`` a file must be a
    snapshot (:func:`forensics.snapshot.load`): a pasted text is refused, not imported.

    Raises:
        forensics.errors.BadInputError: a missing, empty, damaged or foreign file (one line naming it).
    """
    if isinstance(source, dict):
        doc, shown = source, name or "now"
    elif not texts:
        doc, shown = snap.load(source), name or str(source)
    else:
        from forensics.importers import load as load_any

        doc, shown = load_any(source), name or str(source)
    side = Side(doc, shown, taken_unredacted=doc.get("redaction", "on") != "on")
    if redact:
        side.doc, side.newly_redacted = snap.redact_loaded(doc)
    return side


def analyse_files(
    before: Source | Side,
    after: Source | Side,
    *,
    repo: Path | None = None,
    config: Path | None = None,
    redact: bool = True,
) -> Analysis:
    """Load both sides (:func:`load_side`), sweep them again, diff, judge and rank them.

    Args:
        before, after: paths (snapshots or pasted texts), loaded dicts, or :class:`Side` s already read.
        repo: a clone to read the commits between the two HEADs from (:func:`forensics.diff.ledger.analyse`).
        config: a YAML file of extra hot-path patterns.
        redact: sweep both sides and the finished analysis for secrets (False keeps them as they are).

    Returns:
        the :class:`Analysis`; when a side read from a file was taken with ``--no-redact`` and swept
        here, its first note says how many values were redacted for the report.

    Raises:
        forensics.errors.BadInputError: a side cannot be read, ``repo`` is not a folder, ``config`` is invalid.
    """
    b = before if isinstance(before, Side) else load_side(before, redact=redact, name=None)
    a = after if isinstance(after, Side) else load_side(after, redact=redact, name=None)
    analysis = analyse(
        b.doc, a.doc, repo=repo, config=config, names=(b.name, a.name), redact=redact
    )
    unredacted = [label for label, s in (("BEFORE", b), ("AFTER", a)) if s.taken_unredacted]
    if unredacted and redact:
        analysis.notes.insert(
            0,
            f"{' and '.join(unredacted)} {'was' if len(unredacted) == 1 else 'were'} taken "
            f"with --no-redact; {b.newly_redacted + a.newly_redacted} value(s) were redacted for "
            "this report so that both sides compare like with like (diff --no-redact keeps them)",
        )
    return analysis
