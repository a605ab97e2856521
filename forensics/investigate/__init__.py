"""``forensics investigate``: diff against a baseline, rank, then confirm or refute the causes by experiment.

Owns ``run`` (the budgeted runner: snapshot now, diff, plan, experiments,
verdict), ``plan`` (experiments from the ledger's ranked hypotheses, with cost
estimates), ``experiments`` (one class per experiment kind: environment
restore, suspect commit, bisect, re-measure, package overlay), ``decide`` (the
confirm / refute rule and the share of the slowdown recovered), ``measure``
(the snapshot's benchmark and the interleaved A/B sides), ``hardware`` (no
baseline: this machine against the figures in ``ceilings.yaml``), ``memory``
(the baseline the machine remembers when ``--baseline`` is missing) and
``model`` (its dataclasses and enums). The report lives in
``forensics.render.investigate``.

May import the core, ``forensics.diff`` (the ledger, read through its public
attributes), ``forensics.bench``, ``forensics.step``, ``forensics.bisect`` and
``forensics.gpu.readings`` (the names of the GPU readings); never ``cli``,
``render`` or a probe.
"""
