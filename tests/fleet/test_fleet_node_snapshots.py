"""``fleet report`` and ``diff`` on plain node snapshots (``srun forensics snapshot -o snaps/%N.json``):
a folder, a list of files, gzip and YAML, a damaged file named and skipped, nodes missing (--expect-nodes,
--hostfile), two files of one hostname, and the diff of two folders. The snapshots are built from the
real H200 snapshots in examples/ (forensics.fleet.synth.write_node_snapshots)."""

from __future__ import annotations

import gzip
import html
import json
import shutil
from pathlib import Path

import pytest

from forensics.docfile import dumps
from forensics.fleet import nodes, synth
from tests.conftest import ROOT, run_cli

N = 12
SPOTS = synth.plan(N, True, 8)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("snaps") / "planted"
    synth.write_node_snapshots(folder, ROOT, N, 8, plant=True, seed=4)
    return folder


def _report(tmp_path: Path, *args: str) -> tuple:
    out = tmp_path / "r.json"
    r = run_cli("fleet", "report", *args, "-o", str(out))
    return r, (json.loads(out.read_text()) if out.exists() else None)


def _subjects(doc) -> set[str]:
    return {o["subject"] for o in doc["outliers"] if o["kind"] != "mixed"}


def test_a_folder_of_node_snapshots_is_a_fleet_named_by_hostname(planted, tmp_path):
    r, doc = _report(tmp_path, str(planted))
    assert r.returncode == 0, r.stderr
    assert doc["unit"] == "node snapshot"
    assert doc["counts"]["nodes"] == N and doc["counts"]["gpus"] == N * 8 and doc["missing"] == []
    (pn, pg), (dn, _), (an, _), (cn, cg) = (
        SPOTS["pcie"],
        SPOTS["driver"],
        SPOTS["nccl_algo"],
        SPOTS["power_cap"],
    )
    assert _subjects(doc) == {
        f"GPU {pg} of node {synth.node_name(pn)}",
        f"node {synth.node_name(dn)}",
        f"node {synth.node_name(an)}",
        f"GPU {cg} of node {synth.node_name(cn)}",
    }
    assert r.stdout.startswith(
        f"4 outliers among {N} nodes, {N * 8} GPUs: "
    )  # no "ranks" for node snapshots
    algo = next(o for o in doc["outliers"] if o["field"] == "env.NCCL_ALGO")
    assert (
        algo["summary"]
        == f"node {synth.node_name(an)}: NCCL_ALGO Ring (the other {N - 1} nodes: unset)"
    )
    assert doc["notes"][0] == (
        f"read {N} node snapshots from {planted}; a node that wrote no snapshot cannot be "
        "named without --expect-nodes N or --hostfile FILE"
    )


def test_a_list_of_files_in_json_yaml_and_gzip(planted, tmp_path):
    files = sorted(planted.glob("*.json"))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    given = []
    for i, f in enumerate(files):
        snap = json.loads(f.read_text())
        if i % 3 == 0:
            path = mixed / f"{f.stem}.yaml"
            path.write_text(dumps(snap, path))
        elif i % 3 == 1:
            path = mixed / f"{f.stem}.json.gz"
            path.write_bytes(gzip.compress(f.read_bytes()))
        else:
            path = mixed / f.name
            shutil.copy(f, path)
        given.append(str(path))
    r, doc = _report(tmp_path, *given)
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["nodes"] == N and len(_subjects(doc)) == 4
    assert sorted(row["node"] for row in doc["heat"]) == sorted(
        {synth.node_name(SPOTS[k][0]) for k in ("pcie", "driver", "nccl_algo", "power_cap")}
    )
    gz_only = tmp_path / "gz"
    synth.write_node_snapshots(gz_only, ROOT, N, 8, plant=True, seed=4, suffix=".json.gz")
    r2, doc2 = _report(tmp_path, str(gz_only))
    assert r2.returncode == 0, r2.stderr
    assert doc2["verdict"] == doc["verdict"]


def test_a_damaged_file_is_named_and_skipped(planted, tmp_path):
    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    cut = folder / "node0003.json"
    cut.write_text(cut.read_text()[:5000])  # copied while srun was still writing it
    (folder / "notes.json").write_text('{"owner": "ops"}')  # a foreign JSON beside the snapshots
    r, doc = _report(tmp_path, str(folder))
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["nodes"] == N - 1 and doc["counts"]["world_size"] == N + 1
    missing = {m["node"]: m["reason"] for m in doc["missing"]}
    assert set(missing) == {"node0003", "notes"}
    assert missing["node0003"].startswith(
        f"its snapshot was not read: {cut}: invalid JSON at line "
    )
    assert missing["notes"].startswith(f"its snapshot was not read: {folder / 'notes.json'}: ")
    assert "2 nodes missing (node0003, notes)" in doc["verdict"]
    md = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.md"))
    assert md.returncode == 0 and "### Missing nodes (2)" in (tmp_path / "r.md").read_text()
    assert f"{N - 1} of {N + 1} node snapshots read" in (tmp_path / "r.md").read_text()


def test_a_broken_link_among_the_snapshots_is_a_missing_node_not_dropped(planted, tmp_path):
    # a node's file linked from a scratch folder that was cleaned, or two links pointing at each other:
    # the node is named among the missing with the reason, not left out of the count unseen
    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    (folder / "node0100.json").symlink_to(tmp_path / "scratch" / "node0100.json")
    (folder / "node0101.json").symlink_to(folder / "node0101.json")
    r, doc = _report(tmp_path, str(folder))
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["nodes"] == N and doc["counts"]["world_size"] == N + 2
    missing = {m["node"]: m["reason"] for m in doc["missing"]}
    assert (
        missing["node0100"]
        == f"its snapshot was not read: {folder / 'node0100.json'}: no such file; give the "
        "path of a snapshot written by forensics"
    )
    assert missing["node0101"] == (
        f"its snapshot was not read: {folder / 'node0101.json'}: cannot read "
        "(Too many levels of symbolic links)"
    )
    assert "2 nodes missing (node0100, node0101)" in r.stdout.replace("\n", " ")


def test_no_readable_file_is_one_line_exit_2(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    (folder / "a.json").write_text('{"schema": "forensics.snapshot/1", "probes": ')
    (folder / "b.json").write_text("")
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.html"))
    assert (
        r.returncode == 2
        and len(r.stderr.strip().splitlines()) == 1
        and "Traceback" not in r.stderr
    ), r.stderr
    assert "none of the 2 files is a readable node snapshot" in r.stderr
    r = run_cli(
        "fleet",
        "report",
        str(folder / "a.json"),
        str(tmp_path / "nope.json"),
        "-o",
        str(tmp_path / "r.html"),
    )
    assert r.returncode == 2 and "nope.json: no such file or folder" in r.stderr


def test_missing_nodes_by_count_and_by_hostfile(planted, tmp_path):
    r, doc = _report(tmp_path, str(planted), "--expect-nodes", str(N + 2))
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["world_size"] == N + 2 and len(doc["missing"]) == 2
    assert all(
        m["reason"] == f"--expect-nodes {N + 2}: no snapshot for this node" for m in doc["missing"]
    )
    assert doc["verdict"].endswith("; 2 nodes missing.")
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "# scontrol show hostnames\n"
        + "\n".join(f"{synth.node_name(i)}.cluster slots=8" for i in range(N))
        + "\ngpu-x17\ngpu-x18\n"
    )
    r, doc = _report(tmp_path, str(planted), "--hostfile", str(hosts))
    assert r.returncode == 0, r.stderr
    assert [(m["node"], m["reason"]) for m in doc["missing"]] == [
        ("gpu-x17", "in the hostfile, but no snapshot of it was given"),
        ("gpu-x18", "in the hostfile, but no snapshot of it was given"),
    ]
    assert "2 nodes missing (gpu-x17, gpu-x18)" in doc["verdict"]


def test_a_hostfile_that_is_not_one_is_refused_not_counted_as_missing_nodes(planted, tmp_path):
    # a node snapshot or a binary given to --hostfile by mistake: each line's first word became a node
    # that "sent no snapshot" ('{', '"schema":', ELF bytes), 1,337 of them for /bin/ls
    hosts = tmp_path / "hosts"
    shutil.copy(planted / "node0002.json", hosts)
    r, doc = _report(tmp_path, str(planted), "--hostfile", str(hosts))
    assert r.returncode == 2 and doc is None
    assert r.stderr.strip().splitlines() == [
        f"forensics: error: {hosts}: line 1: '{{' is not a hostname; a hostfile has one hostname per line "
        "(scontrol show hostnames, an MPI hostfile's first column)"
    ]
    hosts.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    r, doc = _report(tmp_path, str(planted), "--hostfile", str(hosts))
    assert r.returncode == 2 and doc is None
    assert r.stderr.strip() == (
        f"forensics: error: {hosts}: a binary file, not a hostfile (one hostname per line: "
        "scontrol show hostnames)"
    )
    hosts.write_text(
        "10.0.0.7 slots=8\n[fe80::1%eth0]\nops@gpu-x17\n"
        + "".join(f"{synth.node_name(i)}\n" for i in range(N))
    )
    r, doc = _report(tmp_path, str(planted), "--hostfile", str(hosts))
    assert r.returncode == 0, r.stderr
    assert [m["node"] for m in doc["missing"]] == ["10.0.0.7", "[fe80::1%eth0]", "ops@gpu-x17"]


def test_two_files_of_one_hostname_are_both_kept_and_named(planted, tmp_path):
    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    shutil.copy(folder / "node0001.json", folder / "node0001-again.json")
    r, doc = _report(tmp_path, str(folder))
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["nodes"] == N + 1
    assert (
        "1 snapshot(s) name a host already read (two machines answer to one hostname, or one file was copied "
        "twice): node0001-again.json and node0001.json both name host node0001; the second is kept as "
        "'node0001 (node0001.json)'"
    ) in doc["notes"]


def test_the_notes_naming_files_and_hosts_are_redacted_in_every_output(planted, tmp_path):
    # a file name carrying a key (a copy named after the credentials it was taken with): the duplicate-host
    # note names both files, and reached the terminal, the JSON and the HTML unredacted
    key = "AKIA" + "QWERTYUIOPASDFGH"
    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    shutil.copy(folder / "node0001.json", folder / f"node0001-{key}.json")
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "".join(f"{synth.node_name(i)}\n" for i in range(2, N))
    )  # node0000, node0001 and its copy read too
    for name in ("r.json", "r.html", "r.md"):
        r = run_cli(
            "fleet", "report", str(folder), "--hostfile", str(hosts), "-o", str(tmp_path / name)
        )
        assert r.returncode == 0, r.stderr
        text = html.unescape((tmp_path / name).read_text())
        assert key not in text and key not in r.stdout and key not in r.stderr
        assert "node0001-<redacted>.json and node0001.json both name host node0001" in text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert (
        doc["notes"][0]
        == "3 node(s) not in the hostfile were read too: node0000, node0001, node0001 (node0001.json)"
    )


def test_a_snapshot_without_hostname_is_named_by_its_file(tmp_path):
    snap = json.loads((ROOT / synth.NODE_SNAPSHOT).read_text())
    del snap["machine"]["hostname"]
    assert nodes.hostname(snap, Path("snaps/gpu-a17.json.gz")) == "gpu-a17"
    rec = nodes.record(snap, node="gpu-a17", rank=0, world_size=1)
    assert rec["env"]["NCCL_NVLS_ENABLE"] == "0" and "CUDA_VISIBLE_DEVICES" not in rec["env"]
    assert (
        rec["errors"] == [] and rec["telemetry"] is None
    )  # no --sample, no canary in this snapshot


def test_diff_of_two_folders_fleet_wide_and_a_few_nodes(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    synth.write_node_snapshots(before, ROOT, N, 8, plant=False, seed=9)
    synth.write_node_snapshots(after, ROOT, N, 8, plant=True, seed=9)
    for f in after.glob("*.json"):  # a new container everywhere: NCCL_VERSION says another release
        snap = json.loads(f.read_text())
        snap["probes"]["nccl_env"]["data"]["parent"]["env"]["NCCL_VERSION"] = "2.29.1-1"
        f.write_text(dumps(snap, f))
    r = run_cli("diff", str(before), str(after), "-o", str(tmp_path / "d.json"), "--fail-on", "any")
    assert r.returncode == 1, r.stderr
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["schema"] == "forensics.fleet-diff/1" and doc["matched_nodes"] == N
    assert [(w["field"], w["before"], w["after"], w["share"]) for w in doc["fleet_wide"]] == [
        ("env.NCCL_VERSION", "2.28.3-1", "2.29.1-1", 1.0)
    ]
    few = {f["field"]: f for f in doc["few_nodes"]}
    assert few["driver"]["nodes"] == [synth.node_name(SPOTS["driver"][0])]
    assert few["env.NCCL_ALGO"]["units"] == [f"node {synth.node_name(SPOTS['nccl_algo'][0])}"]
    pn, pg = SPOTS["pcie"]
    assert few["pcie_gen_load"]["units"] == [f"GPU {pg} of node {synth.node_name(pn)}: 5 -> 3"]
    assert r.stdout.startswith(
        "Changed fleet-wide: NCCL_VERSION 2.28.3-1 -> 2.29.1-1; on a few nodes: "
    )
    same = run_cli("diff", str(before), str(before), "-o", str(tmp_path / "same.html"))
    assert same.returncode == 0 and same.stdout.startswith(
        f"Nothing changed across the {N} matched nodes."
    )


def test_diff_with_an_empty_folder_says_it_holds_no_node_snapshot(planted, tmp_path):
    # it said "empty: is a folder, not a snapshot file (this side ... must be a fleet file or folder ...)"
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (
        ("diff", str(planted), str(empty)),
        ("fleet", "report", str(planted), "--baseline", str(empty)),
    ):
        r = run_cli(*args, "-o", str(tmp_path / "d.html"))
        assert r.returncode == 2 and not (tmp_path / "d.html").exists()
        assert r.stderr.strip() == (
            f"forensics: error: {empty}: no node snapshot in it (*.json, *.yaml, *.json.gz); "
            "is this the folder 'forensics snapshot -o DIR/%N.json' wrote to?"
        )


def test_a_report_is_not_written_among_the_node_snapshots(planted, tmp_path):
    """'-o snaps/report.json' would be read as a damaged node snapshot by the next report."""
    for opt in ("-o", "--prom"):
        out = planted / ("report.json" if opt == "-o" else "fleet.yaml")
        args = (
            ("-o", str(out))
            if opt == "-o"
            else ("-o", str(tmp_path / "r.html"), "--prom", str(out))
        )
        r = run_cli("fleet", "report", str(planted), *args)
        assert r.returncode == 2 and not out.exists(), r.stderr
        assert f"{opt} {out} is inside the folder of node snapshots {planted}" in r.stderr


def test_a_report_through_a_link_to_a_node_snapshot_does_not_overwrite_it(planted, tmp_path):
    # '-o report.html' where report.html is a link into the folder given (to snaps/node0002.json): the HTML
    # replaced the node's snapshot
    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    before = (folder / "node0002.json").read_bytes()
    link = tmp_path / "report.html"
    link.symlink_to(folder / "node0002.json")
    r = run_cli("fleet", "report", str(folder), "-o", str(link))
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"forensics: error: -o {link} is one of the inputs (node0002.json in {folder}, where it leads); "
        "writing there would destroy it, choose another name\n"
    )
    assert (folder / "node0002.json").read_bytes() == before


def test_the_fleet_diff_redacts_the_names_of_its_inputs(planted, tmp_path):
    # a folder named after the credentials of the account that gathered it: the fleet diff's title, JSON
    # 'after' and Markdown header carried it
    key = "AKIA" + "QWERTYUIOPASDFGH"
    folder = tmp_path / f"snaps-{key}"
    shutil.copytree(planted, folder)
    for fmt in ("json", "html", "md"):
        out = tmp_path / f"d.{fmt}"
        r = run_cli("diff", str(planted), str(folder), "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert key not in out.read_text() and key not in r.stdout and key not in r.stderr
    assert json.loads((tmp_path / "d.json").read_text())["after"] == str(
        tmp_path / "snaps-<redacted>"
    )


def test_show_of_a_folder_of_node_snapshots_points_to_fleet_report(planted):
    # it said only "is a folder, not a snapshot file"
    r = run_cli("show", str(planted))
    assert r.returncode == 2
    assert r.stderr == (
        f"forensics: error: {planted}: a folder of node snapshots, not one snapshot; read them "
        f"together with 'forensics fleet report {planted}', or give one of its files\n"
    )


def test_a_file_given_twice_is_one_node(planted, tmp_path):
    # 'fleet report snaps/ snaps/node0003.json' (or overlapping globs): the file was read twice and counted
    # as a second node 'node0003 (node0003.json)' under a note about two machines sharing a hostname
    r, doc = _report(
        tmp_path, str(planted), str(planted / "node0003.json"), str(planted / "node0003.json")
    )
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["nodes"] == N and doc["counts"]["world_size"] == N and doc["missing"] == []
    assert not any("name a host already read" in n for n in doc["notes"])


def test_a_fifo_among_the_snapshots_is_left_out_not_waited_on(planted, tmp_path):
    import os

    folder = tmp_path / "snaps"
    shutil.copytree(planted, folder)
    os.mkfifo(folder / "node0200.json")  # opening it would wait for a writer forever
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.json"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["counts"]["nodes"] == N
    r = run_cli("show", str(folder), timeout=60)
    assert r.returncode == 2 and "a folder of node snapshots" in r.stderr


def test_one_node_snapshot_with_the_nodes_expected_names_the_others_missing(planted, tmp_path):
    """The one node that wrote its snapshot, given with --hostfile (or --expect-nodes): it was refused as
    'are for node snapshots (a fleet knows its world size)', though a node snapshot is what it is."""
    one = sorted(nodes.candidates(planted))[0]
    hosts = tmp_path / "hosts"
    hosts.write_text("\n".join(synth.node_name(i) for i in range(3)) + "\n")
    r, doc = _report(tmp_path, str(one), "--hostfile", str(hosts))
    assert r.returncode == 0, r.stderr
    assert doc["counts"]["world_size"] == 3 and len(doc["missing"]) == 2
    assert "2 nodes missing" in doc["verdict"]
    r, doc = _report(tmp_path, str(one), "--expect-nodes", "4")
    assert r.returncode == 0, r.stderr
    assert len(doc["missing"]) == 3
    # alone, without the nodes expected, one machine's snapshot is still no fleet
    r, doc = _report(tmp_path, str(one))
    assert r.returncode == 2 and "a snapshot of one machine, not a fleet file" in r.stderr
