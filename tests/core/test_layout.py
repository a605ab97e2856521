"""The package layout's rules: every import (lazy ones included) within the table of allowed imports,
no import cycles between modules or between packages, and each package's ``__init__`` lists its modules."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = {"forensics": ROOT / "forensics", "forensics_probes": ROOT / "probes"}
SUBPACKAGES = (
    "cli",
    "diff",
    "bench",
    "step",
    "bisect",
    "gpu",
    "env",
    "render",
    "fleet",
    "investigate",
    "importers",
)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [pkg, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (at any depth of the file: lazy imports count too)."""
    edges = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif (
                isinstance(node, ast.ImportFrom) and node.level
            ):  # relative: resolved against this module
                base = name.split(".")[
                    : len(name.split(".")) - node.level + (path.name == "__init__.py")
                ]
                module = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(module)
            elif isinstance(node, ast.ImportFrom) and node.module:
                subs = [
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if f"{node.module}.{a.name}" in modules
                ]
                found.update(subs)  # "from pkg import submodule" imports the submodule
                if len(subs) < len(node.names):
                    found.add(node.module)  # names defined in the module (or package) itself
        deps = set()
        for target in found:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if (
                target and target != name and not name.startswith(target + ".")
            ):  # a package's own __init__
                deps.add(target)
        edges[name] = deps
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph ``{node: nodes it imports}``, each as the path that closes it."""
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_cycles():
    edges = _imports(_modules())
    assert _cycles(edges) == []


def test_the_core_imports_no_probe_command_or_renderer():
    edges = _imports(_modules())
    core = [
        m
        for m in edges
        if m.startswith("forensics")
        and not m.startswith("forensics_probes")
        and (m.count(".") == 0 or m.split(".")[1] not in SUBPACKAGES)
        and m not in ("forensics.__main__", "forensics.demo")
    ]
    assert "forensics.snapshot" in core and "forensics.docfile" in core
    bad = {
        m: sorted(
            d
            for d in edges[m]
            if d.startswith("forensics_probes") or d.split(".")[1:2] in (["cli"], ["render"])
        )
        for m in core
    }
    assert {m: d for m, d in bad.items() if d} == {}


# --- the table ----------------------------------------------------------------------------------------

CORE = "core"
"""The core: the modules directly in ``forensics/`` (probe contract, registry, runner, snapshot, model,
errors, stats, redact, procgroup, gitio, words ...)."""

ENTRY_POINTS = ("forensics.__main__", "forensics.demo")
"""Modules of the core folder that start the command line; they count as ``forensics.cli``."""

ALLOWED: dict[str, set[str]] = {
    CORE: set(),
    "forensics.gpu": {"forensics.model"},
    "forensics.step": {"forensics.errors", "forensics.procgroup"},
    "forensics.env": {
        "forensics.model",
        "forensics.procgroup",
        "forensics.redact",
        "forensics.errors",
        "forensics.hypotheses",
        "forensics.gpu.pci",
    },
    "forensics.importers": {CORE, "forensics.gpu.readings"},
    "forensics.bench": {CORE, "forensics.gpu", "forensics.step"},
    "forensics.diff": {
        CORE,
        "forensics.bench.effect",
        "forensics.importers",
    },  # files: a pasted text, imported
    "forensics.bisect": {CORE, "forensics.step"},
    "forensics.investigate": {
        CORE,
        "forensics.diff",
        "forensics.bench",
        "forensics.step",
        "forensics.bisect",
        "forensics.gpu.readings",
    },
    "forensics.fleet": {
        CORE,
        "forensics.bench",
        "forensics.env",
        "forensics.gpu",
        "forensics.diff.files",
    },  # compare: a snapshot side is read as diff reads its sides
    "forensics.render": {
        CORE,
        "forensics.env.judge",
        "forensics.env.entries",
        "forensics.diff",
        "forensics.bench",
        "forensics.bisect",
        "forensics.fleet",
        "forensics.investigate",
    },
    "forensics.cli": {
        CORE,
        "forensics.gpu",
        "forensics.step",
        "forensics.env",
        "forensics.importers",
        "forensics.bench",
        "forensics.diff",
        "forensics.bisect",
        "forensics.investigate",
        "forensics.fleet",
        "forensics.render",
    },
    "forensics_probes": {
        CORE,
        "forensics.env",
    },  # host, software, nccl_env (nccl_env reads forensics.env)
    "forensics_probes.git": {CORE},
    "forensics_probes.gpu": {CORE, "forensics.gpu"},
    "forensics_probes.libs": {CORE},
}
"""Package -> what its modules may import, from what each package's ``__init__`` says (keep the two in step).

A package may always import its own modules. An entry is :data:`CORE` (any core module), a package (any of
its modules), or one module (``forensics.model``, ``forensics.bench.effect``: that one only)."""


def package_of(module: str) -> str:
    """The table's key for a module: :data:`CORE`, ``forensics.<sub>`` or ``forensics_probes[.<probe>]``."""
    if module in ENTRY_POINTS:
        return "forensics.cli"
    parts = module.split(".")
    if parts[0] == "forensics_probes":
        return (
            ".".join(parts[:2])
            if len(parts) > 1 and ".".join(parts[:2]) in ALLOWED
            else "forensics_probes"
        )
    return (
        f"forensics.{parts[1]}" if len(parts) > 1 and f"forensics.{parts[1]}" in ALLOWED else CORE
    )


def _allowed(target: str, entries: set[str]) -> bool:
    pkg = package_of(target)
    return any(pkg == e or target == e or target.startswith(e + ".") for e in entries)


def outside_the_table(edges: dict[str, set[str]]) -> list[str]:
    """``"importer -> imported"`` for every import the table does not allow."""
    return sorted(
        f"{m} -> {d}"
        for m, deps in edges.items()
        for d in deps
        if package_of(d) != package_of(m) and not _allowed(d, ALLOWED[package_of(m)])
    )


def test_every_import_is_in_the_table():
    edges = _imports(_modules())
    assert set(map(package_of, edges)) == set(ALLOWED)  # a new package needs its row
    assert outside_the_table(edges) == []


def test_the_table_check_fails_on_an_import_outside_it():
    """The check can fail: a renderer imported by the diff, a probe by the core, the diff by a probe."""
    edges = _imports(_modules())
    edges["forensics.diff.commits"] = edges["forensics.diff.commits"] | {"forensics.render.report"}
    edges["forensics.snapshot"] = edges["forensics.snapshot"] | {"forensics_probes.gpu.probe"}
    edges["forensics_probes.git.probe"] = edges["forensics_probes.git.probe"] | {
        "forensics.diff.commits"
    }
    assert outside_the_table(edges) == [
        "forensics.diff.commits -> forensics.render.report",
        "forensics.snapshot -> forensics_probes.gpu.probe",
        "forensics_probes.git.probe -> forensics.diff.commits",
    ]


def test_no_package_cycles():
    edges = _imports(_modules())
    pkg_edges: dict[str, set[str]] = {p: set() for p in ALLOWED}
    for m, deps in edges.items():
        pkg_edges[package_of(m)] |= {package_of(d) for d in deps} - {package_of(m)}
    assert _cycles(pkg_edges) == []


def test_every_package_init_lists_its_modules():
    """Each ``__init__`` docstring names every module and sub-folder of its package (as ``name``,
    :mod:`.name` or ``name/``), so a new contributor finds what lives where from the docstring."""
    import re

    missing = {}
    for folder in sorted({p.parent for f in PACKAGES.values() for p in f.rglob("__init__.py")}):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        owned = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        owned += [p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.py"))]
        gone = sorted(n for n in owned if not re.search(rf"[`.]{re.escape(n)}[`/]", doc))
        if gone:
            missing[str(folder.relative_to(ROOT))] = gone
    assert missing == {}


def test_every_side_of_a_comparison_is_read_one_way():
    """diff, investigate and fleet diff read a snapshot side through ``diff.files.load_side``: the
    one place that sweeps a loaded document for secrets again (``snapshot.redact_loaded``)."""
    callers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "forensics").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "redact_loaded"
    )
    assert callers == ["forensics/diff/files.py"]
