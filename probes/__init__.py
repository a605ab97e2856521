"""Built-in probes, one module or package per probe, installed as the package ``forensics_probes``.

Each is registered in setup.cfg under the entry-point group ``forensics.probes``
exactly as a third-party probe would be; the core never imports them by name.
"""
