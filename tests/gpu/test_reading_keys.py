"""Each GPU reading has one name: the keys declared in forensics/gpu/readings.py (the instant clock's
``current_mhz``, the sampler's ``clock_sm_mhz``, ``pcie_gen`` ..., the fleet's ``sm_clock_load_mhz``) are
spelled as strings only there; every other module of forensics/ and probes/ uses the constant (an AST
walk, as tests/core/test_gitio.py does for git)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from forensics.gpu import readings
from forensics.gpu.readings import LOAD_METRICS, READING_KEYS
from tests.conftest import ROOT

DECLARING = ROOT / "forensics" / "gpu" / "readings.py"

OTHER_MEANINGS = {
    (
        "forensics/importers/nvidia_smi_xml.py",
        "pcie_gen",
    ): "the <pcie_gen> element of nvidia-smi -q -x's XML, which the importer reads by its own name"
}
"""(file, key) -> why a string equal to a reading key there is not that reading."""


def _spelled(text: str) -> set[str]:
    """The reading keys a string spells: the whole string, or a part of a dotted field path
    (``gpu.devices.*.clocks.*.current_mhz``); prose (docstrings, messages) is not a key."""
    if re.search(r"\s", text):
        return set()
    return set(re.split(r"[.\[\]*]+", text)) & set(READING_KEYS)


def literals_outside(roots: list[Path], base: Path = ROOT) -> list[str]:
    """``"path:line: key"`` for each string spelling a declared reading key outside readings.py."""
    out = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path == DECLARING:
                continue
            rel = path.relative_to(base).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for key in sorted(_spelled(node.value)):
                        if (rel, key) not in OTHER_MEANINGS:
                            out.append(f"{rel}:{node.lineno}: {key}")
    return sorted(out)


def test_no_reading_key_is_spelled_outside_its_declaration():
    assert literals_outside([ROOT / "forensics", ROOT / "probes"]) == []


def test_the_scan_finds_a_spelled_key(tmp_path):
    """The check can fail: a reader spelling the SM clock's key (alone or in a field path) is named."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "reader.py").write_text(
        'def f(g):\n    """Reads clock_sm_mhz under load."""\n'
        '    return g.get("clock_sm_mhz"), "gpu.devices.*.clocks.sm.current_mhz"\n'
    )
    assert literals_outside([pkg], base=tmp_path) == [
        "pkg/reader.py:3: clock_sm_mhz",
        "pkg/reader.py:3: current_mhz",
    ]


def test_each_key_is_declared_once_with_what_it_is():
    """Every declared key is a distinct name with a docstring giving its unit or meaning and its source."""
    assert len(set(READING_KEYS)) == len(READING_KEYS)
    text = DECLARING.read_text()
    for name in (
        "CURRENT_MHZ",
        "CLOCK_SM_MHZ",
        "CLOCK_MEM_MHZ",
        "POWER_MW",
        "UTIL_GPU_PCT",
        "UTIL_MEM_PCT",
        "TEMP_C",
        "PCIE_GEN",
        "PCIE_WIDTH",
        "PSTATE",
        "MEM_USED_BYTES",
        "MEM_TOTAL_BYTES",
    ):
        assert getattr(readings, name) in READING_KEYS
        doc = text.split(f"\n{name} = ", 1)[1].split('"""')[1]
        assert "nvmlDevice" in doc, name  # the NVML call it comes from
    # the fleet's output names are the busy-sample medians of sampler keys, declared beside them
    assert LOAD_METRICS == {
        "clock_sm_mhz": "sm_clock_load_mhz",
        "pcie_gen": "pcie_gen_load",
        "pcie_width": "pcie_width_load",
    }
