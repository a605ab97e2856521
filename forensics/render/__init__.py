"""Rendering: terminal (rich), HTML and Markdown (Jinja2), JSON. Reads core objects only.

Owns ``report`` (the diff report in HTML/Markdown/JSON), ``summary`` (the
one-paragraph verdict), ``terminal`` (snapshot and probe listings),
``env`` (the ``forensics env`` table), ``bench`` (bench results as text),
``bisect`` (the bisect document and its text), ``fleet`` (the fleet report and
the diff of two fleets), ``prometheus`` (the fleet report as Prometheus text) and
``investigate`` (the investigation report, with the diff report of the same snapshots inside).

May import the core, ``forensics.env.judge`` and the documents of ``diff``,
``bench``, ``bisect``, ``fleet`` and ``investigate``; nothing in the core imports ``render``.
"""
