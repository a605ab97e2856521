"""Rendering: terminal (rich), HTML and Markdown (Jinja2), JSON. Reads core objects only.

Owns ``report`` (the diff report in HTML/Markdown/JSON), ``summary`` (the
one-paragraph verdict), ``terminal`` (snapshot and probe listings),
``env`` (the ``forensics env`` table), ``bench`` (bench results as text),
``bisect`` (the bisect document and its text), ``fleet`` (the fleet report and
the diff of two fleets), ``prometheus`` (the fleet report as Prometheus text),
``investigate`` (the investigation report, with the diff report of the same snapshots inside)
``templating`` (the one Jinja2 environment and its filters) and ``text`` (plain terminal
output without rich: styles, width, a fixed-width table).

May import the core, ``forensics.env.judge`` and ``forensics.env.entries``, and the documents of ``diff``,
``bench``, ``bisect``, ``fleet`` and ``investigate``; nothing in the core imports ``render``.
"""
