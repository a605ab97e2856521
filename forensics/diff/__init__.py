"""The diff: two snapshots in, a ranked list of findings out (the ``forensics.diff/1`` ledger).

Owns ``changes`` (the generic field-by-field diff of two snapshots),
``ledger`` (runs each probe's judge, handles probes with data on one side
only, ranks hypotheses, builds the report document), ``commits`` (commits
between two git HEADs, attached as evidence to ``code.change``),
``hotpaths`` (which changed files are on a step's hot path), ``evidence``
(the scoring table that ranks causes), ``causes`` (which finding explains
which), ``known`` (matching the known-issues catalog), ``layers`` (versions
that change together; CUDA libraries shipped as wheels), ``suspects`` (which
commits can have changed the step, their order, what a pull weighs),
``signals`` (suspicious constructs a commit added, with their lines) and
``pysource`` (whether a Python file's change has behaviour: syntax trees
compared once comments, docstrings, annotations and local renames are set aside)
and ``files`` (two documents in -- snapshot files, pasted texts or loaded
snapshots -- swept for secrets again, one analysis out: what ``diff`` and
``investigate`` call).

May import the core (``gitio`` for the commit list, ``words``, ``snapshot``...) and
``forensics.bench.effect``, and ``forensics.importers`` (``files``: a pasted text is imported on
the fly); never a probe by name, never ``render`` or ``cli``.
"""
