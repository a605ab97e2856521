"""forensics: find out why a GPU/ML step got slower.

The modules directly in this folder are the core, which every package may import:
``probe`` (the probe contract), ``options`` (the options a probe may read), ``registry``
(probes from entry points), ``runner`` (probes run concurrently, each bounded), ``collect``
(one snapshot from the probes), ``snapshot`` (build, validate, load; imported snapshots told
apart), ``docfile`` (document I/O), ``outpath`` (output files: links written through, devices in
place, the one atomic writer), ``fieldtypes`` (the probes' type tables checked), ``model``
(findings, statuses, missing values), ``errors`` (domain errors and exit codes), ``hypotheses``
(the ids and their links), ``stats`` (every statistical test), ``redact`` (secrets), ``procgroup``
(child processes in their own groups), ``gitio`` (the only door to git), ``readers`` (safe reads
of /proc, /sys and commands), ``words`` (counted nouns), and the entry points ``__main__`` and
``demo`` (they start ``cli``, and count as part of it).

The packages: ``gpu`` (NVML), ``step`` (the user's step), ``env`` (the NCCL/CUDA environment of
workers), ``importers`` (pasted texts), ``bench``, ``diff``, ``bisect``, ``investigate``,
``fleet``, ``render`` and ``cli``; each ``__init__`` says what it owns and may import (the table
in tests/core/test_layout.py). The core imports none of them. Built-in probes live in the
separate ``probes/`` folder (installed as ``forensics_probes``) and are found through the
``forensics.probes`` entry-point group, exactly like third-party probes: nothing in this
package imports a probe by name.
"""

__version__ = "0.1.0"
