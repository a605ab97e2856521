"""Running the user's own step and reading its measurements.

The step is a shell command that prints one JSON line per measurement::

    {"metric": "verify_ms", "value": 19.3}

(any other output is ignored), or, with ``metric_regex``, lines matched by a
regular expression whose first group (or group ``value``) is the number.
Each call of :func:`run_command` is one fresh process: one independent sample
set for the statistics.

The output is read as the step prints it (:func:`forensics.procgroup.run_group_bounded`): only the
lines that may hold a measurement (:func:`metric_lines`) and the last 64 KiB of each stream are kept,
so a step that logs hundreds of MB costs no more memory than one that logs nothing. A
``metric_regex`` is matched in blocks of whole lines, so a match that spans lines may be missed.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field

from forensics.errors import BadInputError
from forensics.procgroup import TAIL_BYTES, Stream, run_group_bounded


class StepTimedOut(BadInputError):
    """One process of the user's step ran past its time limit; its whole process group was stopped (exit 2)."""


@dataclass
class StepRun:
    """Measurements from one process of the user's step.

    Attributes:
        values: the metric's values in the order printed (the user's unit).
        metric: the metric name read (first one seen when none was asked for).
        returncode: the command's exit status.
        stderr_tail: last lines of stderr (for error messages).
    """

    values: list[float] = field(default_factory=list)
    metric: str = ""
    returncode: int = 0
    stderr_tail: str = ""


def parse_output(
    text: str,
    metric: str | None = None,
    metric_regex: str | None = None,
    rejected: list[str] | None = None,
) -> tuple[str, list[float]]:
    """Extract measurements from a step's stdout.

    Args:
        text: the command's standard output.
        metric: keep only JSON lines with this ``metric`` (default: the first metric seen).
        metric_regex: instead of JSON lines, a regex; group ``value`` or group 1 is the number.
        rejected: if given, gets one reason per JSON line of the chosen metric whose value is no
            time (``value NaN is not a time``), for the error message.

    Returns:
        (metric name, values). Values may be empty: the caller decides that is an error.

    Raises:
        BadInputError: ``metric_regex`` does not compile or has no group.
    """
    values: list[float] = []
    if metric_regex:
        rx = compile_metric_regex(metric_regex)
        for m in rx.finditer(text):
            raw = m.group("value") if "value" in rx.groupindex else m.group(1)
            try:
                v = float(raw)
            except (TypeError, ValueError, OverflowError):
                continue
            if math.isfinite(v):
                values.append(v)
        return metric or "value", values
    chosen = metric
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "value" not in obj:
            continue
        name = str(obj.get("metric", "value"))
        if chosen is None:
            chosen = name
        if name != chosen:
            continue
        if isinstance(obj["value"], bool):  # float(True) is 1.0: a flag, not a measurement
            if rejected is not None:
                rejected.append(f"value {json.dumps(obj['value'])} is not a number")
            continue
        try:
            v = float(obj["value"])
        except (TypeError, ValueError, OverflowError):
            if rejected is not None:
                rejected.append(f"value {json.dumps(obj['value'])[:40]} is not a number")
            continue
        if math.isfinite(v):  # NaN and Infinity are not measurements
            values.append(v)
        elif rejected is not None:
            rejected.append(f"value {json.dumps(obj['value'])} is not a time")
    return chosen or (metric or "value"), values


def compile_metric_regex(metric_regex: str) -> re.Pattern:
    """``metric_regex`` (``--metric-regex``) compiled, once checked that it can read a measurement.

    The one check of the regex for every command that takes it (:meth:`forensics.step.spec.StepOptions.check`,
    :meth:`forensics.bisect.model.BisectConfig.from_options`, and :func:`metric_lines` before a step runs).
    A regex that matches the empty string (``.*``, ``(\\d*)``, an empty one) is refused: it matches in every
    line, so every line of the step's output would be kept as a metric line and the bounded reader
    (:func:`forensics.procgroup.run_group_bounded`) would hold the whole log. Whether it does is asked of
    :mod:`re` on texts without a number (``""``, ``"x"``, ``"loading the model"``): a zero-width match in
    any of them; one that matches the empty string only after a label (``(?<=ms=)(\\d*)``) is kept.

    Raises:
        BadInputError (``option="metric_regex"``): it does not compile, matches the empty string, or has no
            group.
    """
    try:
        rx = re.compile(metric_regex)
    except re.error as exc:
        raise BadInputError(
            f"{metric_regex!r} is not a valid regular expression ({exc})", option="metric_regex"
        ) from None
    if any(m.start() == m.end() for text in _NO_NUMBER for m in rx.finditer(text)):
        raise BadInputError(
            f"{metric_regex!r} matches the empty string, so every line of the step's output would be a "
            "metric line; give a pattern with a number group, e.g. 'step_ms=([0-9.]+)'",
            option="metric_regex",
        )
    if rx.groups < 1:
        raise BadInputError(
            f"{metric_regex!r} needs a group around the number, e.g. 'step (\\d+\\.?\\d*) ms'",
            option="metric_regex",
        )
    return rx


_NO_NUMBER = ("", "x", "loading the model")
"""Lines without a measurement: a ``metric_regex`` with a zero-width match in one of them matches the empty
string anywhere (:func:`compile_metric_regex`)."""


_VALUE_LINE = re.compile(r'^.*"value".*$', re.M)
"""A line that names a ``"value"``: with ``{`` and ``}`` in it, :func:`parse_output` may read a measurement
from it (a line of :meth:`str.splitlines`, which also breaks at ``\\x0b``, ``\\x1c``..., lies within one)."""


def _json_lines(text: str) -> list[str]:
    if '"value"' not in text:  # most blocks of a long log: one scan, no line split
        return []
    return [ln for ln in _VALUE_LINE.findall(text) if "{" in ln and "}" in ln]


def metric_lines(metric_regex: str | None = None):
    """The ``keep`` of :func:`forensics.procgroup.run_group_bounded` for a step's stdout: from a block of
    whole lines, those :func:`parse_output` may read a measurement from (JSON lines with a ``"value"``, or
    the lines holding a ``metric_regex`` match). Every line it reads is among them.

    Raises:
        BadInputError: ``metric_regex`` does not compile or has no group.
    """
    if not metric_regex:
        return _json_lines
    rx = compile_metric_regex(metric_regex)

    def lines(text: str) -> list[str]:
        out, done = [], 0
        for m in rx.finditer(text):
            if m.start() < done:  # within a line already kept
                continue
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", max(m.end() - 1, m.start()))  # the end of the match's last line
            end = len(text) if end < 0 else end
            out.append(text[start:end])
            done = end + 1
        return out

    return lines


SHOWN_CHARS = 300
"""Characters of the step's last stderr line an error shows at most (its end)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(line: str) -> str:
    """A line the step printed, as an error line may quote it: terminal control characters (escape
    sequences, binary output) replaced by '?', and only its last :data:`SHOWN_CHARS` characters (after
    "...") when it is longer."""
    if len(line) > SHOWN_CHARS:
        line = "..." + line[-SHOWN_CHARS:]
    return _CONTROL.sub("?", line)


def stderr_hint(err: Stream) -> str:
    """``"; stderr: LAST LINE"`` for an error about a step that failed ("" when stderr was empty): the last
    line of what :func:`forensics.procgroup.run_group_bounded` kept of stderr, as :func:`shown` gives it (a
    step that dies writing a megabyte without a line end, or binary, still gives one readable line); the
    parenthesis says what was left out."""
    lines = err.tail.strip().splitlines()
    if not lines:
        return ""
    last = lines[-1]
    began_in_tail = len(lines) > 1 or not err.cut  # else it began before the kept tail
    said = []
    if len(last) > SHOWN_CHARS or not began_in_tail:
        whole = f"{len(last):,} characters" if began_in_tail else "longer than the tail kept"
        said.append(f"the end of its last line, {whole}")
    else:
        said.append("its last line")
    if err.cut:
        said.append(
            f"the {err.cut:,} bytes of stderr before its last {TAIL_BYTES // 1024} KiB were cut"
        )
    hint = f"; stderr: {shown(last)}"
    return (
        hint
        + (f" ({'; '.join(said)})" if len(said) > 1 or said[0] != "its last line" else "")
        + conflict_hint(lines)
    )


_CONFLICT_MARKER = re.compile(r"^\s*(<{7}|={7}|>{7})(?:\s|$)")
_TRACEBACK_FILE = re.compile(r'^\s*File "(.+)", line (\d+)')


def conflict_hint(lines: list[str]) -> str:
    """``"; FILE line N holds a merge conflict marker ...: resolve the conflict first ..."`` when a failed
    step's stderr (``lines``, its kept tail) quotes a line of source that is a conflict marker (``<<<<<<<``,
    ``=======``, ``>>>>>>>``: Python's SyntaxError quotes the line after its ``File "...", line N``);
    "" otherwise. A checkout in the middle of a rebase or merge with conflicts ran the step with git's
    markers in the code, and the error said only 'SyntaxError: invalid decimal literal'."""
    for i, line in enumerate(lines):
        m = _CONFLICT_MARKER.match(line)
        if not m:
            continue
        where = None
        for earlier in reversed(lines[:i]):
            f = _TRACEBACK_FILE.match(earlier)
            if f:
                where = (f.group(1), f.group(2))
                break
        at = f"{shown(where[0])} line {where[1]}" if where else "its code"
        return (
            f"; {at} holds a merge conflict marker ({shown(line.strip()[:60])!r}): resolve the conflict "
            "first (git status lists the unmerged files)"
        )
    return ""


def run_command(
    cmd: str,
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
    metric: str | None = None,
    metric_regex: str | None = None,
) -> StepRun:
    """Run the user's step once (one fresh process) and parse its measurements.

    Args:
        cmd: shell command line (run with ``/bin/sh -c``; no shell injection
            concern: it is the user's own command).
        cwd, env: working folder and full environment (default: inherit).
        timeout_s: wall-clock limit for the command.

    Returns:
        a :class:`StepRun`.

    Raises:
        BadInputError: the command could not start, failed, or printed no measurement; the
            message says which and shows stderr's tail.
        StepTimedOut: it ran past ``timeout_s`` (its process group was stopped).
    """
    if timeout_s <= 0:
        raise BadInputError(f"the step's timeout must be positive, got {timeout_s:g} s")
    keep = metric_lines(metric_regex)  # a bad regex is said before the step runs
    try:
        # Its own process group, so a timeout (or Ctrl-C) ends the whole step, not just the shell.
        code, out, err = run_group_bounded(cmd, timeout_s, keep=keep, shell=True, cwd=cwd, env=env)
    except OSError as exc:
        raise BadInputError(f"step command could not start ({exc.strerror}): {cmd}") from None
    if code is None:
        raise StepTimedOut(
            f"step command timed out after {timeout_s:g} s (its processes were stopped): {cmd}"
        )
    tail = "\n".join(err.tail.strip().splitlines()[-5:])
    if code != 0:
        raise BadInputError(f"step command exited with status {code}: {cmd}{stderr_hint(err)}")
    rejected: list[str] = []
    name, values = parse_output("\n".join(out.kept), metric, metric_regex, rejected)
    if not values:
        how = (
            f"no line matched --metric-regex {metric_regex!r}"
            if metric_regex
            # the example line names the metric asked for: '... like {"metric": "step_ms", ...} with metric
            # 'step_s'' showed one name and asked for another
            else f"no JSON line like {{{json.dumps('metric')}: {json.dumps(metric or 'step_ms')}, "
            f'"value": 19.3}}'
        )
        if rejected:
            how = f"no usable measurement (its JSON line's {rejected[0]}; print a finite number of ms)"
        elif metric and not metric_regex:
            other, found = parse_output("\n".join(out.kept))
            if found:  # another metric: the step at another commit names it differently, say
                how += f" (it printed metric {other!r})"
        raise BadInputError(f"step command printed {how}: {cmd}")
    return StepRun(values, name, code, tail)


def split_command(cmd: str) -> list[str]:
    """``shlex.split`` with a one-line error for unbalanced quotes."""
    try:
        return shlex.split(cmd)
    except ValueError as exc:
        raise BadInputError(f"cannot parse command {cmd!r}: {exc}") from None


def check_launcher(launcher: str) -> list[str]:
    """Split a ``--launcher`` command prefix and check its program exists.

    Returns:
        the prefix as argv.

    Raises:
        BadInputError: unbalanced quotes, empty, or the program is not on PATH.
    """
    import shutil

    try:
        prefix = shlex.split(launcher)
    except ValueError as exc:
        raise BadInputError(f"--launcher {launcher!r}: {exc}; quote it as one shell word") from None
    if not prefix:
        raise BadInputError(
            "--launcher is empty; give a command prefix such as 'torchrun --nproc-per-node 2'"
        )
    if shutil.which(prefix[0]) is None:
        raise BadInputError(f"--launcher: {prefix[0]!r} not found on PATH (or not executable)")
    return prefix


_SHELL_WORDS = {
    "cd",
    "exec",
    "env",
    "time",
    "nice",
    "if",
    "for",
    "while",
    "case",
    "{",
    "(",
    "!",
    "export",
    ".",
    "source",
    "set",
    "eval",
    "command",
    "builtin",
    "test",
    "[",
    "true",
    "false",
    "echo",
    "printf",
    ":",
}


def check_step_command(cmd: str, option: str = "--cmd") -> None:
    """Before any measurement: the step command's program exists (``shutil.which``), where that can be told.

    A shell line may start with ``VAR=value`` words (skipped), a builtin or a
    keyword (``cd x && ...``: not checked); a program given as a path must be
    executable.

    Raises:
        BadInputError: unbalanced quotes, empty, or the program is not found.
    """
    import shutil

    try:
        words = shlex.split(cmd)
    except ValueError as exc:
        raise BadInputError(f"{option} {cmd!r}: {exc}; check its quotes") from None
    words = [w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)] if words else words
    if not words:
        raise BadInputError(f"{option} is empty; give the command that runs your step")
    prog = words[0]
    if prog in _SHELL_WORDS or any(c in prog for c in "$`;&|<>*?"):
        return
    if "/" in prog:
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            raise BadInputError(f"{option}: {prog!r} is not an executable file")
    elif shutil.which(prog) is None:
        raise BadInputError(
            f"{option}: {prog!r} not found on PATH; check the command before the benchmark runs"
        )


def child_env(extra: dict[str, str | None] | None = None) -> dict[str, str]:
    """A copy of this process's environment with ``extra`` applied; a ``None`` value removes the variable."""
    env = dict(os.environ)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
