"""The ``libs`` probe: the CUDA, cuDNN, NCCL and torch libraries a step would load.

Modules: ``probe`` (the :class:`LibsProbe` class: files read and commands run)
and ``judge``. May import the core only.
"""

from forensics_probes.libs.probe import LibsProbe

__all__ = ["LibsProbe"]
