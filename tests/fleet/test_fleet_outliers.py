"""Fleet mode without launching a job: launcher variables, the outlier rules on a synthetic
1,000-node fleet built from real H200 readings, the fleet file, reports, Prometheus text, comparison."""

from __future__ import annotations

import json
import re

import pytest

from forensics.errors import BadInputError
from forensics.fleet import document, synth
from forensics.fleet.compare import compare, load_baseline
from forensics.fleet.features import from_records
from forensics.fleet.gather import DirChannel
from forensics.fleet.launcher import detect
from forensics.fleet.report import build, judge
from forensics.fleet.snapshot import LocalChannel, Options, assigned_gpu, run_rank
from tests.conftest import ROOT, run_cli

N_NODES = 1000


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted fleet of 1,000 nodes x 8 GPUs, written once for the module. Its tests share one
    xdist group (``make test`` runs ``--dist loadgroup``), so one worker builds it, not each."""
    d = tmp_path_factory.mktemp("fleets")
    return synth.write_fleet(d / "planted.json", ROOT, N_NODES, 8, plant=True, seed=1)


PLANTED = pytest.mark.xdist_group("planted-fleet")


def _expected_subjects(n_nodes: int) -> dict[str, str]:
    spots = synth.plan(n_nodes, True)
    (pn, pg), (dn, _), (an, ar), (cn, cg) = (
        spots["pcie"],
        spots["driver"],
        spots["nccl_algo"],
        spots["power_cap"],
    )
    return {
        "pcie": f"GPU {pg} of node {synth.node_name(pn)}",
        "driver": f"node {synth.node_name(dn)}",
        "nccl_algo": f"rank {an * 8 + ar} (node {synth.node_name(an)})",
        "power_cap": f"GPU {cg} of node {synth.node_name(cn)}",
    }


# ---------------------------------------------------------------- launcher


def test_torchrun_variables():
    pl = detect(
        {
            "RANK": "9",
            "WORLD_SIZE": "16",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "8",
            "GROUP_RANK": "1",
            "TORCHELASTIC_RUN_ID": "abc",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500",
        },
        hostname="h1",
    )
    assert (pl.rank, pl.world_size, pl.local_rank, pl.local_world_size, pl.node_index) == (
        9,
        16,
        1,
        8,
        1,
    )
    assert (pl.launcher, pl.node, pl.master_addr, pl.master_port, pl.run_id) == (
        "torchrun",
        "h1",
        "10.0.0.1",
        29500,
        "abc.0",
    )


def test_slurm_openmpi_and_pmi_variables():
    slurm = detect(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_NODEID": "2",
            "SLURMD_NODENAME": "gpu-a17",
            "SLURM_NTASKS_PER_NODE": "4",
            "SLURM_JOB_ID": "77",
        },
        hostname="x",
    )
    assert (
        slurm.launcher,
        slurm.rank,
        slurm.world_size,
        slurm.local_rank,
        slurm.node,
        slurm.node_index,
        slurm.local_world_size,
        slurm.run_id,
    ) == ("slurm", 5, 8, 1, "gpu-a17", 2, 4, "slurm-77.0")
    ompi = detect(
        {
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        },
        hostname="n2",
    )
    assert (ompi.launcher, ompi.rank, ompi.local_rank, ompi.local_world_size, ompi.node) == (
        "openmpi",
        3,
        1,
        2,
        "n2",
    )
    pmi = detect({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0"}, hostname="n3")
    assert (pmi.launcher, pmi.rank, pmi.world_size, pmi.local_rank) == ("pmi", 2, 3, 0)
    assert detect({}, hostname="solo").launcher == "none"


def test_fake_nodes_for_tests():
    pl = detect(
        {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "5", "FORENSICS_FLEET_RANKS_PER_NODE": "2"},
        hostname="vm",
    )
    assert (pl.local_rank, pl.node_index, pl.node, pl.local_world_size) == (1, 2, "vm-node2", 2)
    named = detect(
        {"RANK": "0", "WORLD_SIZE": "1", "FORENSICS_FLEET_NODE": "rack4-n7"}, hostname="vm"
    )
    assert named.node == "rack4-n7"


@pytest.mark.parametrize(
    "env, words",
    [
        ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "$RANK='x'"),
        ({"RANK": "4", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}, "not below the world size"),
        ({"RANK": "1", "WORLD_SIZE": "4"}, "no local rank"),
    ],
)
def test_broken_launcher_environment(env, words):
    with pytest.raises(BadInputError, match=re.escape(words)):
        detect(env, hostname="vm")


def test_assigned_gpu_follows_cuda_visible_devices():
    pl = detect({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, hostname="vm")
    assert assigned_gpu(pl, {"CUDA_VISIBLE_DEVICES": "4,6"})["nvml_index"] == 6
    assert assigned_gpu(pl, {"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"})["uuid"] == "GPU-b"
    assert assigned_gpu(pl, {})["nvml_index"] == 1
    assert "no entry 1" in assigned_gpu(pl, {"CUDA_VISIBLE_DEVICES": "0"})["source"]


# ---------------------------------------------------------------- the rules at fleet size


@PLANTED
def test_planted_outliers_found_and_named_first(planted):
    rep = build(document.load(planted))
    want = _expected_subjects(N_NODES)
    real = rep.real_outliers
    assert [o.subject for o in real[:4]] and {o.subject for o in real[:4]} == set(want.values())
    assert len(real) == 4, [o.summary for o in real[4:10]]
    by_subject = {o.subject: o for o in real}
    assert (
        by_subject[want["driver"]].value == "470.57.02"
        and by_subject[want["driver"]].hypothesis == "driver.version"
    )
    assert (
        by_subject[want["nccl_algo"]].field == "env.NCCL_ALGO"
        and by_subject[want["nccl_algo"]].value == "Ring"
    )
    pcie = by_subject[want["pcie"]]
    assert pcie.field == "pcie_gen_load" and pcie.value == "Gen3" and pcie.peers.startswith("Gen5")
    cap = by_subject[want["power_cap"]]
    assert cap.field == "sw_power_cap_fraction" and cap.value.startswith("100%")
    for subject in want.values():  # the verdict names all four
        assert subject in rep.verdict
    assert rep.counts == {
        "nodes": 1000,
        "gpus": 8000,
        "ranks": 8000,
        "world_size": 8000,
        "gpus_under_load": 8000,
    }


def test_aa_fleet_reports_no_outlier(tmp_path):
    aa = synth.write_fleet(tmp_path / "aa.json", ROOT, N_NODES, 8, plant=False, seed=2)
    rep = build(document.load(aa))
    assert rep.outliers == []
    assert rep.verdict == "No outlier among 1,000 nodes, 8,000 GPUs, 8,000 ranks."
    rules = {p.rule for p in rep.peers}
    assert rules == {"median/MAD"}


def test_power_cap_found_when_peers_sit_at_five_percent(tmp_path):
    path = synth.write_fleet(
        tmp_path / "f.json", ROOT, 200, 8, plant=True, seed=3, peer_power_cap_scale=0.25
    )
    rep = build(document.load(path))
    want = _expected_subjects(200)
    assert {o.subject for o in rep.real_outliers} == set(want.values())
    cap = next(o for o in rep.real_outliers if o.subject == want["power_cap"])
    assert "peers' median 5%" in cap.evidence[0]


def test_few_peers_use_ratio_to_best_and_a_lone_gpu_is_not_judged(tmp_path):
    src = synth.Sources(ROOT)
    recs = list(synth.records(src, 1, 4, plant=False, seed=4))
    slow = recs[2]["bench"]["figures"]["matmul_tflops"]
    slow["value"] = slow["value"] * 0.8
    rep = judge(from_records(recs, [], 4))
    assert [o.subject for o in rep.real_outliers] == ["GPU 2 of node node0000"]
    assert "ratio to best" in rep.real_outliers[0].evidence[0]
    lone = judge(from_records(list(synth.records(src, 1, 1, plant=False)), [], 1))
    assert lone.outliers == [] and any("single GPU" in n for n in lone.notes)


# ---------------------------------------------------------------- the command


@PLANTED
def test_report_cli_html_json_and_prometheus(planted, tmp_path):
    out, prom = tmp_path / "r.html", tmp_path / "fleet.prom"
    r = run_cli("fleet", "report", str(planted), "-o", str(out), "--prom", str(prom))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("4 outliers among 1,000 nodes")
    html = out.read_text()
    cells = re.findall(r'<span class="c s(\d)" title="GPU', html)
    assert html.count('class="tile') == 1000 and len(cells) == 8000
    assert sorted(c for c in cells if c != "0") == ["4", "4"]  # the two GPUs with findings
    assert html.count('class="tile flag"') == 2  # the driver node and the NCCL_ALGO rank's node
    text = prom.read_text()
    assert 'forensics_fleet_outliers{kind="numeric"} 2' in text
    assert 'forensics_fleet_outliers{kind="categorical"} 2' in text
    sample = re.compile(r'^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line
    assert (
        len([ln for ln in text.splitlines() if ln.startswith("forensics_fleet_gpu_score{")]) == 8000
    )
    j = run_cli(
        "fleet",
        "report",
        str(planted),
        "-o",
        str(tmp_path / "r.json"),
        "--fail-on",
        "outlier",
    )
    assert j.returncode == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema"] == "forensics.fleet-report/1" and len(doc["outliers"]) == 4
    assert doc["outliers"][0]["score"] >= doc["outliers"][-1]["score"]


def test_values_are_escaped_in_html(tmp_path):
    src = synth.Sources(ROOT)
    recs = list(synth.records(src, 3, 2, plant=False))
    for r in recs:
        r["node"] = r["node"] + "<script>alert(1)</script>"
    recs[1]["env"]["NCCL_SOCKET_IFNAME"] = '"><img src=x onerror=alert(1)>'
    path = document.write(
        tmp_path / "f.json",
        document.header(world_size=6, launcher="env", run_id="t", gather={}, missing=[]),
        recs,
    )
    r = run_cli("fleet", "report", str(path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "r.html").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda t: t[: len(t) // 2], "truncated"),
        (
            lambda t: t.replace("forensics.fleet/1", "forensics.fleet/9"),
            "newer than this forensics",
        ),
        (lambda t: t.replace("forensics.fleet/1", "acme.fleet/1"), "expected forensics.fleet/1"),
        (lambda t: "", "empty"),
    ],
)
def test_damaged_fleet_file_is_one_line_exit_2(tmp_path, damage, words):
    src = synth.Sources(ROOT)
    good = document.write(
        tmp_path / "g.json",
        document.header(world_size=4, launcher="env", run_id="t", gather={}, missing=[]),
        list(synth.records(src, 2, 2, plant=False)),
    )
    bad = tmp_path / "b.json"
    bad.write_text(damage(good.read_text()))
    r = run_cli("fleet", "report", str(bad), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2
    assert (
        words in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
        and "Traceback" not in r.stderr
    )


def test_pretty_printed_fleet_file_is_read_too(tmp_path):
    src = synth.Sources(ROOT)
    head = document.header(world_size=4, launcher="env", run_id="t", gather={}, missing=[])
    path = tmp_path / "pretty.json"
    path.write_text(
        json.dumps({**head, "records": list(synth.records(src, 2, 2, plant=False))}, indent=2)
    )
    fl = document.load(path)
    assert [r["rank"] for r in fl.records()] == [0, 1, 2, 3]


# ---------------------------------------------------------------- gather bookkeeping


def test_rank_that_said_hello_but_sent_nothing_is_named(tmp_path):
    ch = LocalChannel()
    for rank in (1, 2):
        ch.hello(
            detect({"RANK": str(rank), "WORLD_SIZE": "3", "LOCAL_RANK": "0"}, hostname=f"h{rank}")
        )
    ch.publish(1, {"rank": 1, "world_size": 3, "node": "h1"})
    pl0 = detect({"RANK": "0", "WORLD_SIZE": "3", "LOCAL_RANK": "0"}, hostname="h0")
    opts = Options(only=("host",), gather_timeout_s=0.3)
    rec, got = run_rank(pl0, opts, ch, gather=True)
    assert [r["rank"] for r in got.records] == [0, 1]
    assert [(m["rank"], m["node"]) for m in got.missing] == [(2, "h2")]
    assert got.missing[0]["reason"].startswith("started (pid")
    assert rec["snapshot"]["probes"].keys() == {"host"}


def test_out_dir_records_and_missing_ranks(tmp_path):
    for rank in (0, 2):
        pl = detect({"RANK": str(rank), "WORLD_SIZE": "3", "LOCAL_RANK": "0"}, hostname=f"h{rank}")
        run_rank(pl, Options(only=("host",)), DirChannel(tmp_path, pl.run_id), gather=False)
    assert sorted(p.name for p in tmp_path.glob("rank-*.json")) == [
        "rank-00000.json",
        "rank-00002.json",
    ]
    fl = document.load(tmp_path)
    assert fl.head["missing"] == [
        {
            "rank": 1,
            "node": None,
            "local_rank": None,
            "reason": "wrote no record (and never started)",
        }
    ]
    rep = build(fl)
    assert "1 rank missing" in rep.verdict


# ---------------------------------------------------------------- comparison


def test_compare_fleet_wide_and_few_nodes(tmp_path):
    src = synth.Sources(ROOT)
    base = from_records(synth.records(src, 40, 2, plant=False, seed=5), [], 80)
    same = from_records(synth.records(src, 40, 2, plant=False, seed=5), [], 80)
    assert compare(base, same)["verdict"] == "Nothing changed across the 40 matched nodes."
    assert compare(base, same)["few_nodes"] == [] and compare(base, same)["fleet_wide"] == []
    planted = from_records(synth.records(src, 40, 2, plant=True, seed=5), [], 80)
    c = compare(base, planted)
    few = {(f["field"], tuple(f["nodes"])) for f in c["few_nodes"]}
    spots = synth.plan(40, True, 2)
    assert ("driver", (synth.node_name(spots["driver"][0]),)) in few
    assert ("env.NCCL_ALGO", (synth.node_name(spots["nccl_algo"][0]),)) in few
    assert ("pcie_gen_load", (synth.node_name(spots["pcie"][0]),)) in few
    assert not c["fleet_wide"]
    upgraded = []
    for rec in synth.records(src, 40, 2, plant=False, seed=5):
        if rec["snapshot"]:
            snap = json.loads(json.dumps(rec["snapshot"]))
            snap["probes"]["gpu"]["data"]["driver_version"] = "590.10.01"
            rec["snapshot"] = snap
        upgraded.append(rec)
    wide = compare(base, from_records(upgraded, [], 80))["fleet_wide"]
    assert [(w["field"], w["before"], w["after"], w["share"]) for w in wide] == [
        ("driver", "580.159.04", "590.10.01", 1.0)
    ]


@PLANTED
def test_report_with_a_snapshot_as_baseline(planted, tmp_path):
    base = ROOT / "examples/h200x2/snapshot-all-probes.json"
    assert load_baseline(base).nodes  # a plain snapshot is a one-node fleet
    r = run_cli(
        "fleet",
        "report",
        str(planted),
        "--baseline",
        str(base),
        "-o",
        str(tmp_path / "r.md"),
    )
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "r.md").read_text()
    assert "### Against the baseline" in md


def test_diff_of_two_fleet_files(tmp_path):
    a = synth.write_fleet(tmp_path / "a.json", ROOT, 30, 8, plant=False, seed=7)
    b = synth.write_fleet(tmp_path / "b.json", ROOT, 30, 8, plant=True, seed=7)
    r = run_cli("diff", str(a), str(b), "-o", str(tmp_path / "d.json"), "--fail-on", "any")
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith(
        "Changed on a few nodes: NVIDIA driver 580.159.04 -> 470.57.02 on node0016"
    )
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["schema"] == "forensics.fleet-diff/1" and doc["fleet_wide"] == []
    fields = {f["field"]: f for f in doc["few_nodes"]}
    assert (
        fields["env.NCCL_ALGO"]["before"] == "unset" and fields["env.NCCL_ALGO"]["after"] == "Ring"
    )
    assert fields["pcie_gen_load"]["units"] == ["GPU 3 of node node0012: 5 -> 3"]
    assert fields["sw_power_cap_fraction"]["after"] == "1"
    same = run_cli("diff", str(a), str(a), "-o", str(tmp_path / "same.html"))
    assert same.returncode == 0 and same.stdout.startswith(
        "Nothing changed across the 30 matched nodes."
    )


@pytest.mark.parametrize(
    "env, words",
    [
        ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "$RANK='x': expected a whole number"),
        ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "no MASTER_ADDR/MASTER_PORT"),
    ],
)
def test_snapshot_bad_launcher_environment_is_one_line_exit_2(tmp_path, env, words):
    r = run_cli("fleet", "snapshot", "--probe", "host", cwd=tmp_path, env=env)
    assert r.returncode == 2
    assert (
        words in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
        and "Traceback" not in r.stderr
    )


def test_report_of_a_missing_file_or_an_empty_folder(tmp_path):
    r = run_cli("fleet", "report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "no such file or folder" in r.stderr
    r = run_cli("fleet", "report", str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "no rank-*.json records" in r.stderr
