"""The diff: two snapshots in, a ranked list of findings out (the ``forensics.diff/1`` ledger).

Owns ``changes`` (the generic field-by-field diff of two snapshots),
``ledger`` (runs each probe's judge, handles probes with data on one side
only, ranks hypotheses, builds the report document), ``commits`` (commits
between two git HEADs, attached as evidence to ``code.change``) and
``hotpaths`` (which changed files are on a step's hot path).

May import the core (``forensics.model``, ``probe``, ``registry``,
``hypotheses``, ``stats``, ``errors``, ``snapshot``, ``docfile``, ``gitio``) and
``forensics.bench.effect``; never a probe by name, never ``render`` or ``cli``.
"""
