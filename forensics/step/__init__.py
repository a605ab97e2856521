"""The user's own step, run as fresh processes: a command, or a Python callable.

Owns ``command`` (run the user's step command, read its JSON metric lines or
a regex) and ``callable`` (the one in-process worker that times a
``package.module:function``; ``python -m forensics.step.callable``),
``loaded_files`` (which of the user's files the step's processes loaded,
recorded by ``loaded/`` ``sitecustomize.py`` on their ``PYTHONPATH``) and ``spec``
(:class:`~forensics.step.spec.StepOptions`: the step as the commands' shared
options give it, checked once). Used by
``forensics bench`` (``bench.user``), ``forensics bisect`` and
``forensics env``.

May import the standard library, ``forensics.errors`` and
``forensics.procgroup``; nothing else of forensics (``callable`` runs in
the user's environment and imports only the standard library at module level).
"""
