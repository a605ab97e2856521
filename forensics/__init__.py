"""forensics: find out why a GPU/ML step got slower.

The package is the core (snapshot model, probe runner, diff, hypotheses,
statistics, bench, bisect, report rendering). Built-in probes live in the
separate ``probes/`` folder (installed as ``forensics_probes``) and are found
through the ``forensics.probes`` entry-point group, exactly like third-party
probes: nothing in this package imports a probe by name.
"""

__version__ = "0.1.0"
