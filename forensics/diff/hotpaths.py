"""Performance-sensitive path patterns: which files of a repository are hot code.

Used by :mod:`forensics.diff.commits` to flag and rank commits and dirty files. The
built-in categories cover distributed communication, CUDA graphs, kernels,
attention, MoE, speculative decoding, quantization, schedulers and memory
pools; ``hot_paths`` in ``.forensics.yaml`` at the repository root, or in a
file given with ``--config``, adds categories or patterns.

The built-in patterns are ours and run on Python's ``re``. A pattern from a config
file is the repository's (a pulled commit can bring one), so it runs on RE2
(the ``google-re2`` package), whose matching time grows linearly with the path
whatever the pattern: ``^(a|aa)+$``, which makes ``re`` backtrack without end on
a long run of ``a``, is matched at once. A pattern RE2 cannot run (look-around,
back-references, a repetition over RE2's size limit), or any config pattern when
``google-re2`` is not installed, is skipped and named in :attr:`HotPaths.skipped`;
the diff shows those lines in the report's notes and on stderr.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from forensics.errors import BadInputError

DEFAULT_HOT_PATHS: dict[str, list[str]] = {
    "distributed communication": [
        r"nccl",
        r"all_?reduce",
        r"parallel_state",
        r"communicat",
        r"(^|[/_.])comms?([/_.]|$)",
        r"all_?gather",
        r"reduce_scatter",
    ],
    "CUDA graphs": [r"cuda_?graph", r"graph_runner"],
    "kernels": [r"\.cuh?$", r"triton", r"cutlass", r"(^|/)csrc/", r"(^|/)kernels?(/|\.py$)"],
    "attention": [r"attention", r"(^|[/_.])attn", r"flash_?attn", r"flashinfer"],
    "MoE": [
        r"(^|[/_.])moe([/_.]|$)",
        r"fused_moe",
        r"mixture_of_experts",
        r"(^|[/_.])experts?([/_.]|$)",
    ],
    "speculative decoding": [
        r"spec_?decod",
        r"speculative",
        r"eagle",
        r"(^|[/_.])draft",
        r"verif(y|ier)",
    ],
    "quantization": [r"quant", r"(^|[/_.])fp8([/_.]|$)", r"(^|[/_.])(awq|gptq|marlin)"],
    "scheduler": [r"schedul"],
    "memory pool": [r"mem(ory)?_?pool", r"allocator", r"block_manager", r"kv_cache"],
}
"""Category -> regular expressions searched (case-insensitively) in repo-relative paths."""

CATEGORY_WEIGHTS: dict[str, float] = {
    "distributed communication": 4.0,  # one collective per layer: a change multiplies by the layer count
    "CUDA graphs": 4.0,  # a capture change can put every kernel launch back on the host
    "kernels": 3.0,
    "attention": 3.0,  # attention, MoE and quantization are kernel code too
    "MoE": 3.0,
    "quantization": 3.0,
    "scheduler": 2.0,  # scheduling decides batch shapes, not the math
}
"""Category -> weight of a changed line when ranking commits (issue 13): collective communication and
CUDA-graph capture above kernels above scheduling above the rest (speculative decoding, memory pool,
categories from ``.forensics.yaml``: :data:`DEFAULT_CATEGORY_WEIGHT`)."""

DEFAULT_CATEGORY_WEIGHT = 1.0


def category_weight(categories: list[str]) -> float:
    """The weight of a file in ``categories`` (the highest of them; 0 when it is not hot)."""
    return max((CATEGORY_WEIGHTS.get(c, DEFAULT_CATEGORY_WEIGHT) for c in categories), default=0.0)


CONFIG_NAME = ".forensics.yaml"


class HotPaths:
    """Compiled hot-path patterns: category -> regexes searched in repo-relative paths.

    Args:
        patterns: category -> trusted patterns (the built-in ones), compiled with ``re``, case-insensitive.

    Attributes:
        patterns: category -> compiled patterns (``re`` or RE2 objects; each has ``search(str)``).
        skipped: one line per config pattern left out and why (see :func:`bounded_pattern`).
    """

    def __init__(self, patterns: Mapping[str, list[str]]):
        self.patterns: dict[str, list[Any]] = {
            cat: [re.compile(p, re.I) for p in pats] for cat, pats in patterns.items()
        }
        self.skipped: list[str] = []

    def categories(self, path: str) -> list[str]:
        """Hot categories ``path`` matches, sorted; empty when it is not hot."""
        try:
            return sorted(
                cat for cat, pats in self.patterns.items() if any(p.search(path) for p in pats)
            )
        except (
            UnicodeEncodeError
        ):  # RE2 reads UTF-8: a file name git gave in another encoding (lone surrogates)
            path = path.encode("utf-8", "replace").decode("utf-8")
            return sorted(
                cat for cat, pats in self.patterns.items() if any(p.search(path) for p in pats)
            )


def bounded_pattern(pattern: str) -> tuple[Any | None, str]:
    """``pattern`` compiled by RE2, whose search time is linear in the path's length, case-insensitive.

    Returns:
        (the compiled pattern, "") or (None, why it cannot run in bounded time: RE2
        rejects its syntax, it is not valid Unicode text (a lone surrogate: RE2 reads UTF-8), or
        ``google-re2`` is not installed).
    """
    try:
        import re2
    except ImportError:
        return (
            None,
            "the google-re2 package is not installed, so it cannot be matched in bounded time "
            "(pip install google-re2)",
        )
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # RE2 would print its own parse errors on stderr
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:  # RE2 reads UTF-8; YAML's "\uD800" escape gives a lone surrogate
        return (
            None,
            "it is not valid Unicode text (a lone surrogate from a \\uD800-style escape), which RE2 cannot read",
        )
    try:
        return re2.compile(pattern, options), ""
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        return None, f"RE2, which matches in time linear in the path, cannot run it ({why})"


def load_hot_paths(repo: Path | None = None, config: Path | None = None) -> HotPaths:
    """The default hot-path patterns extended by ``hot_paths`` from the config files.

    Reads ``<repo>/.forensics.yaml`` (when present) and then ``config``. Format::

        hot_paths:
          my custom ops: ["csrc/my_ops/", "fused_.*\\\\.py$"]

    A pattern from these files runs on RE2 (:func:`bounded_pattern`); one RE2 cannot
    run is left out and named in :attr:`HotPaths.skipped`.

    Raises:
        BadInputError: ``config`` is missing, either file is not valid YAML of that shape,
            a pattern is not a regular expression (Python's ``re`` syntax), or a category name is
            not valid Unicode text (a lone surrogate, which the report's UTF-8 cannot hold).
    """
    import yaml

    hot = HotPaths(DEFAULT_HOT_PATHS)
    files: list[Path] = []
    if repo is not None and (Path(repo) / CONFIG_NAME).is_file():
        files.append(Path(repo) / CONFIG_NAME)
    if config is not None:
        if Path(config).is_dir():
            raise BadInputError(
                f"--config {config}: is a folder; give the hot-paths YAML file (docs/report.md)"
            )
        if not Path(config).exists():
            raise BadInputError(f"--config {config}: no such file")
        if not Path(config).is_file():
            raise BadInputError(
                f"--config {config}: not a regular file (a device or a pipe); give the hot-paths YAML "
                "file (docs/report.md)"
            )
        files.append(Path(config))
    for path in files:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, ValueError, RecursionError, yaml.YAMLError) as exc:
            # ValueError: not UTF-8, or an integer over 4,300 digits; RecursionError: nested too deeply
            raise BadInputError(
                f"{path}: cannot read as YAML ({type(exc).__name__}); fix or remove it"
            ) from None
        extra = doc.get("hot_paths", {}) if isinstance(doc, dict) else None
        if not isinstance(extra, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()
        ):
            raise BadInputError(
                f"{path}: 'hot_paths' must map a category name to a list of regular expressions"
            )
        for cat, pats in extra.items():
            if not _is_text(str(cat)):  # it is written into the report, a UTF-8 file
                raise BadInputError(
                    f"{path}: hot_paths category {str(cat)!r} is not valid Unicode text (a lone "
                    "surrogate from a \\uD800-style escape); write the character itself"
                )
            for p in pats:
                try:
                    re.compile(p)
                except (re.error, OverflowError, RecursionError) as exc:
                    raise BadInputError(
                        f"{path}: hot_paths[{cat!r}] pattern {p!r} is not a regular expression ({exc})"
                    ) from None
                compiled, why = bounded_pattern(p)
                if compiled is None:
                    hot.skipped.append(f"{path}: hot_paths[{cat!r}] pattern {p!r} skipped: {why}")
                else:
                    hot.patterns.setdefault(str(cat), []).append(compiled)
    return hot


def _is_text(value: str) -> bool:
    """True when ``value`` can be written as UTF-8 (no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
