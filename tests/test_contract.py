"""One contract test over every registered probe (as sos report's conformance tests)."""

from __future__ import annotations

import json
import re

import pytest

from forensics.model import HypothesisStatus, ProbeStatus
from forensics.probe import Probe, ProbeResult
from forensics.registry import load_probes
from forensics.runner import run_probes

KEY = re.compile(r"^[a-z][a-z0-9_]*$")
LOADED, FAILURES = load_probes()


def test_every_entry_point_loads():
    assert FAILURES == []
    assert {"host", "software", "git"} <= {p.name for p in LOADED}


def _check_keys(obj, path, exempt):
    if isinstance(obj, dict):
        if path in exempt or obj.keys() <= {"missing", "detail"}:
            return
        for k, v in obj.items():
            assert KEY.match(k), f"key {path}.{k} is not lowercase snake_case"
            _check_keys(v, f"{path}.{k}" if path else k, exempt)
    elif isinstance(obj, list):
        for v in obj:
            _check_keys(v, path, exempt)


@pytest.mark.parametrize("lp", LOADED, ids=lambda lp: lp.name)
def test_probe_contract(lp):
    probe: Probe = lp.probe
    assert probe.name == lp.name and probe.description and "\n" not in probe.description
    result = run_probes([probe], {}, timeout_s=30)[probe.name]
    assert result.status is not ProbeStatus.FAILED, result.reason
    json.dumps(result.data)
    if result.status is ProbeStatus.UNAVAILABLE:
        assert result.reason
        return
    _check_keys(result.data, "", set(probe.map_fields))
    same = ProbeResult.from_json(json.loads(json.dumps(result.to_json())))
    findings = probe.judge(same, same)
    assert [f for f in findings if f.status is HypothesisStatus.IMPLICATED] == []
    assert isinstance(probe.headline(result.data), str)


def test_default_snapshot_never_imports_torch():
    """The snapshot must stay fast: no torch import (nor a CUDA context) in the snapshot process."""
    import subprocess
    import sys

    code = ("import sys; from forensics.collect import take_snapshot; doc = take_snapshot(); "
            "print('torch' in sys.modules, len(doc['probes']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    imported, n = out.split()
    assert imported == "False" and int(n) >= 3
