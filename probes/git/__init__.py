"""The ``git`` probe: HEAD, branch, reflog, dirty files of the user's repository.

Modules: ``probe`` (the :class:`GitProbe` class: collect with git commands,
judge the HEAD move as ``code.change``) and ``read`` (parsing what those commands
print; they run through ``forensics.gitio``). May import the core only; the
commit list between two HEADs is attached by ``forensics.diff.commits``.
"""

from forensics_probes.git.probe import GitProbe

__all__ = ["GitProbe"]
