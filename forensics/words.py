"""Counted nouns for every sentence forensics prints: "1 suspect", "2 rounds", "0 processes".

In the core and dependency-free, so every package that words a sentence (the diff, bisect,
investigate, the probes' judges, the renderers) can use it instead of writing "file(s)" or a
bare "s", without reaching into ``render``.
"""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, the plural form unless ``n`` is 1.

    Args:
        n: the count.
        word: the singular ("suspect", "untracked file").
        many: the plural when it is not ``word + "s"`` ("processes", "repositories").

    Returns:
        e.g. ``"1 suspect"``, ``"3 suspects"``, ``"0 processes"``.
    """
    return f"{n} {word if n == 1 else (many or word + 's')}"
