"""What a pull really changed (issue 25, issue 26 family 2): behaviour-free commits are not suspects, signals
rank the rest, and a pull weighs what its commits changed (nothing, unknown, or scaled by the signals)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _diffkit import commit_file, git, repo_data, section, snapshot

from forensics.diff import commits as commits_mod
from forensics.diff.commits import analyse as commits_analyse
from forensics.diff.commits import classify, order, suspects
from forensics.diff.ledger import analyse
from forensics.diff.pysource import compare
from forensics.diff.signals import SignalKind, config_signals, python_file, text_signals
from forensics.diff.suspects import FileKind, file_kind
from forensics.model import HypothesisStatus, Severity
from forensics.render.report import render_html, render_json, render_markdown

# --------------------------------------------------------------------------------------------------
# The model file of the real torch step below, and the two commits of issue 25's founding story
# --------------------------------------------------------------------------------------------------
MODEL = '''import torch


def project(h, w):
    """Logits for every position of a block."""
    out = h @ w
    return out


def verify_step(h, w, steps=4):
    total = 0
    for i in range(steps):
        logits = project(h, w)
        total = total + logits.shape[-1]
    return total
'''

STYLE = '''"""The verify step's model code."""
import torch
from typing import Optional


def project(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # one matmul: positions x vocabulary
    logits_block = h @ w
    return logits_block


def verify_step(h: torch.Tensor, w: torch.Tensor, steps: int = 4) -> int:
    """Run ``steps`` projections; returns the summed vocabulary width."""
    acc: int = 0
    for step_index in range(steps):
        block_logits = project(h,
                               w)
        acc = acc + block_logits.shape[-1]
    return acc
'''

PRECISION = STYLE.replace("    logits_block = h @ w\n", "    logits_block = (h @ w).float()\n")

STEP = """import json, sys, time
sys.path.insert(0, ".")
import torch
import model
h = torch.randn(8, 64, dtype=torch.bfloat16)
w = torch.randn(64, 256, dtype=torch.bfloat16)
for _ in range(3):
    t = time.perf_counter()
    model.verify_step(h, w)
    print(json.dumps({"metric": "step_ms", "value": (time.perf_counter() - t) * 1e3}))
"""


def _pull(
    tmp_path: Path, commits: list[tuple[dict[str, str], str]], base: dict[str, str] | None = None
):
    """(work clone, before probe data, after probe data) around a fast-forward pull of ``commits``."""
    up = tmp_path / "upstream"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    for rel, text in (base or {"model.py": MODEL, "README.md": "verify step\n"}).items():
        commit_file(up, rel, text, f"add {rel}")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(up), str(work))
    before = repo_data(work)
    for files, message in commits:
        for rel, text in files.items():
            path = up / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            git(up, "add", rel)
        git(up, "commit", "-q", "-m", message)
    git(work, "pull", "-q", "origin", "main")
    return work, before, repo_data(work)


def _docs(side: dict, bench: dict | None = None, **probes) -> dict:
    return snapshot({"git": section({"repos": [side]}), **probes}, bench=bench)


# --------------------------------------------------------------------------------------------------
# Behaviour-free: the syntax tree once the inert parts are set aside
# --------------------------------------------------------------------------------------------------
def test_style_edits_are_behaviour_free_and_named():
    cmp = compare(MODEL, STYLE)
    assert cmp.same_behaviour
    assert {"docstrings", "annotations", "renames", "comments"} <= set(cmp.set_aside)
    assert compare("X = 1\n", "X  =  1\n").set_aside == ["formatting"]


def test_a_one_line_cast_or_a_swapped_expression_is_a_behaviour_change():
    assert not compare(STYLE, PRECISION).same_behaviour
    swapped = "def f():\n    a = 1\n    b = 2\n    return a - b\n"
    assert compare(
        swapped, swapped.replace("a = 1", "q = 1").replace("a - b", "q - b")
    ).same_behaviour
    assert not compare(swapped, swapped.replace("return a - b", "return b - a")).same_behaviour


def test_a_renamed_keyword_parameter_is_the_interface_not_a_local_rename():
    # a caller may pass it by keyword: renaming it changes behaviour; *args and locals do not
    assert not compare("def f(x):\n    return x\n", "def f(y):\n    return y\n").same_behaviour
    assert compare(
        "def f(*a, **k):\n    return a, k\n", "def f(*args, **kw):\n    return args, kw\n"
    ).same_behaviour
    # eval/locals read names: a function that uses them keeps its names
    assert not compare(
        "def f():\n    a = 1\n    return locals()\n", "def f():\n    b = 1\n    return locals()\n"
    ).same_behaviour


def test_a_debug_log_behind_a_level_check_is_behaviour_free_an_eager_one_is_not():
    base = "import logging\nlog = logging.getLogger(__name__)\n\ndef f(x):\n    y = x + 1\n    return y\n"
    guarded = base.replace(
        "    return y\n",
        "    if log.isEnabledFor(logging.DEBUG):\n"
        "        log.debug('y=%s', y.tolist())\n    return y\n",
    )
    lazy = base.replace("    return y\n", "    log.debug('y=%s', y)\n    return y\n")
    eager = base.replace("    return y\n", "    log.debug(f'y={y.tolist()}')\n    return y\n")
    assert compare(base, guarded).set_aside == ["debug logging"]
    assert compare(base, lazy).same_behaviour
    assert not compare(
        base, eager
    ).same_behaviour  # the f-string calls .tolist() whatever the level


def test_a_level_check_that_runs_with_debug_off_is_behaviour():
    """Only a test that is true when debug logging is on guards a debug block; "not", "or" and a look-alike
    level read were set aside as debug logging, whatever the block did (a sleep, a synchronisation)."""
    base = "import logging, time\nlog = logging.getLogger(__name__)\n\ndef f():\n    return 1\n"

    def guarded(test, body="time.sleep(0.5)"):
        return base.replace("    return 1\n", f"    if {test}:\n        {body}\n    return 1\n")

    for test in (
        "not log.isEnabledFor(logging.DEBUG)",
        "SYNC or log.isEnabledFor(logging.DEBUG)",
        "cfg.level > DEBUG_LEVEL",
        "log.getEffectiveLevel() > logging.DEBUG",
        "warm_up() and log.isEnabledFor(logging.DEBUG)",
    ):
        assert not compare(base, guarded(test)).same_behaviour, test
    for test in (
        "log.isEnabledFor(logging.DEBUG)",
        "VERBOSE and log.isEnabledFor(logging.DEBUG)",
        "log.getEffectiveLevel() <= logging.DEBUG",
        "logging.getLogger('x').isEnabledFor(logging.DEBUG)",
    ):
        assert compare(base, guarded(test, "log.debug('%s', 1)")).set_aside == ["debug logging"], (
            test
        )


def test_a_docstring_read_at_run_time_an_own_cast_and_annotations_read_at_run_time_are_behaviour():
    # docopt takes the options' defaults from the module docstring
    usage = '"""Usage: step [--n=<n>]\n\n  --n=<n>  steps [default: 4]\n"""\nfrom docopt import docopt\nARGS = docopt(__doc__)\n'
    assert not compare(usage, usage.replace("default: 4", "default: 40")).same_behaviour
    plain = '"""Steps: 4."""\nN = 4\n'
    assert compare(plain, plain.replace("4.", "40.")).set_aside == ["docstrings"]
    # a module's own cast(x, dtype) is not typing.cast(T, x): its first argument is behaviour
    own = "def cast(x, dtype):\n    return x.to(dtype)\n\ndef f(x):\n    return cast(x, HALF)\n"
    assert not compare(own, own.replace("cast(x, HALF)", "cast(x.float(), HALF)")).same_behaviour
    typed = "from typing import cast\n\ndef f(x):\n    return x\n"
    assert compare(typed, typed.replace("return x", "return cast(int, x)")).set_aside == [
        "annotations"
    ]
    # ClassVar decides whether a dataclass has the field; singledispatch and pydantic act on annotations
    dc = "from dataclasses import dataclass\nfrom typing import ClassVar\n@dataclass\nclass C:\n    n: ClassVar[int] = 1\n"
    assert not compare(dc, dc.replace("ClassVar[int]", "int")).same_behaviour
    sd = "from functools import singledispatch\n@singledispatch\ndef f(x):\n    return 0\n@f.register\ndef _(x: int):\n    return 1\n"
    assert not compare(sd, sd.replace("x: int", "x: float")).same_behaviour
    pd = "from pydantic import BaseModel\nclass C(BaseModel):\n    n: int = 1\n"
    assert not compare(pd, pd.replace("n: int", "n: float")).same_behaviour


def test_a_dataclass_field_keeps_its_statement():
    a = "from dataclasses import dataclass\n@dataclass\nclass C:\n    pass\n"
    assert not compare(a, a.replace("    pass\n", "    n: int\n")).same_behaviour  # a new field
    b = a.replace("    pass\n", "    n: int = 1\n")
    assert compare(b, b.replace("n: int", "n: float")).set_aside == ["annotations"]


# --------------------------------------------------------------------------------------------------
# Signals, each with its line
# --------------------------------------------------------------------------------------------------
LOOP = """import torch
import torch.distributed as dist
LIMIT = 512

def step(model, x, n=4):
    out = []
    for i in range(n):
        y = model(x)
        out.append(y)
    return out
"""


@pytest.mark.parametrize(
    "edit,kind,detail",
    [
        (("y = model(x)", "y = model(x).float()"), SignalKind.PRECISION, ".float()"),
        (
            ("y = model(x)", "y = model(x, dtype=torch.float32)"),
            SignalKind.PRECISION,
            "dtype=torch.float32",
        ),
        (("out.append(y)", "out.append(y.item())"), SignalKind.SYNC, ".item()"),
        (("out.append(y)", "out.append(y.cpu())"), SignalKind.SYNC, ".cpu()"),
        (
            ("out.append(y)", "out.append(torch.zeros(4) + y)"),
            SignalKind.ALLOC_IN_LOOP,
            "torch.zeros() in a loop",
        ),
        (
            ("out.append(y)", "out.append(y.contiguous())"),
            SignalKind.ALLOC_IN_LOOP,
            ".contiguous() in a loop",
        ),
        (
            ("out.append(y)", "dist.all_reduce(y)\n        out.append(y)"),
            SignalKind.COLLECTIVE,
            "dist.all_reduce()",
        ),
        (
            ("    out = []", "    model = torch.compile(model)\n    out = []"),
            SignalKind.GRAPH_COMPILE,
            "torch.compile()",
        ),
        (("LIMIT = 512", "LIMIT = 256"), SignalKind.CONFIG_DEFAULT, "LIMIT = 512 -> 256"),
        (("n=4", "n=8"), SignalKind.CONFIG_DEFAULT, "default n=4 -> 8 in step()"),
    ],
)
def test_each_signal_on_the_added_line(edit, kind, detail):
    new = LOOP.replace(*edit)
    _, found = python_file("serve/step.py", LOOP, new)
    hits = [s for s in found if s.kind is kind]
    assert hits, found
    s = hits[0]
    assert s.detail == detail
    assert new.splitlines()[s.line - 1].strip() == s.text
    assert s.reason().startswith(f"{kind.value}: {detail} (serve/step.py:{s.line})")


def test_allocation_outside_the_loop_and_a_renamed_cast_are_not_signals():
    _, found = python_file(
        "s.py", LOOP, LOOP.replace("    out = []", "    out = []\n    buf = torch.zeros(4)")
    )
    assert not [s for s in found if s.kind is SignalKind.ALLOC_IN_LOOP]
    a = LOOP.replace("y = model(x)", "y = model(x).float()")
    b = a.replace("y = model(x).float()", "z = model(x).float()").replace(
        "out.append(y)", "out.append(z)"
    )
    _, found = python_file("s.py", a, b)
    assert found == []


def test_switches_taken_out_are_signals_too():
    a = LOOP.replace("    out = []", "    model = torch.compile(model)\n    out = []")
    _, found = python_file("s.py", a, LOOP)
    assert [(s.kind, s.removed) for s in found] == [(SignalKind.GRAPH_COMPILE, True)]


def test_configuration_values_and_cuda_sources():
    same, found = config_signals(
        "serve.yaml", "batch: 8\nenforce_eager: false\n# tuned\n", "batch: 8\nenforce_eager: true\n"
    )
    assert not same and [(s.kind, s.detail, s.line) for s in found] == [
        (SignalKind.GRAPH_COMPILE, "enforce_eager: false -> true", 2)
    ]
    assert config_signals("serve.yaml", "batch: 8\n", "batch: 8   # same value\n") == (True, [])
    found = text_signals(
        "csrc/attn.cu", "void f() {}\n", "void f() {\n  cudaDeviceSynchronize();\n}\n"
    )
    assert [(s.kind, s.line) for s in found] == [(SignalKind.SYNC, 2)]


@pytest.mark.parametrize(
    "path,kind",
    [
        ("README.md", FileKind.DOCS),
        ("docs/usage.txt", FileKind.DOCS),
        ("LICENSE", FileKind.DOCS),
        ("tests/test_model.py", FileKind.TESTS),
        ("serve/model_test.py", FileKind.TESTS),
        (".github/workflows/ci.yml", FileKind.CI),
        (".gitlab-ci.yml", FileKind.CI),
        ("configs/serve.yaml", FileKind.CONFIG),
        ("requirements.txt", FileKind.CONFIG),
        ("cost.txt", FileKind.CODE),
        ("model.py", FileKind.CODE),
        ("csrc/attn.cu", FileKind.CODE),
        # named like a document, but code or configuration (they were 'documentation': behaviour-free)
        ("HISTORY.md", FileKind.DOCS),
        ("NEWS", FileKind.DOCS),
        ("serving/history.py", FileKind.CODE),
        ("app/security.py", FileKind.CODE),
        ("kv/changes.py", FileKind.CODE),
        ("notes.sh", FileKind.CODE),
        ("changes.yaml", FileKind.CONFIG),
        # an image is documentation in a documentation folder; elsewhere it may be the step's input
        ("docs/img/report.png", FileKind.DOCS),
        ("images/arch.svg", FileKind.DOCS),
        ("data/sample.png", FileKind.CODE),
        ("bench/cat.jpg", FileKind.CODE),
    ],
)
def test_file_kinds(path, kind):
    assert file_kind(path) is kind


@pytest.mark.parametrize("path", ["load_test.py", "tests/bench_step.py", "docs/conf.py"])
def test_a_file_the_step_loaded_is_never_inert(path):
    """A step run as ``python load_test.py`` (or importing a tests/ or docs/ module) runs that file: a change
    to it is judged as code, not set aside by its path."""
    from forensics.diff.suspects import assess_file

    assert assess_file(path, "X = 1\n", "X = 2\n").behaviour_free  # nothing recorded: by its path
    assert assess_file(path, "X = 1\n", "X = 2\n", loaded=set()).behaviour_free
    loaded = assess_file(path, "X = 1\n", "X = 2\n", loaded={path})
    assert not loaded.behaviour_free and loaded.kind is FileKind.CODE


# --------------------------------------------------------------------------------------------------
# A real torch step on the CPU: the style commit and the 1-line precision change in one pull
# --------------------------------------------------------------------------------------------------
def test_real_torch_step_the_precision_commit_ranks_first_the_style_commit_is_not_a_suspect(
    tmp_path,
):
    pytest.importorskip("torch")
    work, rb, ra = _pull(
        tmp_path,
        [
            ({"model.py": STYLE}, "model: type hints, clearer names, docstrings"),
            ({"model.py": PRECISION}, "model: logits in float32"),
            ({"docs/verify.md": "how the verify step works\n"}, "docs: verify step"),
        ],
    )
    (work / "step.py").write_text(
        STEP.replace('sys.path.insert(0, ".")', f"sys.path.insert(0, {str(work)!r})")
    )
    from forensics.bench.user import run_cmd_process, user_result

    rec = run_cmd_process(
        f"{sys.executable} {work / 'step.py'}", metric=None, metric_regex=None, timeout_s=300
    )
    assert (
        str((work / "model.py").resolve()) in rec["loaded_files"]
    )  # really loaded by the torch step
    bench = {
        "schema": "forensics.bench/1",
        "results": [
            user_result("user.step_ms", [rec, rec, rec], unit="ms", higher_is_better=False)
        ],
    }
    b, a = _docs(rb), _docs(ra, bench)
    (rc,) = commits_analyse(b, a)
    first, *rest = rc.commits
    assert first.subject == "model: logits in float32"
    why = classify(first).why
    assert why.startswith("precision change: .float() (model.py:")
    assert "the step loaded it" in why
    style = next(c for c in rc.commits if c.subject.startswith("model: type hints"))
    sa = classify(style)
    assert not sa.suspect and sa.behaviour_free and sa.weight == 0
    assert sa.why.startswith("no behaviour change: ") and {
        "annotations",
        "renames",
        "docstrings",
    } <= set(sa.why.split(": ", 1)[1].split(", "))
    assert [c.subject for c in suspects(rc)] == ["model: logits in float32"]
    assert rc.commits[-1] in (style, next(c for c in rc.commits if c.subject.startswith("docs")))
    an = analyse(b, a)
    code = next(h for h in an.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.IMPLICATED and code.severity is Severity.HIGH
    assert (
        f'first suspect {first.sha[:10]} "model: logits in float32" (precision change: .float()'
        in code.summary
    )
    md = render_markdown(an)
    assert "precision change: .float() (model.py:" in md and "no behaviour change: " in md
    assert md.index("model: logits in float32") < md.index("model: type hints")
    html = render_html(an)
    assert "precision change: .float() (model.py:" in html
    doc = json.loads(render_json(an))
    row = doc["commits"][0]["commits"][0]["assessment"]
    assert (
        row["suspect"]
        and row["signals"][0]["kind"] == "precision"
        and row["signals"][0]["file"] == "model.py"
    )
    assert doc["commits"][0]["pull_weight"]["status"] == "scaled"
    assert doc["commits"][0]["pull_weight"]["severity"] == "high"


def test_the_terminal_summary_says_why(tmp_path):
    from rich.console import Console

    from forensics.render.summary import print_diff_summary

    work, rb, ra = _pull(
        tmp_path, [({"model.py": STYLE}, "model: style"), ({"model.py": PRECISION}, "model: fp32")]
    )
    console = Console(record=True, width=200, color_system=None)
    print_diff_summary(console, analyse(_docs(rb), _docs(ra)))
    text = console.export_text()
    assert "precision change: .float() (model.py:" in text
    assert "no behaviour change: " in text and text.index("model: fp32") < text.index(
        "model: style"
    )


# --------------------------------------------------------------------------------------------------
# A pull weighs what its commits changed
# --------------------------------------------------------------------------------------------------
def test_a_docs_tests_and_ci_pull_is_ruled_out_not_high(tmp_path):
    work, rb, ra = _pull(
        tmp_path,
        [
            ({"docs/usage.md": "run it\n"}, "docs: usage"),
            ({"tests/test_model.py": "def test_x():\n    assert True\n"}, "tests: model"),
            ({".github/workflows/ci.yml": "on: push\n"}, "ci: run on push"),
            ({"model.py": STYLE}, "model: style only"),
        ],
    )
    an = analyse(_docs(rb), _docs(ra))
    code = next(h for h in an.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.RULED_OUT, code.summary
    assert "no commit changes what the step runs" in code.summary
    assert an.top is None and "code.change" not in an.verdict
    assert an.regression("regression") is False
    assert [classify(c).suspect for c in an.repos[0].commits] == [False] * 4
    assert all(c.hot_lines == 0 for c in an.repos[0].commits)  # docs/usage.md is no hot path


def test_a_document_about_a_hot_topic_is_not_hot_code(tmp_path):
    work, rb, ra = _pull(
        tmp_path,
        [
            ({"docs/verify.md": "the verify step\n"}, "docs: verify step"),
            ({"tests/kernels/test_attn.py": "def test():\n    pass\n"}, "tests: attention"),
            ({"model.py": PRECISION}, "model: logits in float32"),
        ],
    )
    an = analyse(_docs(rb), _docs(ra))
    assert all(c.hot_lines == 0 for c in an.repos[0].commits)
    assert "touches hot paths" not in an.top.summary and "first suspect" in an.top.summary


def test_a_pull_whose_repository_is_absent_is_inconclusive_with_the_command(tmp_path):
    work, rb, ra = _pull(tmp_path, [({"model.py": PRECISION}, "model: logits in float32")])
    for d in (rb, ra):
        d["path"] = "/srv/elsewhere/app"
        d["remotes"] = {"origin": "https://example.invalid/team/app.git"}
    an = analyse(_docs(rb), _docs(ra))
    code = next(h for h in an.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.INCONCLUSIVE, code.summary
    assert "what its commits changed is unknown" in code.summary
    assert (
        "to tell: git clone https://example.invalid/team/app.git CLONE, then forensics diff BEFORE AFTER "
        "--repo CLONE"
    ) in code.summary
    assert an.top is None
    # with the clone named, the same pull is read and weighed by its signals
    an = analyse(_docs(rb), _docs(ra), repo=work)
    assert an.top.id == "code.change" and an.top.severity is Severity.HIGH


def test_a_commit_missing_here_says_fetch(tmp_path):
    work, rb, ra = _pull(tmp_path, [({"model.py": PRECISION}, "model: logits in float32")])
    ra = dict(ra, head=dict(ra["head"], sha="f" * 40))
    (rc,) = commits_analyse(_docs(rb), _docs(ra))
    assert rc.weight().status == "unknown" and f"git -C {work} fetch --all" in rc.weight().sentence


def test_a_flash_attn_upgrade_outranks_a_docs_only_pull(tmp_path):
    work, rb, ra = _pull(tmp_path, [({"docs/usage.md": "run it\n"}, "docs: usage")])
    pk = {"torch": "2.9.1", "numpy": "2.1.0", "flash-attn": "2.6.3", "requests": "2.32.3"}
    soft = lambda p: section(  # noqa: E731
        {
            "python": {"version": "3.12.3", "implementation": "CPython", "executable": "python3"},
            "packages": p,
            "editable": {},
            "torch": {"version": "2.9.1", "build": "cu128"},
        }
    )
    b = _docs(rb, software=soft(pk))
    a = _docs(ra, software=soft(dict(pk, **{"flash-attn": "2.7.4.post1"})))
    an = analyse(b, a)
    assert an.top is not None and an.top.id == "python.packages", an.verdict
    assert "flash-attn" in an.top.summary and an.top.severity is Severity.HIGH
    assert any("attention" in e for e in an.top.evidence)
    code = next(h for h in an.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.RULED_OUT
    # an ordinary package is still "other packages", and weighs less than the GPU stack
    other = analyse(
        _docs(rb, software=soft(pk)), _docs(rb, software=soft(dict(pk, requests="2.32.4")))
    )
    assert other.top.severity is Severity.LOW and other.top.score < an.top.score


def test_order_puts_suspects_first_and_behaviour_free_last(tmp_path):
    work, rb, ra = _pull(
        tmp_path,
        [
            ({"model.py": STYLE}, "style"),
            ({"serve/engine.py": "def run(x):\n    return x\n"}, "engine: first version"),
            ({"model.py": PRECISION}, "precision"),
        ],
    )
    (rc,) = commits_analyse(_docs(rb), _docs(ra))
    assert [c.subject for c in order(list(reversed(rc.commits)))] == [
        "precision",
        "engine: first version",
        "style",
    ]
    assert commits_mod.classify(rc.commits[1]).why.startswith("behaviour change in serve/engine.py")


def test_a_secret_in_a_changed_line_is_redacted_in_the_reasons(tmp_path):
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR"
    base = {"serve.py": f'TOKEN = "hf_{"old" * 9}"\n\ndef f(x):\n    return x\n'}
    work, rb, ra = _pull(
        tmp_path,
        [({"serve.py": f'TOKEN = "{token}"\n\ndef f(x):\n    return x\n'}, "rotate")],
        base=base,
    )
    an = analyse(_docs(rb), _docs(ra))
    assert classify(an.repos[0].commits[0]).signals  # a changed module constant
    for text in (render_json(an), render_markdown(an), render_html(an)):
        assert token not in text


def test_the_read_budget_judges_later_files_by_their_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(commits_mod, "MAX_READ_TOTAL", 1)
    work, rb, ra = _pull(
        tmp_path, [({"model.py": STYLE}, "style"), ({"model.py": PRECISION}, "precision")]
    )
    (rc,) = commits_analyse(_docs(rb), _docs(ra))
    assert any("judged by their paths" in n for n in rc.notes)
    newest = next(c for c in rc.commits if c.subject == "precision")  # read first (git log order)
    assert (
        classify(newest).signals
        and not classify(next(c for c in rc.commits if c.subject == "style")).files[0].read
    )


def _flash_attn_pair(imported: list[str] | None):
    pk = {"torch": "2.9.1", "flash-attn": "2.6.3"}
    soft = lambda p: section(  # noqa: E731
        {
            "python": {"version": "3.12.3"},
            "packages": p,
            "editable": {},  # noqa: E731
            "torch": {"version": "2.9.1", "build": "cu128"},
        }
    )
    bench = None
    if imported is not None:
        bench = {
            "schema": "forensics.bench/1",
            "results": [
                {
                    "name": "user.step_ms",
                    "kind": "user",
                    "unit": "ms",
                    "higher_is_better": False,
                    "process_medians": [3.57, 3.56, 3.57, 3.58, 3.57],
                    "loaded_packages": imported,
                }
            ],
        }
    return (
        snapshot({"software": soft(pk)}, bench=bench),
        snapshot({"software": soft(dict(pk, **{"flash-attn": "2.7.4.post1"}))}, bench=bench),
    )


def test_a_gpu_stack_package_the_step_imported_weighs_more_than_one_it_never_imported():
    used = analyse(*_flash_attn_pair(["flash_attn", "torch"]))
    unused = analyse(*_flash_attn_pair(["torch"]))
    h_used = next(h for h in used.hypotheses if h.id == "python.packages")
    h_unused = next(h for h in unused.hypotheses if h.id == "python.packages")
    assert h_used.severity is Severity.HIGH and any(
        "step imported flash_attn" in e for e in h_used.evidence
    )
    assert h_unused.severity is Severity.MEDIUM and any(
        "never imported flash_attn" in e for e in h_unused.evidence
    )
    assert h_used.score > h_unused.score


def test_the_step_records_the_installed_packages_it_imported(tmp_path):
    from forensics.bench.user import run_cmd_process, user_result

    step = tmp_path / "step.py"
    step.write_text(
        "import json, yaml\nfor v in (1.0, 1.1, 1.0):\n"
        "    print(json.dumps({'metric': 'step_ms', 'value': v}))\n"
    )
    rec = run_cmd_process(f"{sys.executable} {step}", metric=None, metric_regex=None, timeout_s=120)
    assert (
        "yaml" in rec["loaded_packages"] and "json" not in rec["loaded_packages"]
    )  # stdlib is not a package
    at_start = subprocess.run(
        [sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if "_distutils_hack" in at_start:  # setuptools' .pth imports it in every process, not the step
        assert "_distutils_hack" not in rec["loaded_packages"]
    res = user_result("user.step_ms", [rec, rec, rec], unit="ms", higher_is_better=False)
    assert "yaml" in res["loaded_packages"]
