"""One contract test over every registered probe (as sos report's conformance tests).

Each probe is checked on recorded input, so the result does not depend on the
machine the tests run on: its section of real snapshots (examples/, taken on a
2 x H200 machine) and a fresh collect -- the GPU probe's from the fake NVML that
replays the real H200 readings (tests/_fakenvml.py), the others' with an
environment that carries NCCL and CUDA variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import snapshot as snap
from forensics.hypotheses import HYPOTHESES
from forensics.model import HypothesisStatus, ProbeStatus
from forensics.probe import JudgeContext, Probe, ProbeResult, key_problems
from forensics.registry import load_probes
from forensics.runner import run_probes
from tests.conftest import FIXTURES, ROOT

LOADED, FAILURES = load_probes()
EXAMPLES = ROOT / "examples"
RECORDED = [
    EXAMPLES / "h200x2" / "snapshot-all-probes.json",
    EXAMPLES / "silent-pull" / "before.json",
    EXAMPLES / "busy-gpu" / "after.json",
]


def _recorded_sections(name: str) -> list[ProbeResult]:
    """The probe's usable sections in the recorded real snapshots."""
    out = []
    for path in RECORDED:
        section = (snap.load(path).get("probes") or {}).get(name)
        if section is not None:
            result = ProbeResult.from_json(section)
            if result.usable:
                out.append(result)
    return out


def _fake_gpu_probe(probe: Probe, state: str) -> Probe:
    from _fakenvml import FakePynvml

    from forensics.gpu.nvml import Nvml
    from forensics.readers import CommandResult

    topo = (FIXTURES / "h200x2" / "nvidia-smi-topo.txt").read_text()
    return type(probe)(
        nvml=Nvml(FakePynvml(state)), topo_runner=lambda argv, timeout: CommandResult(True, topo)
    )


def _collected(probe: Probe) -> list[ProbeResult]:
    """Fresh collects on recorded input: the fake H200 NVML for ``gpu``; the others in a fresh process whose
    environment sets NCCL and CUDA variables (a fresh process, so no worker server outlives the test with them)."""
    if probe.name == "gpu":
        return [
            run_probes([_fake_gpu_probe(probe, s)], {}, timeout_s=30)["gpu"]
            for s in ("idle", "under_load")
        ]
    code = (
        "import json, sys; from forensics.registry import load_probes; from forensics.runner import run_probes; "
        "p = next(lp.probe for lp in load_probes()[0] if lp.name == sys.argv[1]); "
        "print(json.dumps(run_probes([p], {}, timeout_s=30)[p.name].to_json()))"
    )
    env = dict(os.environ, NCCL_ALGO="Tree", CUDA_VISIBLE_DEVICES="0")
    proc = subprocess.run(
        [sys.executable, "-c", code, probe.name],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return [ProbeResult.from_json(json.loads(proc.stdout.strip().splitlines()[-1]))]


def _check_judge(probe: Probe, result: ProbeResult) -> None:
    same = ProbeResult.from_json(json.loads(json.dumps(result.to_json())))
    findings = probe.judge(same, same, JudgeContext())
    assert [f for f in findings if f.status is HypothesisStatus.IMPLICATED] == []
    assert {f.hypothesis for f in findings} <= set(probe.hypotheses), (
        "a finding for a hypothesis not declared"
    )


def test_every_entry_point_loads():
    assert FAILURES == []
    assert {"host", "software", "git", "nccl_env", "gpu", "libs"} <= {p.name for p in LOADED}


def test_key_checker_follows_map_fields_patterns():
    data = {
        "start_methods": {"spawn": {"env": {"CUDA_VISIBLE_DEVICES": "0"}, "Bad": 1}},
        "gpus": {"GPU-0": {"clockMhz": 1}},
        "x": {"missing": "not_supported", "detail": "NVML"},
    }
    assert key_problems(data, ("start_methods.*.env", "gpus")) == [
        "start_methods.spawn.Bad",
        "gpus.GPU-0.clockMhz",
    ]


@pytest.mark.parametrize("lp", LOADED, ids=lambda lp: lp.name)
def test_probe_contract(lp):
    probe: Probe = lp.probe
    assert probe.name == lp.name and probe.description and "\n" not in probe.description
    assert probe.hypotheses and set(probe.hypotheses) <= set(HYPOTHESES), probe.hypotheses
    assert probe.extra_timeout_s({}) >= 0
    recorded = _recorded_sections(probe.name)
    collected = _collected(probe)
    for result in collected:
        assert result.status is not ProbeStatus.FAILED, result.reason
        json.dumps(result.data)
        if result.status is ProbeStatus.UNAVAILABLE:
            assert result.reason
    usable = [r for r in recorded + collected if r.usable]
    assert usable, f"no recorded input for probe {probe.name!r}"
    if probe.name == "gpu":
        assert all(r.usable for r in collected), "the fake NVML must give the GPU probe data"
    for result in usable:
        assert key_problems(result.data, probe.map_fields) == []
        _check_judge(probe, result)
        assert isinstance(probe.headline(result.data), str)


def test_default_snapshot_never_imports_torch():
    """The snapshot must stay fast: no torch import (nor a CUDA context) in the snapshot process."""
    code = (
        "import sys; from forensics.collect import take_snapshot; doc = take_snapshot(); "
        "print('torch' in sys.modules, len(doc['probes']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    imported, n = out.split()
    assert imported == "False" and int(n) >= 3


def test_spawned_workers_do_not_import_the_command_line():
    """multiprocessing's spawn and forkserver run the parent's main script again in each worker (as
    ``__mp_main__``): the installed ``forensics`` script must not bring click and the commands with it."""
    script = Path(sys.executable).with_name("forensics")
    assert script.is_file(), (
        f"{script}: the console script is not installed in this Python (make install)"
    )
    expr = "sorted(m for m in ('click', 'forensics.cli', 'rich', 'forensics.__main__') if m in __import__('sys').modules)"
    code = (
        "import multiprocessing as mp, sys, types\n"
        "main = types.ModuleType('__main__')\n"
        f"main.__file__ = {str(script)!r}\n"  # what running the script makes __main__
        "sys.modules['__main__'] = main\n"
        "with mp.get_context('spawn').Pool(1) as pool:\n"
        f"    print(pool.apply(eval, ({expr!r},)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.strip() == "['forensics.__main__']"
    )  # the entry point's module, and nothing more


def test_the_garbage_collector_is_back_as_it_was_after_a_snapshot():
    """take_snapshot pauses Python's cyclic collector while probes load and run; the caller's setting
    comes back, whether it was on (the default) or off."""
    import gc

    from forensics.collect import take_snapshot

    assert gc.isenabled()
    doc = take_snapshot(only=["software"])
    assert doc["probes"]["software"]["status"] == "ok" and gc.isenabled()
    gc.disable()
    try:
        take_snapshot(only=["software"])
        assert not gc.isenabled()
    finally:
        gc.enable()
