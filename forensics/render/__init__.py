"""Rendering: terminal (rich), HTML and Markdown (Jinja2), JSON. Reads core objects only.

Owns ``report`` (the diff report in HTML/Markdown/JSON), ``summary`` (the
one-paragraph verdict), ``terminal`` (snapshot and probe listings),
``env`` (the ``forensics env`` table), ``bench`` (bench results as text),
``bisect`` (the bisect document and its text), ``fleet`` (the fleet report and
the diff of two fleets) and ``prometheus`` (the fleet report as Prometheus text).

May import the core, ``forensics.env.judge`` and the documents of ``diff``,
``bench``, ``bisect`` and ``fleet``; nothing in the core imports ``render``.
"""
