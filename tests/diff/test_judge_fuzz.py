"""Every judge against blanked and mutated fields of the real snapshots (examples/*/before.json, after.json).

A hypothesis may be ruled out only by data present on both sides: blanking a field (recorded as
missing, as a probe does on "no permission") or mangling it (wrong type, out of range) must never
turn a hypothesis the real data left implicated or inconclusive into "ruled-out". Seen before the
fix: BEFORE's GPU process list missing turned the busy-GPU example's cause from implicated into
ruled-out. Mutations are seeded and bounded; no timings.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import re
from pathlib import Path

import pytest

from forensics.model import missing
from forensics.probe import JudgeContext, ProbeResult
from forensics.registry import find_probe_class
from tests.conftest import H200, ROOT

EXAMPLES = ROOT / "examples"
CASES = ("busy-gpu", "nccl-lost", "silent-pull")
_WILD = re.compile(r"^(GPU-.*|\d+)$")  # per-GPU keys and numbered items: one shape for all of them


@functools.lru_cache(maxsize=None)
def _probe(name: str):
    return find_probe_class(name)


def _pair(case: str) -> tuple[dict, dict]:
    return tuple(
        json.loads((EXAMPLES / case / f"{side}.json").read_text()) for side in ("before", "after")
    )


def _judge_all(before: dict, after: dict) -> tuple[dict[str, set[str]], list[str]]:
    """{hypothesis: statuses its findings have}, and the judges that raised ("probe: Error: text")."""
    statuses: dict[str, set[str]] = {}
    crashed: list[str] = []
    pb, pa = before["probes"], after["probes"]
    for name in sorted(set(pb) | set(pa)):
        probe = _probe(name)
        if probe is None:
            continue
        sb = ProbeResult.from_json(pb[name]) if name in pb else None
        sa = ProbeResult.from_json(pa[name]) if name in pa else None
        try:
            found = list(probe.judge(sb, sa, JudgeContext(before, after)))
        except Exception as exc:  # noqa: BLE001 - recorded; the test says which judge broke
            crashed.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        for f in found:
            statuses.setdefault(f.hypothesis, set()).add(f.status.value)
    return statuses, crashed


def _shapes(obj, prefix=(), depth=0, maxdepth=5):
    """Field shapes of a probe tree: ("gpu", "data", "gpus", "*", "processes"); GPUs and list items wildcarded."""
    if isinstance(obj, dict) and "missing" not in obj and depth < maxdepth:
        for k, v in obj.items():
            s = prefix + ("*" if _WILD.match(str(k)) else k,)
            yield s
            yield from _shapes(v, s, depth + 1, maxdepth)
    elif isinstance(obj, list) and obj and depth < maxdepth:
        for v in obj[:3]:
            yield from _shapes(v, prefix + ("[]",), depth + 1, maxdepth)


def _set_all(doc: dict, shape: tuple, make) -> dict:
    """A copy of ``doc`` with every field of ``shape`` (under ``probes``) replaced by ``make(old)``."""
    out = dict(doc, probes=json.loads(json.dumps(doc["probes"])))  # faster than deepcopy

    def rec(node, rest):
        k, more = rest[0], rest[1:]
        if k == "[]":
            for item in node if isinstance(node, list) else []:
                rec(item, more)
            return
        if not isinstance(node, dict):
            return
        for key in (
            [x for x in node if _WILD.match(str(x))] if k == "*" else ([k] if k in node else [])
        ):
            if more:
                rec(node[key], more)
            else:
                node[key] = make(node[key])

    rec(out["probes"], shape)
    return out


def _new_rule_outs(base: dict[str, set[str]], got: dict[str, set[str]]) -> list[str]:
    return sorted(
        h for h, st in got.items() if "ruled-out" in st and "ruled-out" not in base.get(h, set())
    )


def test_no_judge_rules_out_on_a_blank_field():
    """Each field of the real snapshots blanked in turn, on each side: no judge rules out on the blank."""
    bad = []
    for case in CASES:
        before, after = _pair(case)
        base, _ = _judge_all(before, after)
        shapes = sorted(
            {
                s
                for doc in (before, after)
                for s in _shapes(doc["probes"])
                if len(s) >= 3 and s[1] == "data"
            }
        )
        assert len(shapes) > 100, case  # the real snapshots have hundreds of fields
        for shape in shapes:
            for side in ("before", "after"):
                blank = lambda old: missing("no_permission", "blanked by the test")  # noqa: E731
                b = _set_all(before, shape, blank) if side == "before" else before
                a = _set_all(after, shape, blank) if side == "after" else after
                got, _ = _judge_all(b, a)
                for hyp in _new_rule_outs(base, got):
                    bad.append(f"{case}: {'.'.join(shape)} blank in {side} -> {hyp} ruled out")
    assert not bad, "\n".join(bad)


def test_busy_gpu_contention_not_ruled_out_when_before_process_list_is_missing():
    """The report's case: BEFORE's process list missing (no permission) on every GPU."""
    from forensics.diff.ledger import analyse

    before, after = _pair("busy-gpu")
    blanked = _set_all(
        before, ("gpu", "data", "gpus", "*", "processes"), lambda old: missing("no_permission")
    )
    hyps = {h.id: h for h in analyse(blanked, after).hypotheses}
    assert hyps["gpu.contention"].status.value == "inconclusive"
    assert "before" in hyps["gpu.contention"].summary.lower()


_MUTATIONS = [
    ("missing", lambda old: missing("error", "mutated")),
    ("null", lambda old: None),
    ("string", lambda old: "garbage"),
    ("empty string", lambda old: ""),
    ("negative", lambda old: -1),
    ("huge", lambda old: 10**30),
    ("nan", lambda old: math.nan),
    ("boolean", lambda old: True),
    ("list", lambda old: ["x", 1, None]),
    ("mapping", lambda old: {"unexpected": 1}),
]
FUZZ_PER_CASE = 120


def _fuzz_plan(seed: int = 20261201):
    rng = random.Random(seed)
    for case in CASES:
        before, after = _pair(case)
        shapes = sorted(
            {
                s
                for doc in (before, after)
                for s in _shapes(doc["probes"])
                if len(s) >= 3 and s[1] == "data"
            }
        )
        for _ in range(FUZZ_PER_CASE):
            yield case, rng.choice(shapes), rng.choice(("before", "after")), rng.choice(_MUTATIONS)


def test_fuzzed_fields_never_rule_out():
    """Seeded field mutations of the real snapshots: no judge rules out on them.

    A judge that raises on a mangled field is allowed here: the ledger turns that into a note and
    leaves the probe's hypotheses inconclusive (the CLI test below checks no traceback reaches the user).
    """
    cache: dict[str, tuple] = {}
    bad = []
    for case, shape, side, (what, make) in _fuzz_plan():
        if case not in cache:
            before, after = _pair(case)
            cache[case] = (before, after, _judge_all(before, after)[0])
        before, after, base = cache[case]
        b = _set_all(before, shape, make) if side == "before" else before
        a = _set_all(after, shape, make) if side == "after" else after
        got, _ = _judge_all(b, a)
        where = f"{case}: {'.'.join(shape)} {what} in {side}"
        bad += [f"{where} -> {h} ruled out" for h in _new_rule_outs(base, got)]
    assert not bad, "\n".join(sorted(set(bad)))


DOCUMENTED_EXITS = {0, 1, 2, 3}


def test_fuzzed_snapshots_through_diff_give_a_documented_exit_and_no_traceback(tmp_path):
    """A few of the mutated snapshots written to files and diffed by the CLI, as a user would."""
    from tests.conftest import run_cli

    rng = random.Random(7)
    plan = list(_fuzz_plan())
    for i, (case, shape, side, (what, make)) in enumerate(rng.sample(plan, 8)):
        before, after = _pair(case)
        b = _set_all(before, shape, make) if side == "before" else before
        a = _set_all(after, shape, make) if side == "after" else after
        pb, pa = tmp_path / f"b{i}.json", tmp_path / f"a{i}.json"
        pb.write_text(json.dumps(b))
        pa.write_text(json.dumps(a))
        r = run_cli(
            "diff", str(pb), str(pa), "-o", str(tmp_path / f"r{i}.json"), "-q", "--fail-on", "any"
        )
        where = f"{case}: {'.'.join(shape)} {what} in {side}"
        assert r.returncode in DOCUMENTED_EXITS, (where, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, (where, r.stderr)
        if r.returncode != 2:
            report = json.loads((tmp_path / f"r{i}.json").read_text())
            assert report["verdict"] and report["hypotheses"], where


# -- the snapshot's envelope: every field the renderers read, mangled ---------------------------------------------


def _envelope_docs() -> dict[str, dict]:
    """Real documents whose envelope holds every optional field: a snapshot with a redaction and a probe
    error, and one imported from the real H200 collect_env text (``import`` section)."""
    from forensics.importers import import_files

    before, _ = _pair("nccl-lost")
    doc = copy.deepcopy(before)
    doc["redactions"] = [{"where": "probes.nccl_env.data.env.HF_TOKEN", "why": "secret by name"}]
    doc["probes"]["gpu"]["errors"] = [{"field": "gpus.*.power_limit_mw", "error": "not supported"}]
    doc["probes"]["gpu"]["source"] = "nvml"
    imported = import_files([H200 / "collect_env.txt"])
    return {"snapshot": doc, "imported": imported}


def _envelope_paths(doc: dict) -> list[tuple]:
    """Key paths of the envelope (everything but probe data): top-level keys, each probe section's keys,
    the first item of each list and its keys."""
    paths = []

    def walk(node, path, depth):
        if depth > 3:
            return
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node[:1])
            if isinstance(node, list)
            else ()
        )
        for k, v in items:
            if path[:1] == ("probes",) and k == "data":
                continue  # probe data: the judge fuzz above and each probe's types
            paths.append(path + (k,))
            walk(v, path + (k,), depth + 1)

    walk(doc, (), 0)
    return paths


def _set_path(doc: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


def _load_and_show(doc: dict) -> dict | None:
    """What ``show`` does after reading the file (validate, then the detailed summary); returns the loaded
    document, or None when the loader refuses it with a BadInputError (one line, exit 2 at the CLI)."""
    import io

    from forensics import snapshot as snap
    from forensics.errors import BadInputError
    from forensics.render.terminal import print_snapshot_summary

    try:
        doc = snap.validate(json.loads(json.dumps(doc)), Path("mutated.json"))
    except BadInputError:
        return None
    print_snapshot_summary(doc, detail=True, stream=io.StringIO())
    return doc


def _diff_and_render(doc: dict, other: dict) -> None:
    """What ``diff`` does with a loaded document on each side: redact, analyse, summary, three formats."""
    import io

    from rich.console import Console

    from forensics import snapshot as snap
    from forensics.diff.ledger import analyse
    from forensics.render.report import render
    from forensics.render.summary import print_diff_summary

    doc = snap.redact_loaded(doc)[0]
    for b, a in ((doc, other), (other, doc)):
        analysis = analyse(b, a)
        print_diff_summary(Console(file=io.StringIO(), width=100), analysis, "r.html")
        for fmt in ("html", "md", "json"):
            render(analysis, fmt)


ENVELOPE_DIFFS = 16
"""Mutated documents the loader accepts that are also diffed and rendered (seeded; ~1 s each)."""


def test_mangled_envelope_fields_are_refused_on_load_or_rendered():
    """Every envelope field x every mutation: the loader refuses it (one BadInputError) or show renders
    it, and a seeded sample of the accepted ones is diffed and rendered in the three formats; never
    another exception (which the CLI reports as an internal error, exit 4). Found by the hostile pass:
    a probe error "oops", redactions[].where a list or a number, import.files of mappings."""
    _, other = _pair("nccl-lost")
    other = dict(
        other, bench=None
    )  # the benchmark comparison is not the envelope (and costs seconds)
    broken, accepted = [], []
    for kind, doc in _envelope_docs().items():
        doc = dict(doc, bench=None)
        for path in _envelope_paths(doc):
            if path == ("schema",):
                continue  # the schema line has its own corpus (test_bad_input_corpus)
            for what, make in _MUTATIONS:
                where = f"{kind}: {'.'.join(map(str, path))} {what}"
                try:
                    loaded = _load_and_show(_set_path(doc, path, make(None)))
                except Exception as exc:  # noqa: BLE001 - collected, the assertion lists them all
                    broken.append(f"{where}: show: {type(exc).__name__}: {exc}")
                    continue
                if loaded is not None:
                    accepted.append((where, loaded))
    for where, loaded in random.Random(29).sample(accepted, min(ENVELOPE_DIFFS, len(accepted))):
        try:
            _diff_and_render(loaded, other)
        except Exception as exc:  # noqa: BLE001
            broken.append(f"{where}: diff: {type(exc).__name__}: {exc}")
    assert not broken, "\n".join(broken[:40]) + f"\n({len(broken)} in all)"


@pytest.mark.parametrize(
    "path, value",
    [
        (("probes", "gpu", "errors"), ["oops"]),
        (("redactions",), [{"where": ["a", "b"], "why": "secret by name"}]),
        (("redactions",), [{"where": 7, "why": "secret by name"}]),
        (("import", "files"), [{"a": 1}]),
    ],
)
def test_mangled_envelope_through_show_and_diff_is_exit_2(tmp_path, path, value):
    from tests.conftest import run_cli

    docs = _envelope_docs()
    doc = docs["imported" if path[0] == "import" else "snapshot"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_set_path(doc, path, value)))
    for args in (
        ["show", str(bad)],
        [
            "diff",
            str(EXAMPLES / "nccl-lost" / "before.json"),
            str(bad),
            "-o",
            str(tmp_path / "r.html"),
            "-q",
        ],
    ):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        assert (
            len(r.stderr.strip().splitlines()) == 1 and ".".join(map(str, path[:1])) in r.stderr
        ), r.stderr
    assert not (tmp_path / "r.html").exists()
