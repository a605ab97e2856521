"""Probe options are declared once (forensics.options): commands set them, probes read them, typos fail."""

from __future__ import annotations

import ast

import pytest

from forensics.options import PROBE_OPTIONS, probe_options
from forensics.probe import ProbeContext
from tests.conftest import ROOT


def test_every_option_a_probe_or_the_env_collector_reads_is_declared():
    """ctx.option("x") and options.get("x") in the probes and their collectors name declared options only."""
    read = set()
    for folder in (ROOT / "probes", ROOT / "forensics" / "env"):
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    owner = node.func.value
                    if node.func.attr == "option" or (
                        node.func.attr == "get"
                        and isinstance(owner, ast.Name)
                        and owner.id == "options"
                    ):
                        read.add(node.args[0].value)
    assert read, "the scan found no option read at all: it is broken"
    assert read - set(PROBE_OPTIONS) == set()


def test_a_misspelled_option_raises_instead_of_reading_as_unset():
    ctx = ProbeContext({"sample_s": 2.0})
    assert ctx.option("sample_s") == 2.0
    assert ctx.option("deep") is False
    with pytest.raises(KeyError, match="'sample' is not a declared probe option"):
        ctx.option("sample")
    with pytest.raises(KeyError, match="'dep' is not a declared probe option"):
        ProbeContext({"dep": True})


def test_values_are_checked_and_defaults_filled():
    opts = probe_options(repo="/src/app", env_select_extra=["MY_", "OTHER"], sample_s=3)
    assert (
        opts["repo"] == "/src/app"
        and opts["env_select_extra"] == ("MY_", "OTHER")
        and opts["sample_s"] == 3.0
    )
    assert (
        opts["launcher"] is None and opts["nccl_init"] is False and set(opts) == set(PROBE_OPTIONS)
    )
    with pytest.raises(TypeError, match="'deep' takes bool, got str"):
        probe_options(deep="yes")


def test_the_snapshot_records_only_the_options_that_were_set(tmp_path):
    from forensics.collect import take_snapshot

    doc = take_snapshot(
        label="t", only=["host"], options={"deep": False, "sample_s": None, "repo": str(tmp_path)}
    )
    assert doc["options"]["repo"] == str(tmp_path)
    assert (
        "deep" not in doc["options"]
        and "sample_s" not in doc["options"]
        and "launcher" not in doc["options"]
    )
