"""A pull that merged: the merge commit is tested after the commits it brought in, not first.

Its diff against its first parent repeats the merged commits', so it weighed most and was the first
suspect; investigate then "confirmed" going back from the merge to its parent, which only re-measures
the whole pull, and never named the slow commit inside it.
"""

from __future__ import annotations

from types import SimpleNamespace

from forensics.diff.suspects import CommitAssessment, order


def _commit(sha: str, weight: float, parents: list[str]) -> SimpleNamespace:
    a = CommitAssessment(suspect=True, behaviour_free=False, why="behaviour change", weight=weight)
    return SimpleNamespace(sha=sha, parents=parents, assessment=a, weight=weight)


def test_a_merge_commit_comes_after_the_commits_it_merged():
    merge = _commit("m", 6.0, ["local", "slow"])  # the union of what it merged: the heaviest
    slow = _commit("slow", 3.0, ["style"])
    style = _commit("style", 1.0, ["base"])
    assert [c.sha for c in order([merge, slow, style])] == ["slow", "style", "m"]
    assert [c.sha for c in order([merge])] == ["m"]  # alone, it is the suspect
