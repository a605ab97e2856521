"""Judging the ``libs`` probe: cuda.version and nccl.version (pure, no I/O).

cuda.version covers the CUDA libraries torch loads: the runtime (libcudart) and cuDNN.

What is *loaded* (the version the library reports) decides; the toolkit on
PATH (nvcc) and variables that claim a version are weaker evidence and are
never confused with it. torch.version is judged by the ``software`` probe.
"""

from __future__ import annotations

from typing import Any

from forensics.model import (
    Finding,
    Severity,
    implicated,
    inconclusive,
    is_missing,
    is_unrecorded,
    ruled_out,
)
from forensics.probe import ProbeResult


def _ver(data: Any, kind: str, key: str = "version") -> str | None:
    entry = data.get(kind) if isinstance(data, dict) else None
    v = entry.get(key) if isinstance(entry, dict) and not is_missing(entry) else None
    return v if isinstance(v, str) else None


def _where(data: Any, kind: str) -> str:
    entry = data.get(kind) if isinstance(data, dict) else None
    if not isinstance(entry, dict) or is_missing(entry):
        return "not found"
    wheel = entry.get("wheel")
    return f"{entry.get('source')}" + (f", {wheel}" if isinstance(wheel, str) else "")


def _source(data: Any, kind: str) -> str | None:
    entry = data.get(kind) if isinstance(data, dict) else None
    return entry.get("source") if isinstance(entry, dict) and not is_missing(entry) else None


def _unheld(data: Any, kind: str) -> str | None:
    """The reason when ``kind`` (or its version) was not in the text a side was imported from."""
    entry = data.get(kind) if isinstance(data, dict) else None
    if is_unrecorded(entry):
        return entry.get("detail", "not recorded")
    if isinstance(entry, dict) and is_unrecorded(entry.get("version")):
        return entry["version"].get("detail", "not recorded")
    return None


def _claim(data: Any, name: str) -> str | None:
    claims = data.get("env_claims") if isinstance(data, dict) else None
    v = claims.get(name) if isinstance(claims, dict) else None
    return v if isinstance(v, str) else None


def _judge_one(hyp: str, kind: str, what: str, claim: str, b: Any, a: Any, extra=()) -> Finding:
    vb, va = _ver(b, kind), _ver(a, kind)
    asked = all(_source(d, kind) in ("torch_lib", "nvidia_wheel", "system", None) for d in (b, a))
    ev = [
        f"{what} loaded: {vb or 'n/a'} ({_where(b, kind)}) -> {va or 'n/a'} ({_where(a, kind)})"
        + (" (asked from the library via ctypes)" if asked else "")
    ]
    unheld = [
        f"{side}: {why}" for side, d in (("before", b), ("after", a)) if (why := _unheld(d, kind))
    ]
    if unheld:
        # A side imported from a text that does not name this library: unknown, neither same nor changed.
        found = [f for f in extra]
        if found:
            sev, rel, summary = max(
                found,
                key=lambda t: (
                    [
                        Severity.INFO,
                        Severity.LOW,
                        Severity.MEDIUM,
                        Severity.HIGH,
                        Severity.CRITICAL,
                    ].index(t[0]),
                    t[1],
                ),
            )
            return implicated(
                hyp,
                sev,
                summary,
                ev + [f"{what} not compared ({'; '.join(unheld)})"],
                relevance=rel,
                fields=[f"{kind}.version"],
            )
        return inconclusive(hyp, f"{what} not compared: {'; '.join(unheld)}", ev)
    for side, d, v in (("before", b, vb), ("after", a, va)):
        c = _claim(d, claim)
        if c and v and not c.startswith(v) and not v.startswith(c.split("-")[0]):
            ev.append(
                f"{side}: {claim}={c} but the {what} loaded is {v}: the variable is not the library in use"
            )
    tb, ta = _ver(b, "torch", "cuda_build_tag"), _ver(a, "torch", "cuda_build_tag")
    if tb or ta:
        ev.append(f"torch CUDA build tag {tb or 'n/a'} -> {ta or 'n/a'} (package metadata)")
    findings: list[tuple[Severity, float, str]] = []
    if vb and va and vb != va:
        findings.append((Severity.HIGH, 0.9, f"{what} loaded {vb} -> {va}"))
    elif (vb is None) != (va is None) and (vb or va):
        findings.append(
            (Severity.MEDIUM, 0.6, f"{what} {vb or 'not found'} -> {va or 'not found'}")
        )
    for f in extra:
        findings.append(f)
    cb, ca = _claim(b, claim), _claim(a, claim)
    claims_held = not any(is_unrecorded(d.get("env_claims")) for d in (b, a) if isinstance(d, dict))
    if cb != ca and claims_held:
        ev.append(
            f"{claim} variable {cb or 'unset'} -> {ca or 'unset'} (a claim, not the loaded library)"
        )
        if not findings and (vb is None or vb == va):
            findings.append(
                (
                    Severity.LOW,
                    0.2,
                    f"{claim} variable {cb or 'unset'} -> {ca or 'unset'} "
                    "(the loaded library did not change)"
                    if vb
                    else f"{claim} variable {cb or 'unset'} -> {ca or 'unset'}",
                )
            )
    if findings:
        order = [Severity.INFO, Severity.LOW, Severity.MEDIUM, Severity.HIGH, Severity.CRITICAL]
        sev, rel, summary = max(findings, key=lambda t: (order.index(t[0]), t[1]))
        return implicated(hyp, sev, summary, ev, relevance=rel, fields=[f"{kind}.version"])
    if vb and va:
        return ruled_out(hyp, f"{what} {va} loaded on both ({_where(a, kind)})", ev)
    return inconclusive(hyp, f"{what} not found on either side", ev)


def judge_libs(before: ProbeResult | None, after: ProbeResult | None) -> list[Finding]:
    """cuda.version and nccl.version findings from two ``libs`` sections."""
    b = before.data if before is not None and before.usable else None
    a = after.data if after is not None and after.usable else None
    if b is None or a is None:
        return []  # one side alone shows nothing here; the ledger marks both hypotheses inconclusive
    nb, na = _ver(b, "nvcc"), _ver(a, "nvcc")
    extra = []
    if nb and na and nb != na:
        extra.append((Severity.MEDIUM, 0.6, f"CUDA toolkit on PATH (nvcc) {nb} -> {na}"))
    db, da = _ver(b, "cudnn"), _ver(a, "cudnn")
    cudnn_changed = bool(db and da and db != da)
    # cuDNN is a CUDA library the step loads (convolution and attention kernels). From an nvidia-* wheel its
    # change is judged with the other CUDA library wheels from the package list; from torch/lib or the
    # system, only this probe sees it.
    cudnn_own = cudnn_changed and "nvidia_wheel" not in (_source(b, "cudnn"), _source(a, "cudnn"))
    if cudnn_own:
        extra.append((Severity.HIGH, 0.85, f"cuDNN loaded {db} -> {da}"))
    cuda = _judge_one("cuda.version", "cuda_runtime", "CUDA runtime", "CUDA_VERSION", b, a, extra)
    if cudnn_changed:
        cuda.evidence.append(
            f"cuDNN loaded: {db} ({_where(b, 'cudnn')}) -> {da} ({_where(a, 'cudnn')}): convolution and "
            "attention kernels, and the heuristics that pick them, come from it"
        )
    if cudnn_own and "cuDNN" not in cuda.summary:
        cuda.summary += f"; cuDNN {db} -> {da}"
    cuda.evidence.append(
        f"nvcc on PATH: {nb or 'none'} -> {na or 'none'} (toolkit, not what torch loads)"
    )
    out = [cuda, _judge_one("nccl.version", "nccl", "NCCL", "NCCL_VERSION", b, a)]
    for f in out:
        f.probe = "libs"
    return out
