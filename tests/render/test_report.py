"""The report renderers: escaping, self-containment, bench chart, one-sided probes, formats."""

from __future__ import annotations

import json
import re

import pytest
from _diffkit import commit_file, repo_data, section, snapshot

from forensics.diff.ledger import analyse
from forensics.errors import BadInputError
from forensics.model import missing
from forensics.render.report import format_for, render_html, render_json, render_markdown, write
from forensics.render.templating import md_escape, show_value
from tests.conftest import make_repo

EVIL = "<script>alert('x')</script>"


@pytest.fixture
def evil_analysis(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"}, "base")
    before = repo_data(repo)
    commit_file(repo, "kernels/attn.cu", "// k\n", f"attention: {EVIL} & faster")
    after = repo_data(repo)
    b = snapshot(
        {"git": section({"repos": [before]}), "custom_env": section({"parent": {"MY_FLAG": "1"}})}
    )
    a = snapshot(
        {"git": section({"repos": [after]}), "custom_env": section({"parent": {"MY_FLAG": EVIL}})}
    )
    a["redactions"] = [{"where": "custom_env.parent.HF_TOKEN", "why": "secret by name"}]
    return analyse(b, a)


def test_html_escapes_commit_messages_and_env_values(evil_analysis):
    html = render_html(evil_analysis)
    assert "<script" not in html
    assert "&lt;script&gt;alert(" in html  # the env value and the commit subject, escaped
    assert html.count("&lt;script&gt;") >= 2
    assert "custom_env.parent.HF_TOKEN" in html  # what was redacted is listed


def test_html_is_self_contained(evil_analysis):
    html = render_html(evil_analysis)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html, re.I)
    assert not re.search(r"\bsrc\s*=", html, re.I)
    assert "@import" not in html and "url(" not in html
    assert "Content-Security-Policy" in html


def test_markdown_escapes_and_keeps_structure(evil_analysis):
    md = render_markdown(evil_analysis)
    assert "<script" not in md and "&lt;script>alert(" in md
    assert md.count("<details>") == md.count("</details>")
    assert md_escape("a|b`c<d") == "a\\|b\\`c&lt;d"


def test_json_is_the_stable_interface(evil_analysis):
    doc = json.loads(render_json(evil_analysis))
    assert doc["verdict"] == evil_analysis.verdict
    assert doc["hypotheses"][0]["id"] == "code.change"
    assert doc["hypotheses"][0]["status"] == "implicated"
    scores = [h["score"] for h in doc["hypotheses"]]
    assert scores == sorted(scores, reverse=True)
    assert doc["commits"][0]["commits"][0]["subject"] == f"attention: {EVIL} & faster"
    assert doc["commits"][0]["commits"][0]["hot_categories"] == ["attention", "kernels"]
    assert doc["bench"] is None


def _bench(user, canary):
    return {
        "schema": "forensics.bench/1",
        "telemetry": {},
        "results": [
            {
                "name": "canary.verify_step_ms",
                "kind": "canary",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": canary,
            },
            {
                "name": "user.step_ms",
                "kind": "user",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": user,
            },
        ],
    }


def test_bench_section_chart_and_pointer():
    same = [4.0, 4.1, 4.05, 3.98, 4.02, 4.03]
    b = snapshot({}, bench=_bench([19.0, 19.2, 18.9, 19.1, 19.05, 18.95], same))
    a = snapshot({}, bench=_bench([29.0, 29.3, 28.8, 29.1, 29.2, 29.05], same))
    an = analyse(b, a)
    doc = an.to_json()
    assert doc["bench"]["points_at"] == "code"
    user = doc["bench"]["results"][1]
    assert user["comparison"]["verdict"] == "slower"
    lo, hi = user["comparison"]["ci95"]
    assert lo <= user["comparison"]["time_ratio"] <= hi and lo > 1.4
    assert an.top.id == "code.change"  # a slower user step, a same canary, a clean environment
    html = render_html(an)
    assert html.count("<svg") == 2 and html.count("<circle") == 24
    assert "Measured 1.53x slower" in an.verdict


def test_slower_canary_points_at_the_environment():
    b = snapshot(
        {}, bench=_bench([19.0, 19.2, 18.9, 19.1, 19.05, 18.95], [4.0, 4.1, 4.05, 3.98, 4.02, 4.03])
    )
    a = snapshot(
        {}, bench=_bench([29.0, 29.3, 28.8, 29.1, 29.2, 29.05], [6.0, 6.1, 6.05, 5.98, 6.02, 6.03])
    )
    an = analyse(b, a)
    assert an.bench.pointer.value == "environment"
    assert an.top is None  # no environment probe here to name the cause: said plainly
    assert "no checked hypothesis explains it" in an.verdict
    assert an.regression("regression") is True


def test_probe_missing_on_one_side_is_inconclusive_plainly():
    from forensics.registry import find_probe_class

    if find_probe_class("host") is None:
        pytest.skip("the host probe is not registered in this install")
    from forensics.collect import take_snapshot

    full = take_snapshot(only=["host"])
    gone = snapshot(
        {"host": section({}, status="failed", reason="TimeoutError: timed out after 10 s")}
    )
    an = analyse(full, gone)
    host_hyps = [h for h in an.hypotheses if h.id == "host.cpu"]
    assert host_hyps[0].status.value == "inconclusive"
    assert "no data in AFTER" in host_hyps[0].summary and "timed out" in host_hyps[0].summary


def test_show_value_and_format_for(tmp_path):
    assert (
        show_value(missing("not_supported", "nvmlDeviceGetPowerUsage"))
        == "missing: not supported (nvmlDeviceGetPowerUsage)"
    )
    assert show_value(None) == "-" and show_value(0) == "0" and show_value(False) == "false"
    assert len(show_value("x" * 1000)) == 240
    assert (
        format_for(tmp_path / "r.md") == "md" and format_for(tmp_path / "r.txt", "json") == "json"
    )
    with pytest.raises(BadInputError, match=r"\.html, \.md or \.json"):
        format_for(tmp_path / "r.txt")
    with pytest.raises(BadInputError, match="does not exist"):
        write(analyse(snapshot({}), snapshot({})), tmp_path / "no" / "r.html")


def test_bench_without_canary_is_unattributed_and_one_sided_results_are_noted():
    user = {
        "schema": "forensics.bench/1",
        "results": [
            {
                "name": "user.step_ms",
                "kind": "user",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": [19.0, 19.2, 18.9, 19.1, 19.05, 18.95],
            }
        ],
    }
    slow = {
        "schema": "forensics.bench/1",
        "results": [
            {
                "name": "user.step_ms",
                "kind": "user",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": [29.0, 29.3, 28.8, 29.1, 29.2, 29.05],
            },
            {
                "name": "canary.verify_step_ms",
                "kind": "canary",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": [4.0, 4.1, 4.0],
            },
        ],
    }
    an = analyse(snapshot({}, bench=user), snapshot({}, bench=slow))
    assert an.bench.pointer.value == "unattributed"
    assert "no canary on both sides" in an.bench.sentence
    canary = [r for r in an.bench.results if r.kind == "canary"][0]
    assert canary.comparison is None and "measured only in AFTER" in canary.note
    assert an.top is None  # nothing names a cause; code.change is not blamed without a canary
    assert "measured only in AFTER" in render_html(an)


def test_slower_component_with_same_canary_points_at_the_environment():
    """An all-reduce component of the canary is forensics' own code: its slowdown is the environment's."""
    same = [4.0, 4.1, 4.05, 3.98, 4.02, 4.03]
    b = snapshot({}, bench=_bench(same, same))
    a = snapshot({}, bench=_bench(same, same))
    for doc, values in (
        (b, [8.2, 8.1, 8.3, 8.2, 8.25, 8.15]),
        (a, [25.9, 26.1, 25.8, 26.0, 25.7, 26.2]),
    ):
        doc["bench"]["results"].append(
            {
                "name": "canary.allreduce_step_us",
                "kind": "component",
                "unit": "us",
                "higher_is_better": False,
                "process_medians": values,
            }
        )
    an = analyse(b, a)
    assert an.bench.pointer.value == "environment"
    assert "component canary.allreduce_step_us" in an.bench.sentence


def test_bench_result_names_break_at_dots_and_stay_escaped():
    from forensics.render.templating import dot_break

    assert str(dot_break("component.allreduce_busbw_gbps")) == "component.<wbr>allreduce_busbw_gbps"
    assert (
        str(dot_break(f"user.{EVIL}"))
        == "user.<wbr>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    )
