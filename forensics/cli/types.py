"""Click parameter types shared by every command: finite numbers, paths and output files.

A bad value fails while click parses the command line, before any work
starts, as a one-line usage error (exit code 2) naming the option.
"""

from __future__ import annotations

import math
from pathlib import Path

import click


class FiniteFloat(click.ParamType):
    """A float option that must be finite and above (or, with ``allow_zero``, at least) zero.

    click's own FloatRange lets ``nan`` through (every comparison with it is
    false); a NaN timeout or budget then fails deep inside a measurement.
    """

    name = "number"

    def __init__(self, allow_zero: bool = False, maximum: float = 1e7):
        self.allow_zero = allow_zero
        self.maximum = (
            maximum  # ~116 days: beyond it the standard library's time conversions overflow
        )

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            v = value
        else:
            try:
                v = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v) or v < 0 or (v == 0 and not self.allow_zero) or v > self.maximum:
            cap = f" and at most {self.maximum:g}" if math.isfinite(self.maximum) else ""
            self.fail(
                f"{value!r} must be a finite number {'>= 0' if self.allow_zero else '> 0'}{cap}",
                param,
                ctx,
            )
        return v


POSITIVE = FiniteFloat()  # seconds
NON_NEGATIVE = FiniteFloat(allow_zero=True)  # seconds
POSITIVE_VALUE = FiniteFloat(
    maximum=math.inf
)  # a measured value in any unit (bytes/s can be large)


class PathArg(click.Path):
    """``click.Path`` that refuses an empty value: ``Path("")`` is the current folder, so
    ``forensics diff "$BEFORE" after.json`` with ``BEFORE`` unset read every snapshot in the folder as a
    fleet, and ``--repo ""``/``--wheelhouse ""`` silently meant ``.``. Every path argument and option of
    the commands uses it."""

    def convert(self, value, param, ctx):
        if value == "":
            self.fail(
                "'' is empty; give a path (is the shell variable that should hold it unset?)",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


class BadOutputFile(click.BadParameter):
    """A bad ``-o`` value: exit code 2, shown as one line even when click itself reports it."""

    def show(self, file=None) -> None:
        click.echo(f"forensics: error: {self.format_message()}", err=True, file=file)


class OutputFile(click.ParamType):
    """An ``-o`` file forensics will write: a :class:`pathlib.Path` whose folder exists.

    Checked before any work: the name ends in one of ``suffixes`` (when
    given), is a file name and not a folder, and its folder exists and takes a
    new file (:func:`forensics.docfile.check_writable` creates and removes a
    temp file there). An existing output that is not a regular file (``/dev/null``,
    a FIFO, ``/dev/stdout``) is accepted whatever its name and written in place; a
    symbolic link is written through (:mod:`forensics.outpath`). A path the system
    refuses (a folder the user cannot search, a name over NAME_MAX) is one line, exit 2.
    ``-`` (stdout) is passed through as the string ``"-"`` when ``allow_dash``.

    Args:
        suffixes: accepted suffixes, lower case with the dot; None accepts any
            (the command then decides the format, as ``diff --format`` does).
        kind: how the message names the file ("file", "report").
        allow_dash: accept ``-`` for stdout.
    """

    name = "file"

    def __init__(
        self,
        suffixes: tuple[str, ...] | None = (".json", ".yaml", ".yml"),
        kind: str = "file",
        allow_dash: bool = False,
    ):
        self.suffixes = suffixes
        self.kind = kind
        self.allow_dash = allow_dash

    def fail(self, message, param=None, ctx=None):
        raise BadOutputFile(message, ctx=ctx, param=param)

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            path = value
        elif self.allow_dash and value == "-":
            return "-"
        elif value == "":  # Path("") is the current folder
            self.fail("'' is empty; give a file name", param, ctx)
        else:
            path = Path(value)
        from forensics.docfile import check_writable, written_in_place
        from forensics.errors import BadInputError

        option = (
            max(param.opts, key=len) if param is not None and param.opts else "-o"
        )  # "--prom", "-o"...
        if written_in_place(
            path
        ):  # /dev/null, a FIFO, /dev/stdout: written where it is, whatever its name
            try:
                check_writable(path, option=option)
            except BadInputError as exc:
                self.fail(str(exc), param, ctx)
            return path
        if self.suffixes is not None and (
            path.suffix.lower() not in self.suffixes or path.stem in ("", *self.suffixes)
        ):
            names = (
                ", ".join(self.suffixes[:-1]) + f" or {self.suffixes[-1]}"
                if len(self.suffixes) > 1
                else self.suffixes[0]
            )
            self.fail(f"{path}: give a {self.kind} name ending in {names}", param, ctx)
        try:  # not a folder, the folder exists and takes a new file: checked now, not after a 20 s benchmark
            check_writable(path, option=option)
        except BadInputError as exc:
            self.fail(str(exc), param, ctx)
        return path


OUTPUT_FILE = OutputFile()  # a JSON or YAML document (snapshot, bench file, env file)
REPORT_FILE = OutputFile((".html", ".md", ".json"), kind="report")  # a bisect report
DIFF_REPORT_FILE = OutputFile(
    None, kind="report", allow_dash=True
)  # the format may come from --format
