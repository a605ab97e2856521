"""Public incidents read after issue 13 (cases 24-26, built by tests/fixtures/cases/make_public_cases.py):
what each report must say beyond its lead, which tests/diff/test_real_cases.py checks for every case.

Sources: scottclowe/pytorch-experiment-template#11 (case24), pytorch/pytorch#47908 (case25),
choderalab/perses#613 (case26). Each case's expect.json ``note`` says what was taken and what chosen.
"""

from __future__ import annotations

import copy
import json

from _diffkit import CASES

from forensics import snapshot as snap
from forensics.diff.ledger import analyse
from forensics.model import HypothesisStatus, Severity
from forensics.render.report import render_json


def _pair(case: str):
    return snap.load(CASES / case / "before.json"), snap.load(CASES / case / "after.json")


def _doc(before, after) -> dict:
    return json.loads(render_json(analyse(before, after)))


def _hyp(doc: dict, hid: str) -> dict:
    return next(h for h in doc["hypotheses"] if h["id"] == hid)


# ---- case 24: NCCL_IB_DISABLE=1 on a multi-node job; the canary (one machine) cannot see it ---------------
def test_a_flat_canary_does_not_lower_an_inter_node_variable():
    doc = _doc(*_pair("case24_ib_disabled_roce"))
    env = _hyp(doc, "nccl.env")
    assert doc["hypotheses"][0]["id"] == "nccl.env"
    assert any(
        "ran on this machine alone" in line and "NCCL_IB_DISABLE" in line
        for line in env["evidence"]
    ), env["evidence"]
    assert any(
        line.startswith("evidence user-step-only x1 (not x0.3)") for line in env["evidence"]
    ), env["evidence"]


def test_a_same_week_library_bump_does_not_outrank_ib_disabled():
    """The reporter's model runs on transformers; a patch release the same week (added by us, a decoy) was
    ranked above NCCL_IB_DISABLE=1 while the flat single-machine canary lowered the variable x0.3."""
    before, after = _pair("case24_ib_disabled_roce")
    before["probes"]["software"]["data"]["packages"]["transformers"] = "4.51.0"
    after["probes"]["software"]["data"]["packages"]["transformers"] = "4.51.3"
    doc = _doc(before, after)
    assert doc["hypotheses"][0]["id"] == "nccl.env", doc["verdict"]
    assert doc["verdict"].startswith(
        "Measured 2.28x slower; most likely cause: nccl.env (NCCL_IB_DISABLE added"
    ), doc["verdict"]
    assert _hyp(doc, "python.packages")["status"] == "implicated"  # still shown, below


def test_an_intra_node_variable_is_still_lowered_by_a_flat_canary():
    """NCCL_P2P_DISABLE acts between the GPUs of one machine: a canary that did not move is evidence against it."""
    before, after = _pair("case24_ib_disabled_roce")
    for env in _envs(after):
        env.pop("NCCL_IB_DISABLE", None)
        env["NCCL_P2P_DISABLE"] = "1"
    env = _hyp(_doc(before, after), "nccl.env")
    assert any(line.startswith("evidence user-step-only x0.3") for line in env["evidence"]), env
    assert not any("ran on this machine alone" in line for line in env["evidence"])


def test_a_canary_started_by_a_launcher_may_span_machines():
    before, after = _pair("case24_ib_disabled_roce")
    for doc in (before, after):
        doc["bench"]["config"]["launcher"] = ["torchrun", "--nnodes", "2"]
    env = _hyp(_doc(before, after), "nccl.env")
    assert any(line.startswith("evidence user-step-only x0.3") for line in env["evidence"]), env


def _envs(doc):
    ne = doc["probes"]["nccl_env"]["data"]
    out = [ne["parent"]["env"]]
    for m in ne["start_methods"].values():
        for key in ("env", "env_at_exec"):
            if isinstance(m.get(key), dict):
                out.append(m[key])
    return out


# ---- case 25: torch 1.11.0 built for CUDA 11.3 instead of 10.2: cuDNN 7 -> 8 inside torch/lib -----------
def test_cudnn_in_torch_lib_is_reported_and_brought_by_the_torch_build():
    doc = _doc(*_pair("case25_cu113_cudnn8_convolutions"))
    cuda = _hyp(doc, "cuda.version")
    summary = cuda["summary"]
    assert summary == "CUDA runtime loaded 10.2 -> 11.3; cuDNN 7.6.5 -> 8.2.0", summary
    assert (
        "torch 1.11.0+cu102 -> 1.11.0+cu113 brought cuDNN 7.6.5 -> 8.2.0 (bundled in torch/lib): which of "
        "the two layers slowed the step is for the evidence to say"
    ) in cuda["evidence"]
    torch = _hyp(doc, "torch.version")
    assert (
        "torch 1.11.0+cu102 -> 1.11.0+cu113 brought CUDA runtime 10.2 -> 11.3, cuDNN 7.6.5 -> 8.2.0 "
        "(its bundled or pinned libraries)"
    ) in torch["evidence"]


def test_cudnn_alone_changed_in_torch_lib_implicates_cuda_version():
    """Only cuDNN moves (a torch/lib copy swapped under the same runtime): before, cuda.version was ruled out
    ('CUDA runtime 11.3 loaded on both') while the convolutions slowed."""
    before, after = _pair("case25_cu113_cudnn8_convolutions")
    before = copy.deepcopy(after)
    lib = before["probes"]["libs"]["data"]["cudnn"]
    lib.update(version="8.0.5", version_code=8005)
    before["bench"] = copy.deepcopy(_pair("case25_cu113_cudnn8_convolutions")[0]["bench"])
    doc = _doc(before, after)
    cuda = _hyp(doc, "cuda.version")
    assert cuda["status"] == "implicated" and cuda["summary"] == "cuDNN loaded 8.0.5 -> 8.2.0", cuda
    assert doc["hypotheses"][0]["id"] == "cuda.version", doc["verdict"]


# ---- case 26: a reading taken while the job ran against one taken between jobs ---------------------------
def test_an_instant_busy_reading_against_an_idle_one_is_not_throttling():
    before, after = _pair("case26_idle_clocks_false_alarm")
    a = analyse(before, after)
    thr = next(h for h in a.hypotheses if h.id == "gpu.throttling")
    assert thr.status is HypothesisStatus.RULED_OUT
    assert "SM clock 1980 MHz under load" in thr.summary, thr.summary
    raised = [
        f.summary
        for h in a.hypotheses
        for f in h.findings
        if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > Severity.INFO.weight
    ]
    assert raised == [], raised
    assert a.verdict.startswith("No significant change"), a.verdict
