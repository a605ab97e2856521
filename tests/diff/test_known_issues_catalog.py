"""The known-issues catalog ships with the package and keeps its documented format (docs/known-issues.md)."""

from __future__ import annotations

import re
from importlib import resources

import yaml

COMPONENTS = {
    "nccl",
    "cuda",
    "torch",
    "driver",
    "nccl_setting",
    "cuda_setting",
    "torch_setting",
    "host_setting",
    "gpu_state",
    "package",
}
BENCHMARKS = {"allreduce", "matmul", "h2d", "host", "step"}
SPEC = re.compile(r"^\*$|^(==|>=|<=|>|<)\d+(\.\d+)*(,(==|>=|<=|>|<)\d+(\.\d+)*)*$")


def _catalog():
    text = (resources.files("forensics") / "data" / "known_issues.yaml").read_text()
    return yaml.safe_load(text)


def test_catalog_is_installed_and_has_twenty_entries():
    doc = _catalog()
    assert doc["schema"] == "forensics.known_issues/1"
    assert len(doc["entries"]) >= 20


def test_every_entry_has_the_documented_keys():
    ids = set()
    for e in _catalog()["entries"]:
        assert e["id"] not in ids, f"duplicate id {e['id']}"
        ids.add(e["id"])
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", e["id"]), e["id"]
        assert e["component"] in COMPONENTS, e["id"]
        assert isinstance(e["match"], dict) and e["match"], e["id"]
        assert isinstance(e["condition"], dict), e["id"]
        assert e["effect"]["what"].strip(), e["id"]
        assert "magnitude" in e["effect"], e["id"]
        assert set(e["effect"]["benchmark"]) <= BENCHMARKS and e["effect"]["benchmark"], e["id"]
        src = e["source"]
        assert src["project"] and src["kind"] in {
            "issue",
            "pull-request",
            "release-notes",
            "docs",
        }, e["id"]
        for url in [src["url"], *src.get("also", [])]:
            assert url.startswith("https://"), (e["id"], url)


def test_version_ranges_are_specifier_sets():
    for e in _catalog()["entries"]:
        m = e["match"]
        if e["component"] in {"nccl", "cuda", "torch", "driver", "package"}:
            assert "to" in m, e["id"]
            for key in ("from", "to"):
                if key in m:
                    assert SPEC.match(m[key]), (e["id"], key, m[key])
        if e["component"].endswith("_setting") and "env" in m:
            assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", k) for k in m["env"]), e["id"]
