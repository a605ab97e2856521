"""Probe ``software``: the Python interpreter and every installed distribution.

Fields (under ``data``):

- ``python.version`` / ``implementation`` / ``executable`` -- ``sys.version_info``,
  ``platform.python_implementation()``, ``sys.executable``.
- ``packages`` -- ``{normalised distribution name: version}`` for every
  distribution on ``sys.path``, found with ``importlib.metadata`` and read from
  the ``<name>-<version>.dist-info`` folder names (METADATA parsed only for
  other layouts): nothing is imported, so torch's import cost is never paid.
- ``editable`` -- ``{name: {"path", "url"}}`` for editable installs, from each
  distribution's ``direct_url.json`` (PEP 610, ``dir_info.editable``); ``path``
  is where their source lives (the git probe looks there for repositories).
- ``torch`` -- ``{"version", "build"}`` from torch's metadata; ``build`` is the
  local version tag (``cu130``, ``cpu``, ``rocm6.2``) or missing.

Judged hypotheses: ``torch.version`` (torch changed) and ``python.packages``
(the interpreter or any other distribution changed; GPU-stack packages first).
"""

from __future__ import annotations

import json
import platform
import re
import sys
from importlib import metadata
from typing import Any
from urllib.parse import unquote, urlparse

from forensics.model import (
    Finding,
    MissingReason,
    Severity,
    implicated,
    inconclusive,
    is_missing,
    is_unrecorded,
    missing,
    ruled_out,
)
from forensics.probe import JudgeContext, Probe, ProbeContext, ProbeResult
from forensics.readers import name_and_version, normalise

GPU_STACK_TABLE: list[tuple[str, str, float, str]] = [
    (
        r"flash[-_]attn.*",
        "flash_attn",
        0.9,
        "FlashAttention: the attention kernels of every layer (Dao-AILab/flash-attention)",
    ),
    (
        r"flashinfer.*",
        "flashinfer",
        0.9,
        "FlashInfer: attention, sampling and MoE kernels of vLLM and SGLang (flashinfer-ai/flashinfer)",
    ),
    (
        r"transformer[-_]engine.*",
        "transformer_engine",
        0.9,
        "Transformer Engine: FP8 GEMMs and fused attention (NVIDIA/TransformerEngine)",
    ),
    (
        r"vllm",
        "vllm",
        0.9,
        "vLLM: the serving engine (scheduler, kernels, CUDA graphs, defaults) (vllm-project/vllm)",
    ),
    (
        r"sglang",
        "sglang",
        0.9,
        "SGLang: the serving engine (scheduler, kernels, CUDA graphs, defaults) (sgl-project/sglang)",
    ),
    (
        r"sgl[-_]kernel",
        "sgl_kernel",
        0.8,
        "sgl-kernel: SGLang's compiled kernels (sgl-project/sglang, sgl-kernel/)",
    ),
    (
        r"xformers",
        "xformers",
        0.8,
        "xFormers: memory-efficient attention kernels (facebookresearch/xformers)",
    ),
    (
        r"triton",
        "triton",
        0.8,
        "Triton: compiles the kernels torch.compile/Inductor and vLLM generate (triton-lang/triton)",
    ),
    (
        r"deepspeed",
        "deepspeed",
        0.8,
        "DeepSpeed: ZeRO partitioning, fused optimizers, its communication path (deepspeedai/DeepSpeed)",
    ),
    (
        r"megatron.*",
        "megatron",
        0.8,
        "Megatron-Core: tensor/pipeline parallel layers and their collectives (NVIDIA/Megatron-LM)",
    ),
    (r"nvidia-nccl.*|nccl.*", "", 0.8, "NCCL as a wheel: every collective (NVIDIA/nccl)"),
    (
        r"tensorrt.*|torch[-_]tensorrt",
        "tensorrt",
        0.8,
        "TensorRT engines and kernels (NVIDIA/TensorRT)",
    ),
    (r"apex", "apex", 0.7, "Apex: fused layer norms, optimizers, mixed precision (NVIDIA/apex)"),
    (
        r"bitsandbytes",
        "bitsandbytes",
        0.7,
        "bitsandbytes: 8-bit/4-bit quantized matmuls (bitsandbytes-foundation/bitsandbytes)",
    ),
    (
        r"(nvidia-)?cutlass.*",
        "cutlass",
        0.7,
        "CUTLASS: GEMM and attention templates (NVIDIA/cutlass)",
    ),
    (
        r"nvidia-.*",
        "",
        0.6,
        "a CUDA library shipped as a wheel (cuBLAS, cuDNN...: the kernels torch calls)",
    ),
    (r"cupy.*|jax.*", "", 0.6, "another GPU array library with its own kernels (CuPy, JAX)"),
    (
        r"transformers",
        "transformers",
        0.5,
        "Transformers: model code, the attention implementation chosen, the generation loop",
    ),
    (r"accelerate", "accelerate", 0.4, "Accelerate: device placement and mixed-precision wrappers"),
    (r"torchvision|torchaudio", "", 0.3, "torchvision/torchaudio: data-side ops; a few kernels"),
    (
        r"numpy",
        "numpy",
        0.2,
        "NumPy: host-side arrays; reaches step time through data preparation only",
    ),
    (r"pynvml|nvidia-ml-py", "pynvml", 0.1, "NVML bindings: monitoring only"),
]
"""The GPU stack: normalised distribution name pattern -> (the top-level module it is imported as, "" when it
is several or none; weight; what it is on a step's path, and its project).

The weight is the finding's relevance (0..1): how directly a version change of the package reaches the step's
kernels. A change at 0.7 or above is ``high`` severity and ranks like a torch upgrade (its own evidence rule,
``gpu-stack``); the rest of the table is ``medium``; packages the table does not name are "other packages"
(``low``). Engineering estimates from the projects' own descriptions of what they ship."""

_STACK = [(re.compile(rf"^({pat})$"), imp, w, why) for pat, imp, w, why in GPU_STACK_TABLE]
TORCH_PINNED = re.compile(r"^(triton|pytorch-triton.*|nvidia-.*)$")
"""Distributions a torch wheel pins (its ``Requires-Dist``): changed together with torch they are torch's change,
kept ``medium`` here (torch.version carries it; forensics.diff.layers says which layer brought NCCL and CUDA)."""

GPU_STACK_STRONG = 0.7
"""A GPU-stack change at this weight or above is ``high`` and carries the field ``packages.gpu_stack``."""


def gpu_stack(name: str) -> tuple[float, str, str] | None:
    """(weight, what it is, import name) for a normalised distribution name of :data:`GPU_STACK_TABLE`;
    ``None`` when not listed."""
    for pattern, imp, weight, why in _STACK:
        if pattern.match(name):
            return weight, why, imp
    return None


def step_packages(doc: dict[str, Any] | None) -> set[str] | None:
    """Top-level names of the installed packages the benchmarked step imported (``loaded_packages`` of the
    ``user`` bench results, recorded in every Python process of the step); ``None`` when not recorded."""
    bench = (doc or {}).get("bench")
    out: set[str] = set()
    seen = False
    for r in (bench.get("results") or []) if isinstance(bench, dict) else []:
        pk = r.get("loaded_packages") if isinstance(r, dict) and r.get("kind") == "user" else None
        if isinstance(pk, list):
            seen = True
            out.update(str(x) for x in pk if isinstance(x, str))
    return out if seen else None


def editable_location(direct_url_text: str | None) -> dict[str, str] | None:
    """Parse a ``direct_url.json``; return ``{"path", "url"}`` if it is an editable install."""
    if not direct_url_text:
        return None
    try:
        info = json.loads(direct_url_text)
    except json.JSONDecodeError:
        return None
    if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
        return None
    url = str(info.get("url", ""))
    parsed = urlparse(url)
    path = unquote(parsed.path) if parsed.scheme == "file" else url
    return {"path": path, "url": url}


def torch_build(version: str | None):
    """The local tag of a torch version string: '2.11.0+cu130' -> 'cu130'."""
    if not version:
        return missing(MissingReason.NOT_FOUND, "torch not installed")
    _, plus, local = version.partition("+")
    return (
        local
        if plus
        else missing(MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)")
    )


class SoftwareProbe(Probe):
    """Python version and every installed distribution with its version; editable installs."""

    name = "software"
    description = "Python version/executable, installed distributions and versions, editable installs and their source"
    hypotheses = ("torch.version", "python.packages")
    map_fields = ("packages", "editable")
    types = {
        "python": "mapping",
        "python.version": "string?",
        "python.implementation": "string?",
        "python.executable": "string?",
        "packages": "mapping",
        "packages.*": "string",
        "editable": "mapping",
        "torch": "mapping",
        "torch.version": "string?",
        "torch.build": "string?",
    }

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        packages: dict[str, str] = {}
        editable: dict[str, dict[str, str]] = {}
        for dist in metadata.distributions():
            name, version = name_and_version(dist)
            if not name:
                ctx.error(
                    "packages", f"distribution without a name at {getattr(dist, '_path', '?')}"
                )
                continue
            if name not in packages:  # a later one is shadowed by the first on sys.path
                packages[name] = version
            if name in editable:
                continue
            try:
                loc = editable_location(dist.read_text("direct_url.json"))
            except Exception:
                loc = None
            if loc:
                loc["url"] = ctx.redactor.text(loc["url"], f"software.editable.{name}.url")
                editable[name] = loc
        torch_version = next((v for k, v in packages.items() if normalise(k) == "torch"), None)
        return {
            "python": {
                "version": platform.python_version(),
                "implementation": platform.python_implementation(),
                "executable": sys.executable,
            },
            "packages": dict(sorted(packages.items(), key=lambda kv: kv[0].lower())),
            "editable": editable,
            "torch": {
                "version": torch_version or missing(MissingReason.NOT_FOUND, "torch not installed"),
                "build": torch_build(torch_version),
            },
        }

    def headline(self, data: dict[str, Any]) -> str:
        py = _py(data)
        py = py if isinstance(py, str) else "?"
        torch = (data.get("torch") or {}).get("version")
        torch_s = f", torch {torch}" if isinstance(torch, str) else ", no torch"
        ed = (
            data.get("editable")
            if isinstance(data.get("editable"), dict) and not is_missing(data.get("editable"))
            else {}
        )
        ed_s = f", editable: {', '.join(sorted(ed))}" if ed else ""
        return f"Python {py}{torch_s}, {len(data.get('packages') or {})} distributions{ed_s}"

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ) -> list[Finding]:
        if not (before and after and before.usable and after.usable):
            return []  # one side alone shows nothing here; the ledger marks both hypotheses inconclusive
        out: list[Finding] = []

        def pkgs(data):
            p = data.get("packages")
            if not isinstance(p, dict) or is_missing(p):
                return None
            return {normalise(k): v for k, v in p.items() if not is_unrecorded(v)}

        bp, ap = pkgs(before.data), pkgs(after.data)
        # A list that holds only some packages (collect_env's "relevant libraries", an imported check_env)
        # says nothing about the names it leaves out: only names it lists are compared, and against a
        # complete list a name it lists but the other lacks is a real difference.
        partial = {
            side: (d.get("coverage") or {}).get("packages")
            for side, d in (("BEFORE", before.data), ("AFTER", after.data))
            if isinstance(d.get("coverage"), dict) and (d.get("coverage") or {}).get("packages")
        }
        if bp is None or ap is None:
            why = next(
                (
                    d["packages"].get("detail")
                    for d in (before.data, after.data)
                    if is_missing(d.get("packages"))
                ),
                "",
            )
            return [
                inconclusive("torch.version", f"package list not held by one side ({why})"),
                inconclusive("python.packages", f"package list not held by one side ({why})"),
            ]
        if "BEFORE" in partial and "AFTER" in partial:
            names = set(bp) & set(ap)
        elif partial:
            names = set(bp if "BEFORE" in partial else ap)
        else:
            names = set(bp) | set(ap)
        not_compared = (set(bp) | set(ap)) - names
        scope = [
            f"{side} lists only some packages: {why}; {len(not_compared)} name(s) of the other side not compared"
            for side, why in partial.items()
        ]
        bt, at = bp.get("torch"), ap.get("torch")
        if "torch" not in names and (bt is None) != (at is None):
            out.append(
                inconclusive(
                    "torch.version",
                    f"torch {bt or at} on one side; the other side's list does not name torch",
                    scope,
                )
            )
        elif bt != at:
            out.append(
                implicated(
                    "torch.version",
                    Severity.HIGH,
                    f"PyTorch changed: {bt or 'absent'} -> {at or 'absent'}",
                    ["torch distribution metadata (importlib.metadata)"] + scope,
                    relevance=0.9,
                    fields=["packages.torch"],
                )
            )
        else:
            out.append(ruled_out("torch.version", f"torch {bt or 'absent'} on both"))
        changes, stack, roles, weights = [], [], [], []
        imported = step_packages(jctx.after) if jctx is not None else None
        for name in sorted(names):
            if name == "torch" or bp.get(name) == ap.get(name):
                continue
            line = f"{name}: {bp.get(name, 'absent')} -> {ap.get(name, 'absent')}"
            known = gpu_stack(name)
            if known is None:
                changes.append(line)
                continue
            if bt != at and TORCH_PINNED.match(
                name
            ):  # torch's pinned dependency moved with it: torch.version's
                known = (
                    min(known[0], GPU_STACK_STRONG - 0.1),
                    known[1] + "; pinned by torch, changed with it",
                    known[2],
                )
            elif imported is not None and known[2] and known[2] not in imported:
                known = (
                    min(known[0], GPU_STACK_STRONG - 0.1),
                    known[1] + f"; the benchmarked step never imported {known[2]}",
                    known[2],
                )
            elif imported is not None and known[2]:
                weight = max(known[0], 0.95) if known[0] >= GPU_STACK_STRONG else known[0]
                known = (weight, known[1] + f"; the benchmarked step imported {known[2]}", known[2])
            stack.append((known[0], line))
            roles.append(f"{name}: {known[1]}")
            weights.append(known[0])
        stack.sort(key=lambda x: -x[0])  # the package nearest the kernels first
        lines = [line for _w, line in stack]
        bpy, apy = (_py(d) for d in (before.data, after.data))
        if bpy != apy and not (is_unrecorded(bpy) or is_unrecorded(apy)):
            lines.insert(0, f"Python {bpy} -> {apy}")
            weights.append(0.6)
        if lines:
            top = max(weights)
            strong = top >= GPU_STACK_STRONG
            out.append(
                implicated(
                    "python.packages",
                    Severity.HIGH if strong else Severity.MEDIUM,
                    f"{len(lines)} GPU-stack package(s) changed: {'; '.join(lines[:3])}"
                    + (" ..." if len(lines) > 3 else ""),
                    lines + roles + changes + scope,
                    relevance=max(0.6, top),
                    fields=["packages", "packages.gpu_stack"] if strong else ["packages"],
                )
            )
        elif changes:
            out.append(
                implicated(
                    "python.packages",
                    Severity.LOW,
                    f"{len(changes)} other package(s) changed: {'; '.join(changes[:3])}"
                    + (" ..." if len(changes) > 3 else ""),
                    changes + scope,
                    relevance=0.3,
                    fields=["packages"],
                )
            )
        elif partial:
            out.append(
                ruled_out(
                    "python.packages",
                    f"the {len(names)} distribution(s) listed on both sides are the same "
                    f"(Python {_shown(bpy)} / {_shown(apy)})",
                    scope,
                )
            )
        else:
            out.append(
                ruled_out(
                    "python.packages",
                    f"Python {apy} and all {len(ap)} distributions the same on both",
                )
            )
        return out


def _py(data: dict[str, Any]) -> Any:
    py = data.get("python")
    if is_missing(py):
        return py
    return (py or {}).get("version") if isinstance(py, dict) else None


def _shown(v: Any) -> str:
    return "not recorded" if is_missing(v) else str(v)
