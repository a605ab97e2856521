"""``python -m sglang.check_env`` (SGLang 0.1.21 and later).

``Key: value`` lines: "Python", "CUDA available", "GPU 0,1: <model>" (identical GPUs
grouped), "GPU 0,1 Compute Capability: 8.0", "CUDA_HOME", "NVCC" (``nvcc -V``),
"CUDA Driver Version" (from ``nvidia-smi``; versions before 0.2.x printed one bare
line per further GPU, kept here as one value), "PyTorch" (``torch.__version__``),
then one line per package it checks ("Module Not Found" when absent), then
"NVIDIA Topology:" with ``nvidia-smi topo -m`` and "ulimit soft". Package names are
those check_env prints (import names in older releases: PIL, zmq, multipart).
"""

from __future__ import annotations

import re

from forensics.importers.common import (
    Part,
    is_na,
    local_tag,
    normalise,
    parse_topology,
    version_tuple,
)
from forensics.model import MissingReason, missing

_KV = re.compile(r"^\s*([A-Za-z_][\w .\-/]*?|GPU [\d,]+(?: Compute Capability)?)\s*:\s?(.*?)\s*$")
_ALIASES = {"pil": "pillow", "zmq": "pyzmq", "multipart": "python-multipart"}
_NOT_PACKAGES = {
    "python",
    "cuda available",
    "rocm available",
    "musa available",
    "cuda_home",
    "rocm_home",
    "musa_home",
    "nvcc",
    "hipcc",
    "mcc",
    "cuda driver version",
    "rocm driver version",
    "musa driver version",
    "pytorch",
    "nvidia topology",
    "amd topology",
    "mthreads topology",
    "ulimit soft",
    "hypervisor vendor",
    "legend",
}


def parse(lines: list[str], part: Part) -> Part:
    """Fill ``part.facts`` from check_env text (module docstring); only what the text states."""
    sw, libs, gpu = part.section("software"), part.section("libs"), part.section("gpu")
    values: dict[str, str] = {}
    gpus: dict[int, str] = {}
    caps: dict[int, str] = {}
    packages: dict[str, str] = {}
    topo: list[str] = []
    in_topo = False
    last_key = None
    for raw in lines:
        s = raw.strip()
        if in_topo:
            if s.startswith("Legend") or s.startswith("ulimit") or s.startswith("Hypervisor"):
                in_topo = False
            else:
                topo.append(raw)
                continue
        m = _KV.match(raw)
        if not m:
            if last_key == "cuda driver version" and re.match(r"^\d+\.\d+(\.\d+)?$", s):
                continue  # the driver version repeated once per further GPU (check_env 0.1.x-0.2.x)
            continue
        key, val = m.group(1).strip(), m.group(2).strip()
        low = key.lower()
        last_key = low
        g = re.match(r"^GPU ([\d,]+)( Compute Capability)?$", key)
        if g:
            for i in g.group(1).split(","):
                if i.isdigit():
                    (caps if g.group(2) else gpus)[int(i)] = val
            continue
        if low.endswith("topology"):
            in_topo = True
            continue
        if low in _NOT_PACKAGES:
            values.setdefault(low, val)
            continue
        if low == "sglang" and not is_na(val):
            part.tool_version = val
        if val and val != "Module Not Found" and re.match(r"^\d", val):
            packages[_ALIASES.get(low, normalise(key))] = val
    py = values.get("python")
    if py and (m := re.match(r"^(\d+\.\d+(?:\.\d+)?)", py)):
        sw["python"] = {"version": m.group(1)}
    torch = values.get("pytorch")
    if torch and not is_na(torch) and torch != "Module Not Found":
        packages["torch"] = torch
        sw["torch"] = {
            "version": torch,
            "build": local_tag(torch)
            or missing(MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)"),
        }
        libs["torch"] = {
            "version": torch,
            "version_py": torch,
            "cuda_build_tag": local_tag(torch)
            or missing(MissingReason.NOT_APPLICABLE, "no local version tag"),
        }
        if "cuda available" in values:
            libs["torch"]["cuda_available"] = values["cuda available"].lower() == "true"
    if packages:
        sw["packages"] = dict(sorted(packages.items()))
        part.partial_lists["software.packages"] = (
            "sglang check_env lists only the packages SGLang depends on"
        )
    nvcc = values.get("nvcc")
    if nvcc:
        m = re.search(r"release (\d+\.\d+), V([\d.]+)", nvcc)
        libs["nvcc"] = (
            {"version": m.group(1), "build": m.group(2)}
            if m
            else missing(MissingReason.NOT_FOUND, f"sglang check_env NVCC: {nvcc}")
        )
    if (
        any(k in values for k in ("rocm available", "musa available"))
        and "cuda available" not in values
    ):
        which = "ROCm" if "rocm available" in values else "MUSA"
        gpu["_unavailable"] = (
            f"no NVIDIA GPU in the sglang check_env output ({which} build: "
            f"{', '.join(sorted(set(gpus.values()))) or 'no GPU named'})"
        )
        return part
    drv = values.get("cuda driver version")
    if drv:
        gpu["driver_version"] = (
            drv
            if not is_na(drv)
            else missing(MissingReason.NOT_FOUND, f"CUDA Driver Version: {drv}")
        )
    if gpus:
        gpu["gpu_count"] = len(gpus)
        gpu["gpus"] = {}
        for i, name in sorted(gpus.items()):
            entry = {"index": i, "name": name}
            if i in caps:
                entry["compute_capability"] = caps[i]
            gpu["gpus"][f"index-{i}"] = entry
    matrix = parse_topology(topo)
    if matrix:
        gpu["topology"] = {
            "matrix": matrix,
            "raw": "\n".join(topo).rstrip() + "\n",
            "command": "nvidia-smi topo -m (as printed by sglang check_env)",
        }
    if isinstance(libs.get("torch"), dict) and isinstance(libs["torch"].get("cuda_build_tag"), str):
        tag = libs["torch"]["cuda_build_tag"]
        if re.match(r"^cu\d{3,}$", tag):
            # torch wheels tagged cu121 bundle the CUDA 12.1 runtime; check_env prints no torch.version.cuda
            major_minor = f"{tag[2:-1]}.{tag[-1]}"
            libs["cuda_runtime"] = {
                "version": version_tuple(major_minor),
                "source": f"torch build tag {tag} (sglang check_env: PyTorch {torch})",
            }
    return part
