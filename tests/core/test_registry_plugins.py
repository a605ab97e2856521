"""Probes are found through the entry-point group, built-in and third-party alike."""

from __future__ import annotations

import json
import textwrap

from tests.conftest import run_cli


def _install_fake_distribution(root, module_source: str, entry: str, dist="acme_probe", name=None):
    """Lay out an importable module plus a dist-info with entry_points.txt (what pip would install: the
    folder named with the wheel spec's escaped name, METADATA with the project's own ``name``)."""
    (root / f"{dist}.py").write_text(textwrap.dedent(module_source))
    info = root / f"{dist}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name or dist}\nVersion: 1.2.3\n\n# Acme probes\n\nName: not a header\n"
    )
    (info / "entry_points.txt").write_text(f"[forensics.probes]\n{entry}\n")


def test_third_party_probe_appears_in_snapshot(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install_fake_distribution(
        site,
        """
        from forensics.probe import Probe

        class RackProbe(Probe):
            name = "rack"
            description = "which rack and PDU this node sits in"

            def collect(self, ctx):
                return {"rack_id": "r12", "pdu_load_w": 5400}
    """,
        "rack = acme_probe:RackProbe",
    )
    out = tmp_path / "s.json"
    proc = run_cli(
        "snapshot", "-q", "-o", str(out), "--probe", "rack", env={"PYTHONPATH": str(site)}
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["probes"]["rack"]["status"] == "ok"
    assert doc["probes"]["rack"]["data"] == {"rack_id": "r12", "pdu_load_w": 5400}
    listing = run_cli("probes", env={"PYTHONPATH": str(site), "COLUMNS": "200"})
    assert "rack" in listing.stdout and "acme_probe 1.2.3" in listing.stdout


def test_broken_third_party_probe_is_failed_not_fatal(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install_fake_distribution(
        site,
        "raise ImportError('needs libfoo')\n",
        "broken = acme_probe:Nothing",
        name="Acme-Probe",
    )  # pip install Acme-Probe: the folder is acme_probe-1.2.3.dist-info
    out = tmp_path / "s.json"
    proc = run_cli(
        "snapshot",
        "-q",
        "-o",
        str(out),
        "--probe",
        "broken",
        "--probe",
        "host",
        env={"PYTHONPATH": str(site)},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["probes"]["broken"]["status"] == "failed"
    assert (
        "from Acme-Probe 1.2.3:" in doc["probes"]["broken"]["reason"]
    )  # the name the user installed
    assert "needs libfoo" in doc["probes"]["broken"]["reason"]
    assert doc["probes"]["host"]["status"] == "ok"


def test_unknown_probe_name_is_bad_input(tmp_path):
    proc = run_cli("snapshot", "-o", str(tmp_path / "s.json"), "--probe", "gpuu")
    assert proc.returncode == 2
    assert "no probe named 'gpuu'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s.json").exists()


def test_probe_classes_come_from_one_read_of_the_entry_points(monkeypatch):
    """diff, report and fleet report look probes up for every snapshot they check (1,000 in a fleet):
    the installed entry points are read once per process, not once per look-up."""
    from forensics import registry

    registry._group_entry_points.cache_clear()
    calls = []
    real = registry.metadata.entry_points
    monkeypatch.setattr(
        registry.metadata, "entry_points", lambda **kw: calls.append(kw) or real(**kw)
    )
    try:
        for _ in range(3):
            assert registry.find_probe_class("gpu").name == "gpu"
            assert registry.find_probe_class("no_such_probe") is None
        assert calls == [{"group": "forensics.probes"}]
        assert registry.find_probe_class("gpu") is not registry.find_probe_class(
            "gpu"
        )  # a new instance each time
    finally:
        registry._group_entry_points.cache_clear()
