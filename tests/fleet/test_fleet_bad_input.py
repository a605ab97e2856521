"""Fleet mode fed what a hostile or unlucky user gives it (issue 17, second fresh-user pass): secrets
in records and baselines, broken launcher variables, duplicated ranks and hostnames, numbers that are
not numbers, fleets without records, mixed folders. Records are the synthetic fleet's, built from
real H200 readings (forensics.fleet.synth), and real snapshots of examples/h200x2."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from forensics.fleet import document, synth
from tests.conftest import ROOT, run_cli

SNAPSHOT = ROOT / "examples/h200x2/snapshot-all-probes.json"
TOKEN = "ghp_" + "Zq7" * 12  # the shape of a GitHub token (redact.py's token patterns)
URL_SECRET = "hunter2pass"


@pytest.fixture(scope="module")
def src():
    return synth.Sources(ROOT)


def _write(path: Path, recs: list[dict], world: int | None = None, missing=()) -> Path:
    head = document.header(
        world_size=world or max([r["world_size"] for r in recs] or [1]),
        launcher="torchrun",
        run_id="t",
        gather={"channel": "test"},
        missing=list(missing),
    )
    return document.write(path, head, recs)


def _outputs(tmp_path: Path, source: Path, *extra: str) -> str:
    """Every output of 'fleet report' (HTML, Markdown, JSON, Prometheus, terminal) as one text."""
    texts = []
    for name in ("r.html", "r.md", "r.json"):
        r = run_cli(
            "fleet",
            "report",
            str(source),
            "-o",
            str(tmp_path / name),
            "--prom",
            str(tmp_path / "r.prom"),
            *extra,
        )
        assert r.returncode == 0, r.stderr
        texts += [
            r.stdout,
            r.stderr,
            (tmp_path / name).read_text(),
            (tmp_path / "r.prom").read_text(),
        ]
    return "\n".join(texts)


# ---------------------------------------------------------------- secrets


def test_secrets_a_record_carries_are_redacted_in_every_output(tmp_path, src):
    """A record that says it was redacted but was not (another writer, an older forensics): its
    NCCL variable, its error text and a missing rank's reason still never reach an output."""
    recs = list(synth.records(src, 2, 2, plant=False))
    recs[1]["env"]["NCCL_NET_TOKEN"] = TOKEN
    recs[1]["env"]["TORCH_STORE_URL"] = f"https://bob:{URL_SECRET}@store.example.com/x"
    recs[2]["errors"] = [
        {"where": "bench", "error": f"RuntimeError: login with --token {TOKEN} failed"}
    ]
    path = _write(
        tmp_path / "f.json",
        recs,
        5,
        missing=[
            {"rank": 4, "node": "n9", "local_rank": 0, "reason": f"died; cmd had token={TOKEN}"}
        ],
    )
    assert TOKEN in path.read_text()
    out = _outputs(tmp_path, path)
    assert TOKEN not in out and URL_SECRET not in out
    assert (
        "NCCL_NET_TOKEN" in out and "<redacted>" in out
    )  # the odd rank is still named, its value not


def test_a_no_redact_snapshot_as_baseline_or_diff_side_leaks_nothing(tmp_path, src):
    snap = json.loads(SNAPSHOT.read_text())
    snap["redaction"] = "off (--no-redact)"
    snap["probes"]["nccl_env"]["data"]["parent"]["env"]["NCCL_NET_TOKEN"] = TOKEN
    snap["probes"]["nccl_env"]["data"]["parent"]["env"]["TORCH_STORE_URL"] = (
        f"https://bob:{URL_SECRET}@h/x"
    )
    base = tmp_path / "base.json"
    base.write_text(json.dumps(snap))
    fleet = synth.write_fleet(tmp_path / "f.json", ROOT, 3, 2, plant=False)
    out = _outputs(tmp_path, fleet, "--baseline", str(base))
    for a, b in ((base, fleet), (fleet, base)):
        for name in ("d.html", "d.md", "d.json"):
            r = run_cli("diff", str(a), str(b), "-o", str(tmp_path / name))
            assert r.returncode == 0, r.stderr
            out += r.stdout + r.stderr + (tmp_path / name).read_text()
    assert TOKEN not in out and URL_SECRET not in out
    assert "NCCL_NET_TOKEN" in out  # the change itself is reported


def test_terminal_summary_shows_each_outliers_hypothesis(tmp_path, src):
    """rich took '[nccl.env]' for markup and printed nothing in its place."""
    recs = list(synth.records(src, 3, 2, plant=False))
    recs[3]["env"]["NCCL_ALGO"] = "Ring"
    r = run_cli(
        "fleet", "report", str(_write(tmp_path / "f.json", recs)), "-o", str(tmp_path / "r.html")
    )
    assert r.returncode == 0, r.stderr
    assert "1. [nccl.env] rank 3 (node node0001): NCCL_ALGO Ring" in r.stdout.replace("\n", " ")


# ---------------------------------------------------------------- launcher variables


@pytest.mark.parametrize(
    "env, words",
    [
        ({"WORLD_SIZE": "4"}, "$WORLD_SIZE='4' is set but $RANK is not"),
        ({"RANK": "3"}, "$RANK='3' is set but $WORLD_SIZE is not"),
        (
            {"RANK": "5", "WORLD_SIZE": "4", "LOCAL_RANK": "0"},
            "rank 5 is not below the world size 4",
        ),
    ],
)
def test_half_a_launcher_environment_is_refused_not_taken_for_one_process(tmp_path, env, words):
    """WORLD_SIZE=4 without RANK used to write a one-rank fleet, each of the 4 processes its own."""
    r = run_cli("fleet", "snapshot", "--probe", "host", cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stdout
    assert (
        words in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
        and "Traceback" not in r.stderr
    )
    assert not list(tmp_path.glob("forensics-fleet*.json"))


@pytest.mark.parametrize("env", [{"RANK": "0"}, {"WORLD_SIZE": "1"}])
def test_rank_0_or_world_size_1_alone_is_a_single_process(tmp_path, env):
    r = run_cli("fleet", "snapshot", "--probe", "host", "-q", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "forensics-fleet.json"


# ---------------------------------------------------------------- numbers that are not numbers


def test_an_infinite_bench_figure_is_left_out_not_taken_as_the_best_peer(tmp_path, src):
    """JSON reads 1e999 as infinity. Among 4 peers (ratio to best) it was the best, the margin
    became inf - inf, and no GPU could be flagged any more: the one at half speed went unreported.
    It is now left out, and the report says so."""
    recs = list(synth.records(src, 1, 4, plant=False, seed=4))
    recs[3]["bench"]["figures"]["matmul_tflops"]["value"] /= 2
    path = _write(tmp_path / "f.json", recs)
    text = path.read_text()
    rec1 = json.dumps(recs[1], ensure_ascii=False)
    value = json.dumps(recs[1]["bench"]["figures"]["matmul_tflops"]["value"])
    assert rec1 in text and value in rec1
    path.write_text(
        text.replace(rec1, rec1.replace(value, "1e999")).replace(
            json.dumps(recs[2]["bench"]["figures"]["h2d_gbps"]["value"]), "NaN"
        )
    )
    r = run_cli(
        "fleet",
        "report",
        str(path),
        "-o",
        str(tmp_path / "r.json"),
        "--prom",
        str(tmp_path / "r.prom"),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(o["subject"], o["field"]) for o in doc["outliers"]] == [
        ("GPU 3 of node node0000", "matmul_tflops")
    ]
    assert any(
        "not finite numbers" in n
        and "matmul (bf16 8192^3) x1" in n
        and "host-to-device copy x1" in n
        for n in doc["notes"]
    )
    peers = {p["metric"]: p for p in doc["peers"]}
    assert peers["matmul_tflops"]["n"] == 3 and peers["matmul_tflops"]["best"] < 2000
    assert "nan" not in (tmp_path / "r.prom").read_text().lower()


# ---------------------------------------------------------------- duplicated ranks and node names


def test_two_records_of_one_rank_are_named_and_the_first_is_used(tmp_path, src):
    recs = list(synth.records(src, 4, 2, plant=False))
    extra = copy.deepcopy(recs[3])
    extra["env"]["NCCL_ALGO"] = "Ring"  # the later record of rank 3 is not mixed into the judgement
    r = run_cli(
        "fleet",
        "report",
        str(_write(tmp_path / "f.json", recs + [extra])),
        "-o",
        str(tmp_path / "r.json"),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["ranks"] == 8 and doc["outliers"] == []
    assert any(
        n.startswith("1 rank(s) have more than one record") and "rank 3 x2" in n
        for n in doc["notes"]
    )


def test_two_machines_with_one_hostname_are_named_not_silently_merged(tmp_path, src):
    """node0001's ranks report the name node0000 (containers with one hostname); its snapshot
    (another driver) used to overwrite node0000's without a word."""
    recs = list(synth.records(src, 3, 2, plant=False))
    for rec in recs:
        if rec["node"] == "node0001":
            rec["node"] = "node0000"
            if rec["snapshot"]:
                rec["snapshot"] = copy.deepcopy(rec["snapshot"])
                rec["snapshot"]["probes"]["gpu"]["data"]["driver_version"] = src.other_driver
    r = run_cli(
        "fleet", "report", str(_write(tmp_path / "f.json", recs)), "-o", str(tmp_path / "r.json")
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["nodes"] == 2 and doc["counts"]["ranks"] == 6
    assert doc["outliers"] == []  # node0000 keeps its own (first) snapshot: no driver 470 on it
    note = next(n for n in doc["notes"] if "shared by several machines" in n)
    assert (
        "node node0000: ranks 0 and 2 are both local rank 0" in note
        and "FORENSICS_FLEET_NODE" in note
    )
    assert "shared by several machines" in r.stdout.replace("\n", " ")


def test_fleet_snapshot_warns_when_two_machines_share_a_node_name(tmp_path):
    """Two processes, each local rank 0 of a machine called 'same', meeting in an --out-dir folder."""
    shared = tmp_path / "shared"
    shared.mkdir()
    env = {"WORLD_SIZE": "2", "LOCAL_RANK": "0", "FORENSICS_FLEET_NODE": "same"}
    one = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        "--out-dir",
        str(shared),
        cwd=tmp_path,
        env={**env, "RANK": "1"},
    )
    assert one.returncode == 0, one.stderr
    zero = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        "--out-dir",
        str(shared),
        "-o",
        str(tmp_path / "f.json"),
        "--gather-timeout",
        "30",
        cwd=tmp_path,
        env={**env, "RANK": "0"},
    )
    assert zero.returncode == 0, zero.stderr
    assert "gathered 2 of 2 ranks from 1 node(s)" in zero.stdout
    assert (
        "warning: node same: ranks 0 and 1 are both local rank 0: two machines share the name; "
        "set FORENSICS_FLEET_NODE=NAME on each"
    ) in zero.stderr


# ---------------------------------------------------------------- files of the wrong kind


def test_out_dir_folder_with_a_stray_snapshot_and_foreign_json_reports_the_rest(tmp_path, src):
    """A snapshot copied in as rank-00009.json, a foreign JSON and a fleet file beside the records:
    the four records are judged and the two stray rank files are named (one used to stop it all)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    for rec in synth.records(src, 2, 2, plant=False):
        (folder / f"rank-{rec['rank']:05d}.json").write_text(json.dumps(rec))
    (folder / "rank-00009.json").write_text(SNAPSHOT.read_text())
    (folder / "rank-00010.json").write_text('{"foo": 1}')
    synth.write_fleet(folder / "old-fleet.json", ROOT, 2, 2, plant=False)
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["ranks"] == 4 and doc["missing"] == []
    note = doc["notes"][0]
    assert note.startswith("not read from the folder: ")
    assert "rank-00009.json: schema is 'forensics.snapshot/1', not a fleet record" in note
    assert "rank-00010.json: record has no valid 'rank'" in note


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda d: (d / "rank-00000.json").write_text(SNAPSHOT.read_text()), "not a fleet record"),
        (
            lambda d: synth.write_fleet(d / "f.json", ROOT, 1, 2, plant=False),
            "it holds f.json, a fleet file: give that",
        ),
    ],
)
def test_folder_without_any_record_is_one_line_exit_2(tmp_path, make, words):
    folder = tmp_path / "d"
    folder.mkdir()
    make(folder)
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (
        r.stderr
    )


def test_newer_or_foreign_record_schema_is_refused(tmp_path, src):
    path = _write(tmp_path / "f.json", list(synth.records(src, 1, 2, plant=False)))
    newer = tmp_path / "newer.json"
    newer.write_text(
        path.read_text().replace("forensics.fleet-record/1", "forensics.fleet-record/7")
    )
    r = run_cli("fleet", "report", str(newer), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2, r.stdout
    assert "line 2: schema forensics.fleet-record/7 is newer than this forensics" in r.stderr


@pytest.mark.parametrize(
    "cmd", [("fleet", "report", "{fleet}", "--baseline", "{bench}"), ("diff", "{bench}", "{fleet}")]
)
def test_a_bench_file_as_baseline_says_what_is_expected(tmp_path, cmd):
    fleet = synth.write_fleet(tmp_path / "f.json", ROOT, 2, 2, plant=False)
    bench = ROOT / "examples/h200x2/bench/a1.json"
    args = [a.format(fleet=fleet, bench=bench) for a in cmd]
    r = run_cli(*args, "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (
        "schema is 'forensics.bench/1'" in r.stderr
        and "must be a fleet file or folder, or a snapshot" in r.stderr
    )


def test_fleet_report_of_a_snapshot_points_at_diff(tmp_path):
    r = run_cli("fleet", "report", str(SNAPSHOT), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "a snapshot of one machine, not a fleet file" in r.stderr


# ---------------------------------------------------------------- fleets without records, node lists


def _empty_fleet(path: Path, world: int) -> Path:
    return _write(
        path,
        [],
        world,
        missing=[
            {
                "rank": i,
                "node": None,
                "local_rank": None,
                "reason": "never reached the gather within 300 s",
            }
            for i in range(world)
        ],
    )


def test_a_fleet_without_records_is_inconclusive_everywhere(tmp_path):
    """Every rank missing: the report (exit 3), and as diff side or baseline it used to read as
    'Changed 4 node(s) added, 0 removed.' with exit 0."""
    empty = _empty_fleet(tmp_path / "empty.json", 8)
    fleet = synth.write_fleet(tmp_path / "f.json", ROOT, 2, 2, plant=False)
    for args in (
        ("fleet", "report", str(empty)),
        ("diff", str(empty), str(fleet)),
        ("diff", str(fleet), str(empty)),
        ("fleet", "report", str(fleet), "--baseline", str(empty)),
    ):
        r = run_cli(*args, "-o", str(tmp_path / "r.html"))
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert (
            "no rank record" in r.stderr
            and len(r.stderr.strip().splitlines()) == 1
            and "Traceback" not in r.stderr
        )


def test_diff_names_the_nodes_on_one_side_only(tmp_path, src):
    a = _write(tmp_path / "a.json", list(synth.records(src, 4, 2, plant=False, seed=3)))
    b = _write(tmp_path / "b.json", list(synth.records(src, 3, 2, plant=False, seed=3)))
    r = run_cli("diff", str(a), str(b), "-o", str(tmp_path / "d.json"))
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout.splitlines()[0]
        == "1 node only before (node0003); nothing changed across the 3 matched nodes."
    )


def test_report_to_stdout_with_dash(tmp_path, src):
    """'-o -' wrote a file named '-'; it is stdout (JSON by default), the verdict on stderr."""
    path = _write(tmp_path / "f.json", list(synth.records(src, 1, 2, plant=False)))
    r = run_cli("fleet", "report", str(path), "-o", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "forensics.fleet-report/1"
    assert r.stderr.startswith("No outlier among 1 node, 2 GPUs, 2 ranks.")
    md = run_cli("fleet", "report", str(path), "-o", "-", "--format", "md", "-q", cwd=tmp_path)
    assert md.returncode == 0 and md.stderr == "" and "1 node, 2 GPUs (" in md.stdout
    assert not (tmp_path / "-").exists()


# ---------------------------------------------------------------- a reused --out-dir folder


def _dir_run(folder: Path, run: str, world: int, ranks, gather: bool = False):
    from forensics.fleet.gather import DirChannel
    from forensics.fleet.launcher import detect
    from forensics.fleet.snapshot import Options, run_rank

    got = None
    for rank in ranks:
        pl = detect(
            {
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": "0",
                "TORCHELASTIC_RUN_ID": run,
            },
            hostname=f"h{rank}",
        )
        _, g = run_rank(
            pl,
            Options(only=("host",), gather_timeout_s=0.5),
            DirChannel(folder, pl.run_id),
            gather=gather and rank == 0,
        )
        got = got or g
    return got


def _age(folder: Path, run: str) -> None:
    for p in folder.glob("rank-*.json"):
        rec = json.loads(p.read_text())
        if rec["run_id"].startswith(run):
            p.write_text(json.dumps({**rec, "created": "2026-01-01T00:00:00Z"}))


def test_a_folder_holding_two_runs_reports_the_newest_and_names_the_other(tmp_path):
    """Run a (4 ranks) then run b (2 ranks) into one folder: b overwrote ranks 0-1, a's ranks 2-3
    stayed, and the report used to judge 4 ranks of two different jobs as one fleet."""
    _dir_run(tmp_path, "a", 4, range(4))
    _age(tmp_path, "a")
    _dir_run(tmp_path, "b", 2, range(2))
    r = run_cli("fleet", "report", str(tmp_path), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["ranks"] == 2 and doc["counts"]["world_size"] == 2 and doc["missing"] == []
    assert (
        "2 record(s) of another run (run id 'a.0', world size 4, ranks 2, 3): the folder holds 2 runs and "
        "the newest ('b.0') is reported; give each run a fresh --out-dir"
    ) in doc["notes"][0]


def test_gather_from_a_reused_folder_does_not_take_an_earlier_runs_record(tmp_path):
    _dir_run(tmp_path, "a", 3, range(3))
    got = _dir_run(tmp_path, "b", 3, (2, 0), gather=True)  # rank 1 of run b never starts
    assert [r["rank"] for r in got.records] == [0, 2]
    assert [m["rank"] for m in got.missing] == [1]


# ---------------------------------------------------------------- sizes beyond any job


def test_a_world_size_beyond_any_job_is_bad_input_not_a_hang(tmp_path, src):
    """An --out-dir record saying world size 10**12 had the reader list a trillion missing ranks."""
    folder = tmp_path / "d"
    folder.mkdir()
    rec = next(synth.records(src, 1, 1, plant=False))
    (folder / "rank-00000.json").write_text(json.dumps({**rec, "world_size": 10**12}))
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.html"), timeout=60)
    assert r.returncode == 2 and "world size 1,000,000,000,000 is beyond any job" in r.stderr, (
        r.stderr
    )
    path = _write(tmp_path / "f.json", [rec], 10**12)
    r = run_cli("fleet", "report", str(path), "-o", str(tmp_path / "r.html"), timeout=60)
    assert r.returncode == 2 and "beyond any job" in r.stderr, r.stderr
    r = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        cwd=tmp_path,
        env={"RANK": "0", "WORLD_SIZE": str(10**11)},
    )
    assert r.returncode == 2 and "the launcher environment is broken" in r.stderr, r.stderr


def test_a_record_whose_rank_is_not_below_its_world_size_is_damaged(tmp_path, src):
    recs = list(synth.records(src, 1, 2, plant=False))
    recs[1]["rank"] = 7
    r = run_cli(
        "fleet", "report", str(_write(tmp_path / "f.json", recs)), "-o", str(tmp_path / "r.html")
    )
    assert r.returncode == 2 and "rank 7 is not below its world size 2" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda head, recs: recs[1].update(errors=1), "rank 1's 'errors' must be a list or null"),
        (
            lambda head, recs: recs[0]["bench"].update(figures="x"),
            "rank 0's 'bench.figures' must be a mapping or null",
        ),
        (
            lambda head, recs: head.update(missing=["rank 3"]),
            "missing[0] must be a mapping with a whole 'rank'",
        ),
    ],
)
def test_fields_of_the_wrong_type_are_one_line_exit_2_not_an_internal_error(
    tmp_path, src, damage, words
):
    """These were exit 4 (AttributeError/TypeError) in report and diff alike."""
    recs = list(synth.records(src, 2, 2, plant=False))
    head = document.header(world_size=4, launcher="torchrun", run_id="t", gather={}, missing=[])
    damage(head, recs)
    path = tmp_path / "f.json"
    path.write_text(json.dumps({**head, "records": recs}))
    other = synth.write_fleet(tmp_path / "b.json", ROOT, 2, 2, plant=False)
    for args in (("fleet", "report", str(path)), ("diff", str(path), str(other))):
        r = run_cli(*args, "-o", str(tmp_path / "r.html"))
        assert (
            r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
        ), r.stderr


def test_a_secret_in_the_label_is_redacted_in_the_fleet_file(tmp_path):
    """The node snapshot redacted --label; the fleet file's head and the rank record kept it."""
    r = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        "--label",
        f"run <b>7</b> token={TOKEN}",
        "-q",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "forensics-fleet.json").read_text()
    assert TOKEN not in text
    head = json.loads(text.splitlines()[0] + "]}")
    assert head["label"] == "run <b>7</b> token=<redacted>"
    kept = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        "--label",
        f"token={TOKEN}",
        "--no-redact",
        "-o",
        str(tmp_path / "k.json"),
        cwd=tmp_path,
    )
    assert (
        kept.returncode == 0 and TOKEN in (tmp_path / "k.json").read_text()
    )  # --no-redact is explicit


# ---------------------------------------------------------------- outputs over inputs


def test_an_output_over_an_input_is_refused_and_the_fleet_file_kept(tmp_path, src):
    """'fleet report f.json -o f.json' replaced the user's fleet file by its report."""
    fleet = synth.write_fleet(tmp_path / "f.json", ROOT, 2, 2, plant=False)
    base = synth.write_fleet(tmp_path / "b.json", ROOT, 2, 2, plant=False, seed=9)
    folder = tmp_path / "d"
    folder.mkdir()
    rec = next(synth.records(src, 1, 1, plant=False))
    (folder / "rank-00000.json").write_text(json.dumps(rec))
    before = {p: p.read_bytes() for p in (fleet, base, folder / "rank-00000.json")}
    for args in (
        ("fleet", "report", str(fleet), "-o", str(fleet)),
        (
            "fleet",
            "report",
            str(fleet),
            "--baseline",
            str(base),
            "-o",
            str(tmp_path / "." / "b.json"),
        ),
        ("fleet", "report", str(folder), "-o", str(folder / "rank-00000.json")),
        ("diff", str(base), str(fleet), "-o", str(fleet)),
    ):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.stdout)
        assert "is one of the inputs" in r.stderr and len(r.stderr.strip().splitlines()) == 1, (
            r.stderr
        )
    assert before == {p: p.read_bytes() for p in before}


def test_fleet_snapshot_refuses_a_fleet_file_named_like_a_record_of_its_out_dir(tmp_path):
    (tmp_path / "d").mkdir()
    r = run_cli(
        "fleet",
        "snapshot",
        "--probe",
        "host",
        "--out-dir",
        "d",
        "-o",
        "d/rank-00000.json",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "is a rank record's name in --out-dir d" in r.stderr, r.stderr
    assert not list((tmp_path / "d").glob("rank-*.json"))


# ---------------------------------------------------------------- compressed and damaged streams


def test_a_gzip_compressed_fleet_file_is_read_by_report_and_diff(tmp_path):
    import gzip

    plain = synth.write_fleet(tmp_path / "f.json", ROOT, 12, 8, plant=True, seed=1)
    aa = synth.write_fleet(tmp_path / "aa.json", ROOT, 12, 8, plant=False, seed=1)
    zipped = tmp_path / "f.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    a = run_cli("fleet", "report", str(plain), "-o", str(tmp_path / "a.json"))
    b = run_cli("fleet", "report", str(zipped), "-o", str(tmp_path / "b.json"))
    assert a.returncode == b.returncode == 0, b.stderr
    ja, jb = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert jb["verdict"] == ja["verdict"] and len(jb["outliers"]) == 4
    d = run_cli("diff", str(aa), str(zipped), "-o", str(tmp_path / "d.json"))
    assert d.returncode == 0 and d.stdout.startswith("Changed on a few nodes: NVIDIA driver"), (
        d.stderr
    )
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(zipped.read_bytes()[: zipped.stat().st_size // 2])
    r = run_cli("fleet", "report", str(cut), "-o", str(tmp_path / "c.html"))
    assert (
        r.returncode == 2
        and "the file is truncated" in r.stderr
        and len(r.stderr.strip().splitlines()) == 1
    )


def test_bytes_that_are_not_text_midway_are_one_line_exit_2(tmp_path):
    """The first lines were fine, then binary: UnicodeDecodeError was an internal error (exit 4)."""
    path = synth.write_fleet(tmp_path / "f.json", ROOT, 30, 8, plant=False)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:100]) + bytes(range(128, 256)) * 20 + b"\n]}\n")
    r = run_cli("fleet", "report", str(path), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2, r.stderr
    assert "not UTF-8 text after line" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_control_characters_in_records_do_not_reach_the_terminal(tmp_path, src):
    """A record's node name or variable carrying escape sequences (set the title, clear the screen)
    was printed as is by fleet report's notes and by fleet diff."""
    recs = list(synth.records(src, 3, 2, plant=False))
    for rec in recs:
        if rec["node"] == "node0001":
            rec["node"] = "evil\x1b[2J\x1b]0;owned\x07"
    recs[5]["env"]["NCCL_ALGO"] = "Ring\x1b]0;owned\x07"
    recs[2]["errors"] = [{"where": "bench", "error": "boom\x1b[2J"}]
    path = _write(tmp_path / "f.json", recs)
    other = _write(tmp_path / "o.json", list(synth.records(src, 3, 2, plant=False)))
    for args in (
        ("fleet", "report", str(path), "-o", str(tmp_path / "r.html")),
        ("fleet", "report", str(path), "-o", "-"),
        ("diff", str(other), str(path), "-o", str(tmp_path / "d.html")),
    ):
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
        shown = r.stderr + (r.stdout if "-" not in args else "")
        assert "\x1b" not in shown and "\x07" not in shown, (args, shown)
        assert "owned" in shown or "boom" in shown  # the text is still there, made harmless


def test_out_dir_markers_of_a_node_named_with_glob_characters_count_only_that_node(tmp_path):
    from forensics.fleet.gather import DirChannel

    ch = DirChannel(tmp_path, "r")
    for rank, node in ((0, "gpu1"), (1, "gpu2"), (2, "gpu[12]")):
        ch.mark(f"node/{node}/ready", rank)
    import time

    now = time.monotonic()  # wait() with a deadline already passed: one look at the markers
    assert not ch.wait(
        "node/gpu*/ready", 1, now
    )  # matched gpu1's and gpu2's markers: 'ready' before its snapshot
    assert ch.wait("node/gpu[12]/ready", 1, now) and not ch.wait("node/gpu[12]/ready", 2, now)
    assert ch.wait("node/gpu1/ready", 1, now) and not ch.wait("node/gpu1/ready", 2, now)


def test_a_rank_listed_missing_but_present_is_not_counted_missing(tmp_path, src):
    """A head naming rank 1 missing next to rank 1's record (files merged by hand)."""
    recs = list(synth.records(src, 1, 2, plant=False))
    path = _write(
        tmp_path / "f.json",
        recs,
        3,
        missing=[
            {
                "rank": 1,
                "node": "node0000",
                "local_rank": 1,
                "reason": "never reached the gather within 300 s",
            },
            {
                "rank": 2,
                "node": None,
                "local_rank": None,
                "reason": "never reached the gather within 300 s",
            },
        ],
    )
    r = run_cli("fleet", "report", str(path), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [m["rank"] for m in doc["missing"]] == [2] and doc["verdict"].endswith(
        "; 1 rank missing."
    )
