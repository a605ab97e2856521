"""``pip list`` (the ``Package  Version`` table, with or without a location column) and ``pip freeze``.

``pip freeze`` lines: ``name==version``, ``name===version``, ``name @ URL`` (a direct
reference: no version in the text, recorded as ``not_recorded``), ``-e ...`` editable
lines (the name after ``#egg=``). Names are normalised as the software probe does (PEP 503).
"""

from __future__ import annotations

import re

from forensics.importers.common import Part, local_tag, normalise, not_recorded
from forensics.model import MissingReason, missing

_ROW = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)\s+(\S+)(?:\s+(\S.*))?$")
_HEADERLESS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*\s{2,}v?\d[\w.+!\-]*(\s+/\S*)?$")
_FREEZE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?\s*(===?|\s@\s)\s*(\S+)")


def parse(lines: list[str], part: Part) -> Part:
    """Fill ``part.facts["software"]["packages"]`` (module docstring)."""
    sw = part.section("software")
    packages: dict[str, object] = {}
    editable: dict[str, dict[str, str]] = {}
    table = False
    cut = None
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    for ln in lines:
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        if re.match(r"^Package\s+Version", s):
            table = True
            continue
        if re.match(r"^-{3,}(\s+-{3,})+$", s):
            continue
        if not table and not packages and _HEADERLESS.match(s):
            table = True  # rows of the table pasted without its header
        if table:
            m = _ROW.match(s)
            if re.match(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$", s) and s == last:
                cut = (
                    s  # a name without its version on the text's last line: the paste was cut here
                )
                continue
            if m and re.match(r"^\d|^[a-f0-9]{7,}$", m.group(2)):
                packages[normalise(m.group(1))] = m.group(2)
                if m.group(3) and m.group(3).startswith("/"):
                    editable[normalise(m.group(1))] = {
                        "path": m.group(3).strip(),
                        "url": f"file://{m.group(3).strip()}",
                    }
            elif packages and not m:
                break
            continue
        m = _FREEZE.match(s)
        if m:
            name = normalise(m.group(1))
            if m.group(2).strip() == "@":
                packages[name] = not_recorded(
                    part.label, "a version (installed from a direct reference) is"
                )
            else:
                packages[name] = m.group(3)
            continue
        e = re.match(r"^-e\s+(\S+)", s)
        if e and "#egg=" in e.group(1):
            name = normalise(e.group(1).split("#egg=", 1)[1].split("&")[0])
            packages[name] = not_recorded(part.label, "a version (editable install) is")
            editable[name] = {
                "path": missing(MissingReason.NOT_RECORDED, "pip freeze gives the URL only"),
                "url": e.group(1),
            }
            continue
        if packages:
            break  # the list ended
    if packages:
        sw["packages"] = dict(sorted(packages.items()))
        torch = packages.get("torch")
        if isinstance(torch, str):
            sw["torch"] = {
                "version": torch,
                "build": local_tag(torch)
                or missing(
                    MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)"
                ),
            }
    if editable:
        sw["editable"] = editable
    if cut is not None:
        part.notes.append(
            f"the pip list is cut off at {cut!r}: packages after it are not in the text"
        )
        part.partial_lists["software.packages"] = f"the pip list in the text is cut off at {cut!r}"
    return part
