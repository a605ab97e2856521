"""``forensics import``, and ``diff``/``show`` reading pasted ticket texts directly (real fixtures only)."""

from __future__ import annotations

import json

from conftest import run_cli

from forensics import snapshot
from forensics.diff.ledger import analyse
from forensics.importers import load
from forensics.render import report
from tests.conftest import FIXTURES, ROOT

FIX = FIXTURES / "import"
H200 = FIXTURES / "h200x2"
REAL = ROOT / "examples" / "h200x2" / "snapshot-all-probes.json"

OLD = FIX / "pytorch-28321-torch1.3.0-conda.txt"  # torch 1.3.0, CUDA 10.1.243, driver 410.104
NEW = (
    FIX / "pytorch-43058-torch1.6.0-and-nvidia-smi.txt"
)  # torch 1.6.0, CUDA 10.2, driver 418.67 (+ nvidia-smi)


def test_import_writes_a_snapshot_that_show_reads(tmp_path):
    out = tmp_path / "ticket.json"
    r = run_cli(
        "import", str(H200 / "collect_env.txt"), str(H200 / "nvidia-smi-q.txt"), "-o", str(out)
    )
    assert r.returncode == 0, r.stderr
    doc = snapshot.load(out)
    assert doc["source"] == "imported" and [p["format"] for p in doc["import"]["parts"]] == [
        "collect-env",
        "nvidia-smi-q",
    ]
    assert "imported from" in r.stdout and "not recorded" in r.stdout
    r = run_cli("show", str(out))
    assert r.returncode == 0 and "driver 580.159.04" in r.stdout and "2 x NVIDIA H200" in r.stdout


def test_show_reads_a_pasted_text_directly():
    # relative to the fixture folder, as a user types it: the header line's wrapping at 80 columns must
    # not depend on where the checkout lives
    r = run_cli("show", "sglang-965-check-env-0.2.10-8x-a100.txt", cwd=FIX)
    assert r.returncode == 0, r.stderr
    assert (
        "sglang check_env 0.2.10" in r.stdout
        and "8 x NVIDIA A100-SXM4-80GB, driver 550.90.07" in r.stdout
    )
    assert "not in sglang check_env output" in r.stdout


def test_import_refuses_a_text_that_is_no_environment_report(tmp_path):
    r = run_cli("import", str(H200 / "nccl-debug-info.log"), "-o", str(tmp_path / "x.json"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "nccl-debug-info.log: not an environment report" in lines[0]
        and "Traceback" not in r.stderr
    )
    assert not (tmp_path / "x.json").exists()
    r = run_cli("diff", str(H200 / "nccl-debug-info.log"), str(OLD), "-o", str(tmp_path / "r.md"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_import_format_option_and_refusals(tmp_path):
    r = run_cli("import", "--format", "pip", str(NEW), "-o", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "no pip report found" in r.stderr
    r = run_cli("import", "--format", "nvidia-smi", str(NEW), "-o", str(tmp_path / "x.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "x.json").read_text())
    assert [p["format"] for p in doc["import"]["parts"]] == [
        "nvidia-smi"
    ]  # the collect_env part is left out
    assert doc["probes"]["software"]["status"] == "unavailable"
    bomb = tmp_path / "bomb.xml"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        "<nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>\n"
    )
    r = run_cli("import", str(bomb), "-o", str(tmp_path / "y.json"))
    assert r.returncode == 2 and "declares entities" in r.stderr


def test_diff_of_two_real_tickets_names_torch_cuda_and_driver_first(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("diff", str(OLD), str(NEW), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    implicated = [h["id"] for h in doc["hypotheses"] if h["status"] == "implicated"]
    assert set(implicated[:3]) == {"torch.version", "cuda.version", "driver.version"}, implicated
    by_id = {h["id"]: h for h in doc["hypotheses"]}
    assert by_id["torch.version"]["summary"] == "PyTorch changed: 1.3.0 -> 1.6.0"
    assert by_id["driver.version"]["summary"] == "NVIDIA driver 410.104 -> 418.67"
    assert by_id["cuda.version"]["summary"] == "CUDA runtime loaded 10.1 -> 10.2"
    loaded = next(
        e for e in by_id["cuda.version"]["evidence"] if e.startswith("CUDA runtime loaded:")
    )
    assert (
        "torch build (collect_env: CUDA used to build PyTorch)" in loaded and "ctypes" not in loaded
    )
    assert doc["verdict"].startswith(
        "Things changed, but no slowdown was measured (no benchmark in either snapshot); "
        "the change likeliest to matter: "
    )
    assert doc["snapshots"]["before"]["source"] == doc["snapshots"]["after"]["source"] == "imported"
    assert "imported from" in doc["machine_note"] or "imported" in doc["machine_note"]
    # what neither text holds is inconclusive, with the reason
    assert by_id["gpu.throttling"]["status"] == "inconclusive"
    assert "not in collect_env output" in by_id["gpu.throttling"]["summary"]
    assert "not in collect_env" in by_id["code.change"]["summary"]
    # two unknowns are no change: nothing "changed" from not-recorded to not-recorded
    for c in doc["changes"]:
        assert not (
            isinstance(c["before"], dict)
            and c["before"].get("missing") == "not_recorded"
            and isinstance(c["after"], dict)
            and c["after"].get("missing") == "not_recorded"
        ), c


def test_diff_of_a_ticket_against_a_real_snapshot(tmp_path):
    out = tmp_path / "r.md"
    r = run_cli("diff", str(H200 / "collect_env.txt"), str(REAL), "-o", str(out))
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    assert (
        "_BEFORE imported from" in md
        and "(collect_env): only the fields that text holds are compared._" in md
    )
    a = analyse(load(H200 / "collect_env.txt"), load(REAL))
    by_id = {h.id: h for h in a.hypotheses}
    # the same machine, same versions: what both hold is ruled out ...
    for hid in ("torch.version", "driver.version", "cuda.version", "nccl.version"):
        assert by_id[hid].status.value == "ruled-out", (hid, by_id[hid].summary)
    assert "listed on both sides are the same" in by_id["python.packages"].summary
    # ... and what collect_env cannot hold is inconclusive with that reason, never "ruled out"
    for hid in ("gpu.throttling", "gpu.pcie-link", "gpu.config", "gpu.contention", "gpu.health"):
        assert by_id[hid].status.value == "inconclusive", (hid, by_id[hid].summary)
        assert "not in collect_env output" in by_id[hid].summary, by_id[hid].summary
    assert "not in collect_env output" in by_id["nccl.env"].summary


def test_markdown_report_fits_a_github_comment():
    a = analyse(
        load(FIX / "sglang-748-check-env-10x-rtx2080ti.txt"),
        load(REAL),
        names=("ticket.txt", "mine.json"),
    )
    full = report.render_markdown(a)
    assert report.MD_LIMIT == 65536 and len(full) <= report.MD_LIMIT
    assert "not shown" not in full  # this one fits whole
    cut = report.render_markdown(a, limit=12000)
    assert len(cut) <= 12000
    n = len(a.changes)
    shown = cut.count("\n| `")  # rows of the changes tables and the snapshot file row
    assert (
        f"of {n} changed fields are not shown" in cut
        and "GitHub's 12,000-character comment limit" in cut
    )
    assert shown < n
    for h in a.implicated:
        assert f"`{h.id}`" in cut  # the suspects and the ledger are never what is cut
    tiny = report.render_markdown(a, limit=3000)
    assert len(tiny) <= 3000 and tiny.rstrip().endswith("`--format json`._")


def test_a_power_limit_the_pasted_table_does_not_hold_is_no_change():
    """Seen on the 1-GPU H200 (examples/import-self): the nvidia-smi table holds the enforced power cap
    ("78W / 700W") but not the configured limit; the live snapshot holds both. The configured limit
    must not read as "power limit None -> 700 W" (gpu.config implicated on a field one side never had)."""
    before = load(H200 / "nvidia-smi.txt")
    after = load(REAL)
    gb = next(iter(before["probes"]["gpu"]["data"]["gpus"].values()))
    assert "limit_mw" not in gb["power"] and gb["power"]["enforced_limit_mw"] == 700000
    a = analyse(before, after)
    config = next(h for h in a.hypotheses if h.id == "gpu.config")
    assert config.status.value != "implicated", config.summary
    assert not any("None" in line for line in config.evidence), config.evidence
