"""Host and software probes: parsers on real text, and their judgements."""

from __future__ import annotations

import json

from forensics_probes.host import (
    HostProbe,
    parse_bracketed,
    parse_cpu_max,
    parse_cpuinfo_model,
    parse_memory_max,
)
from forensics_probes.software import SoftwareProbe, editable_location, torch_build

from forensics.model import HypothesisStatus, ProbeStatus, Severity, is_missing
from forensics.probe import ProbeResult
from tests.conftest import H200


def test_host_parsers():
    assert (
        parse_cpuinfo_model("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n")
        == "AMD EPYC 9654 96-Core Processor"
    )
    assert is_missing(parse_cpuinfo_model(None))
    assert parse_bracketed("always [madvise] never\n", "thp") == "madvise"
    assert parse_cpu_max("400000 100000\n") == 4.0
    assert parse_cpu_max("max 100000\n")["missing"] == "not_applicable"
    assert parse_memory_max("max\n")["missing"] == "not_applicable"
    assert parse_memory_max("17179869184\n") == 17179869184


def _host(**over):
    data = {
        "cpu": {
            "model": "Intel Xeon",
            "logical_cores": 32,
            "affinity_cores": 32,
            "governor": "performance",
        },
        "cgroup": {"cpu_limit_cores": 32.0},
        "numa_nodes": {"node0": "0-31"},
        "thp_enabled": "madvise",
        "load_avg_1m": 0.4,
    }
    for k, v in over.items():
        if k in ("governor", "affinity_cores"):
            data["cpu"][k] = v
        elif k == "cpu_limit_cores":
            data["cgroup"][k] = v
        else:
            data[k] = v
    return ProbeResult(ProbeStatus.OK, data=data)


def test_host_judge_governor_and_cgroup():
    findings = HostProbe().judge(_host(), _host(governor="powersave", cpu_limit_cores=4.0))
    summaries = [f.summary for f in findings if f.status is HypothesisStatus.IMPLICATED]
    assert "CPU scaling governor changed: performance -> powersave" in summaries
    assert any("cgroup CPU limit changed: 32.0 -> 4.0 cores" in s for s in summaries)


def test_host_judge_volatile_load_is_not_a_finding():
    findings = HostProbe().judge(_host(load_avg_1m=0.2), _host(load_avg_1m=3.1))
    assert [f.status for f in findings] == [HypothesisStatus.RULED_OUT]
    oversubscribed = HostProbe().judge(_host(), _host(load_avg_1m=80.0))
    assert (
        oversubscribed[0].severity is Severity.LOW and "oversubscribed" in oversubscribed[0].summary
    )


def test_editable_and_torch_build():
    assert editable_location(
        '{"dir_info": {"editable": true}, "url": "file:///src/my%20serving"}'
    ) == {"path": "/src/my serving", "url": "file:///src/my%20serving"}
    assert editable_location('{"dir_info": {}, "url": "file:///x"}') is None
    assert editable_location("not json") is None
    assert torch_build("2.11.0+cu130") == "cu130"
    assert torch_build("2.11.0")["missing"] == "not_supported"


def _pip_list_packages() -> dict[str, str]:
    """Package versions of the real 2 x H200 machine (pip list fixture)."""
    out = {}
    for line in (H200 / "pip-list.txt").read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[1]
    return out


def _sw(packages, python="3.12.3"):
    return ProbeResult(
        ProbeStatus.OK, data={"python": {"version": python}, "packages": packages, "editable": {}}
    )


def test_software_judge_on_real_package_list():
    before = _pip_list_packages()
    assert before["torch"].startswith("2.11.0")
    after = dict(before, torch="2.12.0+cu130", triton="3.7.0")
    findings = {f.hypothesis: f for f in SoftwareProbe().judge(_sw(before), _sw(after))}
    assert findings["torch.version"].status is HypothesisStatus.IMPLICATED
    assert (
        findings["torch.version"].summary == f"PyTorch changed: {before['torch']} -> 2.12.0+cu130"
    )
    assert (
        findings["python.packages"].severity is Severity.MEDIUM
        and "triton" in findings["python.packages"].summary
    )
    same = SoftwareProbe().judge(_sw(before), _sw(before))
    assert {f.status for f in same} == {HypothesisStatus.RULED_OUT}
    assert any(f"torch {before['torch']} on both" == f.summary for f in same)


def test_software_collect_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, json; from forensics_probes.software import SoftwareProbe; from forensics.probe import ProbeContext;"
        "d = SoftwareProbe().collect(ProbeContext()); print(json.dumps(['torch' in sys.modules, d['torch']['version']]))"
    )
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    assert out[0] is False and out[1].startswith("2.13.0")
