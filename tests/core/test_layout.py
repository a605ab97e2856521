"""The package layout's rules: no import cycles, and the core knows no probe, command or renderer."""

from __future__ import annotations

import ast
from pathlib import Path
from tests.conftest import ROOT

PACKAGES = {"forensics": ROOT / "forensics", "forensics_probes": ROOT / "probes"}
SUBPACKAGES = ("cli", "diff", "bench", "step", "bisect", "gpu", "env", "render", "fleet", "investigate", "importers")


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
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
                found.update(subs)  # "from pkg import submodule" imports the submodule
                if len(subs) < len(node.names):
                    found.add(node.module)  # names defined in the module (or package) itself
        deps = set()
        for target in found:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):  # a package's own __init__
                deps.add(target)
        edges[name] = deps
    return edges


def test_no_import_cycles():
    edges = _imports(_modules())
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_the_core_imports_no_probe_command_or_renderer():
    edges = _imports(_modules())
    core = [m for m in edges if m.startswith("forensics") and not m.startswith("forensics_probes")
            and (m.count(".") == 0 or m.split(".")[1] not in SUBPACKAGES) and m not in ("forensics.__main__", "forensics.demo")]
    assert "forensics.snapshot" in core and "forensics.docfile" in core
    bad = {m: sorted(d for d in edges[m] if d.startswith("forensics_probes") or d.split(".")[1:2] in (["cli"], ["render"]))
           for m in core}
    assert {m: d for m, d in bad.items() if d} == {}
