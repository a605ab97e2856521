"""Plain terminal output without rich: ANSI styles, the terminal's width, a fixed-width table.

``forensics snapshot`` prints its summary table after every run. Importing rich and laying the
table out with it took twenty times the CPU of drawing it here with ``str`` methods alone, and more
where no ``.pyc`` files are kept (docs/benchmarks.md has the figures). The
table looks as rich draws it by default: a heavy-head box, one space of padding, the columns as
wide as their widest cell, the folding columns wrapped at word boundaries when the table would
be wider than the terminal (and, on a terminal too narrow for that, the other columns wrapped too).

The rules rich follows are kept: colour only on a terminal (``isatty``), never with ``NO_COLOR``
set or ``TERM=dumb``, always with ``FORCE_COLOR`` set; the width from ``COLUMNS``, else the
terminal's size, else 80 columns. Text from snapshots is passed through
:func:`forensics.render.terminal.clean` by the callers (no escape sequence of another machine's
reaches the terminal).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, Sequence

_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33"}
DEFAULT_WIDTH = 80


def use_color(stream: IO[str]) -> bool:
    """Whether to write ANSI colours to ``stream``: ``NO_COLOR`` and ``TERM=dumb``/``unknown`` say no,
    ``FORCE_COLOR`` says yes, otherwise only when ``stream`` is a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def terminal_width(stream: IO[str]) -> int:
    """Columns to fit the output in: ``COLUMNS`` when it is a positive number, else the size of the
    terminal ``stream`` is (``os.get_terminal_size``), else :data:`DEFAULT_WIDTH`."""
    value = os.environ.get("COLUMNS", "")
    if value.strip().isdigit() and int(value) > 0:
        return int(value)
    try:
        return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):  # not a terminal, no file descriptor
        return DEFAULT_WIDTH


def cell_len(text: str) -> int:
    """Columns ``text`` takes on a terminal: East Asian wide and full-width characters take two."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(0 if combining(ch) else 2 if east_asian_width(ch) in "WF" else 1 for ch in text)


def wrap(text: str, width: int) -> list[str]:
    """``text`` cut into lines of at most ``width`` columns: at spaces where it can be, inside a word
    longer than the line where it must be (rich's ``overflow="fold"``); line breaks are kept."""
    width = max(1, width)
    out: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            candidate = f"{line} {word}" if line else word
            if cell_len(candidate) <= width:
                line = candidate
                continue
            if line:
                out.append(line)
            while cell_len(word) > width:
                cut = width
                while cut > 1 and cell_len(word[:cut]) > width:
                    cut -= 1
                out.append(word[:cut])
                word = word[cut:]
            line = word
        out.append(line)
    return out


class Printer:
    """Lines written to a stream (default ``sys.stdout``), with styles when it takes colours.

    Attributes:
        stream: where lines go.
        color: whether :meth:`style` writes ANSI codes (:func:`use_color`).
        width: the columns :func:`terminal_width` gives.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.color = use_color(self.stream)
        self.width = terminal_width(self.stream)

    def style(self, text: str, style: str = "") -> str:
        """``text`` in ``style`` (space-separated names of :data:`_SGR`: ``"bold red"``); plain without colours."""
        codes = [_SGR[s] for s in style.split() if s in _SGR]
        if not self.color or not codes or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def line(self, text: str = "") -> None:
        """Write ``text`` and a line break."""
        self.stream.write(text + "\n")

    def flush(self) -> None:
        """Flush the stream (a closed pipe raises ``BrokenPipeError`` here, for the caller's boundary)."""
        self.stream.flush()


@dataclass
class Column:
    """One table column: its header, ``right`` alignment, and whether long cells ``fold`` onto more lines."""

    header: str
    right: bool = False
    fold: bool = False


def table(
    printer: Printer, columns: Sequence[Column], rows: Sequence[Sequence[tuple[str, str]]]
) -> list[str]:
    """The lines of a boxed table fitting ``printer.width`` (folding columns wrapped to fit).

    Args:
        printer: gives the width and the styles.
        columns: the columns, left to right.
        rows: each row a ``(text, style)`` per column (``style`` as in :meth:`Printer.style`, ``""`` none).

    Returns:
        the lines, without line breaks: a heavy top and header rule, one line per wrapped cell line,
        a light bottom rule. Where the folding columns cannot give enough (down to 8 columns or their
        header), the other columns give way too, wrapped, down to their header's width; a table that
        still cannot fit is wider.
    """
    rows = [[(text.expandtabs(8), style) for text, style in row] for row in rows]  # rich's tab size
    widths = [
        max(
            [cell_len(c.header)]
            + [cell_len(line) for row in rows for line in row[i][0].split("\n")]
        )
        for i, c in enumerate(columns)
    ]
    over = sum(w + 3 for w in widths) + 1 - printer.width
    for i in reversed(range(len(columns))):  # shrink folding columns, the last first
        if over <= 0:
            break
        if columns[i].fold:
            cut = min(over, widths[i] - max(8, cell_len(columns[i].header)))
            if cut > 0:
                widths[i] -= cut
                over -= cut
    fold = [c.fold for c in columns]
    floor = [cell_len(c.header) for c in columns]
    while (
        over > 0
    ):  # a 40-column terminal: the other columns give way, the one with most to spare first, then all
        i = max(
            range(len(columns)),
            key=lambda k: (widths[k] > floor[k] and not columns[k].fold, widths[k] - floor[k], k),
        )
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
        over -= 1
        fold[i] = True  # cut below its widest cell: wrapped like a folding column

    def cells(texts: Sequence[tuple[str, str]]) -> list[str]:
        parts = [
            wrap(text, widths[i]) if fold[i] else text.split("\n")
            for i, (text, _) in enumerate(texts)
        ]
        lines = []
        for n in range(max(len(p) for p in parts)):
            out = []
            for i, p in enumerate(parts):
                text = p[n] if n < len(p) else ""
                pad = " " * (widths[i] - cell_len(text))
                styled = printer.style(text, texts[i][1])
                out.append(f" {pad}{styled} " if columns[i].right else f" {styled}{pad} ")
            lines.append(out)
        return lines

    box = (
        _BOX
        if str(getattr(printer.stream, "encoding", None) or "utf-8").lower().startswith("utf")
        else _ASCII_BOX
    )
    rule, light = [box[1] * (w + 2) for w in widths], [box[13] * (w + 2) for w in widths]
    lines = [box[0] + box[2].join(rule) + box[3]]
    lines += [
        box[4] + box[4].join(cl) + box[4] for cl in cells([(c.header, "bold") for c in columns])
    ]
    lines.append(box[5] + box[6].join(rule) + box[7])
    for row in rows:
        lines += [box[8] + box[8].join(cl) + box[8] for cl in cells(row)]
    lines.append(box[9] + box[10].join(light) + box[11])
    return lines


# top-left, heavy line, top tee, top-right, heavy bar, head-left, head cross, head-right,
# light bar, bottom-left, bottom tee, bottom-right, (unused), light line: rich's HEAVY_HEAD box
_BOX = "┏━┳┓┃┡╇┩│└┴┘ ─"
_ASCII_BOX = "+-++|+++|+++ -"  # where the stream cannot encode box drawing (rich's ASCII fallback)
