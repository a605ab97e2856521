"""Which layer brought which: versions that change together, and CUDA libraries shipped as wheels.

Two facts the per-probe judges cannot see alone, because they cross the ``libs`` and
``software`` probes (pure; reads only the two snapshots):

- :func:`brought_by_torch`: torch changed (its release, or only its CUDA build tag), and NCCL, the CUDA
  runtime or cuDNN changed with it
  from torch's own folder (``torch/lib``, ``source: torch_lib``) or from an ``nvidia-*``
  pip wheel (``source: nvidia_wheel``; pip installs those as torch's pinned
  dependencies). The lines say so ("torch 2.6.0 -> 2.8.0 brought NCCL 2.21.5 -> 2.27.3
  (nvidia-nccl-cu12 wheel, installed with torch)") on the hypotheses of both layers, so
  the ranking by evidence decides which one slowed the step, and the reader sees why
  three versions moved at once.
- :func:`library_findings`: a CUDA math library wheel (cuBLAS, cuDNN, cuFFT, ...)
  changed. ``libcudart`` may stay the same while cuBLAS moves (a container roll-up), so
  the ``libs`` judge rules ``cuda.version`` out; these wheels are CUDA-toolkit
  libraries the step's kernels call, so their change implicates ``cuda.version``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from forensics.model import Finding, Severity, implicated, is_missing

CUDA_LIBRARIES: list[tuple[str, str, Severity]] = [
    (r"^nvidia-cublas", "cuBLAS", Severity.HIGH),
    (r"^nvidia-cudnn", "cuDNN", Severity.HIGH),
    (r"^nvidia-cusparselt", "cuSPARSELt", Severity.MEDIUM),
    (r"^nvidia-cufft", "cuFFT", Severity.MEDIUM),
    (r"^nvidia-cusparse(-|$)", "cuSPARSE", Severity.MEDIUM),
    (r"^nvidia-cusolver", "cuSOLVER", Severity.MEDIUM),
    (r"^nvidia-curand", "cuRAND", Severity.LOW),
    (r"^nvidia-nvjitlink", "nvJitLink", Severity.LOW),
    (r"^nvidia-cuda-nvrtc", "NVRTC", Severity.LOW),
]
"""pip distribution name pattern -> the CUDA library it ships, and how directly it touches step time."""


def _data(doc: Mapping[str, Any], probe: str) -> dict[str, Any]:
    sec = (doc.get("probes") or {}).get(probe) or {}
    data = sec.get("data") if isinstance(sec, dict) else None
    return data if isinstance(data, dict) else {}


def _packages(doc: Mapping[str, Any]) -> dict[str, str]:
    pk = _data(doc, "software").get("packages")
    return {str(k): str(v) for k, v in pk.items()} if isinstance(pk, dict) else {}


def _lib(doc: Mapping[str, Any], kind: str) -> dict[str, Any]:
    e = _data(doc, "libs").get(kind)
    return e if isinstance(e, dict) and not is_missing(e) else {}


def _torch(doc: Mapping[str, Any], build: bool = False) -> str | None:
    """torch's release (``1.11.0``); with ``build``, its version with the build tag where recorded
    (``1.11.0+cu113``): the same release built for another CUDA brings other libraries too."""
    lib = _lib(doc, "torch")
    v = (
        (lib.get("version_py") if build else None)
        or lib.get("version")
        or (_data(doc, "software").get("torch") or {}).get("version")
    )
    return v if isinstance(v, str) and v else None


def library_findings(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Finding]:
    """``cuda.version`` findings for CUDA library wheels whose version changed (software packages)."""
    pb, pa = _packages(before), _packages(after)
    if not pb or not pa:
        return []
    changed: list[tuple[str, str, Severity]] = []
    for name in sorted(set(pb) & set(pa)):
        if pb[name] == pa[name]:
            continue
        for pattern, lib, sev in CUDA_LIBRARIES:
            if re.search(pattern, name, re.I):
                changed.append((lib, f"{lib} ({name} {pb[name]} -> {pa[name]})", sev))
                break
    if not changed:
        return []
    sev = max((c[2] for c in changed), key=lambda s: s.weight)
    f = implicated(
        "cuda.version",
        sev,
        "CUDA libraries changed: " + ", ".join(c[1] for c in changed),
        [
            "CUDA-toolkit libraries installed as pip wheels (software probe, package metadata); the step's "
            "kernels call them directly, whatever libcudart's version"
        ],
        relevance=0.8 if sev is Severity.HIGH else 0.5,
        fields=["software.packages"],
    )
    f.probe = "software"
    return [f]


def brought_by_torch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[str]]:
    """Hypothesis id -> lines saying torch's upgrade brought a library change ({} when it did not)."""
    tb, ta = _torch(before), _torch(after)
    if tb and ta and tb == ta:  # the same release: another build of it (cu102 -> cu113) counts
        tb, ta = _torch(before, build=True), _torch(after, build=True)
    if not tb or not ta or tb == ta:
        return {}
    out: dict[str, list[str]] = {}
    brought = []
    for kind, label, hyp in (
        ("nccl", "NCCL", "nccl.version"),
        ("cuda_runtime", "CUDA runtime", "cuda.version"),
        ("cudnn", "cuDNN", "cuda.version"),
    ):
        b, a = _lib(before, kind), _lib(after, kind)
        vb, va = b.get("version"), a.get("version")
        if not vb or not va or vb == va or a.get("source") not in ("torch_lib", "nvidia_wheel"):
            continue
        how = (
            "bundled in torch/lib"
            if a["source"] == "torch_lib"
            else f"{a['wheel'] if isinstance(a.get('wheel'), str) else 'an nvidia-* wheel'}, installed with torch"
        )
        line = f"torch {tb} -> {ta} brought {label} {vb} -> {va} ({how})"
        out.setdefault(hyp, []).append(
            line + ": which of the two layers slowed the step is for the evidence to say"
        )
        brought.append(f"{label} {vb} -> {va}")
    if brought:
        out["torch.version"] = [
            f"torch {tb} -> {ta} brought {', '.join(brought)} (its bundled or pinned libraries)"
        ]
    return out
