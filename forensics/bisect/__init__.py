"""``forensics bisect``: find the commit that made a step slower, with statistics at each step.

Owns ``run`` (the search over commits), ``model`` (the probabilistic model
of good/bad under noise), ``measure`` (one measurement of one commit in a
worktree) and ``worktree`` (temporary git worktrees; never touches the
user's checkout). Rendering of bisect documents lives in
``forensics.render.bisect``.

May import the core (``gitio`` for every git command, ``stats``, ``words``...)
and ``forensics.step``; never ``bench``, ``cli``, ``render`` or a probe.
"""
