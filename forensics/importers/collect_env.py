"""``python -m torch.utils.collect_env`` and vLLM's ``collect_env.py`` / ``vllm collect-env``.

Both layouts are read:

- the classic one (torch 1.0 to 2.x, vLLM before 0.9): ``Key: value`` lines, then
  blocks that continue on the following lines ("GPU models and configuration:",
  "cuDNN version: Probably one of the following:", "CPU:" with ``lscpu`` output,
  "Versions of relevant libraries:" with ``[pip3] name==version`` and
  ``[conda] name version build channel`` lines);
- vLLM's sectioned one (vLLM >= 0.9): ``==== System Info ====`` headers and
  ``Key      : value`` lines, with "vLLM Version", "vLLM Build Flags", "GPU Topology"
  and the "Environment Variables" section.

Old and new field names across torch versions are mapped to one meaning:
"Is debug build: No" (torch < 1.7) and "False"; "Version of relevant libraries"
(hand-edited) and "Versions ..."; "GPU models and configuration: GPU 0: T4" on
one line (one GPU) or one "GPU n: model" line each; full-width colons ("GPU 0： ...").

What each line means (torch/utils/collect_env.py):

- "PyTorch version": ``torch.__version__``; "CUDA used to build PyTorch": ``torch.version.cuda``;
- "CUDA runtime version": the ``nvcc --version`` on PATH (not what torch loads);
- "Nvidia driver version": from ``nvidia-smi``; "GPU models and configuration": ``nvidia-smi -L``
  (UUIDs stripped);
- "cuDNN version": cuDNN library *files* found on the system (not the one torch loads);
- "Is CUDA available": ``torch.cuda.is_available()``.
"""

from __future__ import annotations

import re
from typing import Any

from forensics.importers.common import (
    Part,
    is_na,
    local_tag,
    na_value,
    normalise,
    parse_topology,
    set_if,
    version_tuple,
)
from forensics.model import MissingReason, missing

_KV = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z0-9 _./()\-]*?)\s*[:：]\s?(?P<val>.*?)\s*$")
_SECTION = re.compile(r"^\s*=+\s*$")
_GPU_LINE = re.compile(r"^\s*GPU\s*(\d+)\s*[:：]\s*(.+?)\s*$")
_PIP = re.compile(r"^\s*\[(pip\d?|conda)\]\s+(.*)$")
_ENV_VAR = re.compile(r"^\s*([A-Z][A-Z0-9_]*)=(.*)$")

# Canonical keys: collect_env's label (lower case, any spacing) -> meaning.
_KEYS = {
    "pytorch version": "torch_version",
    "is debug build": "debug",
    "cuda used to build pytorch": "torch_cuda",
    "rocm used to build pytorch": "torch_rocm",
    "os": "os",
    "gcc version": "gcc",
    "clang version": "clang",
    "cmake version": "cmake",
    "libc version": "libc",
    "python version": "python",
    "python platform": "platform",
    "is cuda available": "cuda_available",
    "cuda runtime version": "nvcc",
    "cuda_module_loading set to": "module_loading",
    "gpu models and configuration": "gpus",
    "nvidia driver version": "driver",
    "cudnn version": "cudnn",
    "hip runtime version": "hip",
    "miopen runtime version": "miopen",
    "is xnnpack available": "xnnpack",
    "is xpu available": "xpu",
    "caching allocator config": "allocator",
    "cpu": "cpu",
    "versions of relevant libraries": "libs",
    "version of relevant libraries": "libs",
    "rocm version": "rocm",
    "neuron sdk version": "neuron",
    "vllm version": "vllm",
    "vllm build flags": "vllm_flags",
    "gpu topology": "topology",
    "nccl version": "nccl",
    "pip version": "pip_version",
}
_BLOCKS = {"gpus", "cudnn", "cpu", "libs", "topology", "vllm_flags"}


def _canon(key: str) -> str | None:
    return _KEYS.get(re.sub(r"\s+", " ", key.strip().lower()))


_TITLES = (
    "System Info",
    "PyTorch Info",
    "Python Environment",
    "CUDA / GPU Info",
    "CPU Info",
    "vLLM Info",
    "Versions of relevant libraries",
    "Environment Variables",
)
_LEGEND = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV#|NV\d*|NIC\d+)\s*[=:]|^NIC Legend")


def scan(lines: list[str]) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """Read ``lines`` into ``(values, blocks, env)``.

    ``values``: canonical key -> the text after the colon (the first occurrence wins).
    ``blocks``: canonical key -> its continuation lines (GPU list, cuDNN files, lscpu
    lines, library lines, topology rows, vLLM build flags). ``env``: ``NAME=value``
    lines of vLLM's environment-variable list.
    """
    values: dict[str, str] = {}
    blocks: dict[str, list[str]] = {}
    env: dict[str, str] = {}
    block: str | None = None
    in_env = False
    for raw in lines:
        s = raw.strip()
        if _SECTION.match(raw):
            block = None
            continue
        if s in _TITLES:
            in_env = s == "Environment Variables"
            block = "libs" if s.startswith("Versions") else None
            if block:
                blocks.setdefault(block, [])
            continue
        kv = _KV.match(raw)
        key = _canon(kv.group("key")) if kv else None
        if block == "topology" and key is None:
            if s.startswith("Legend"):
                block = "legend"
            else:
                blocks["topology"].append(raw)
            continue
        if block == "legend" and key is None:
            if not s or _LEGEND.match(s):
                continue
            block = None
        if _PIP.match(raw) and block in (
            None,
            "libs",
        ):  # the library lines, with or without their header
            blocks.setdefault("libs", []).append(s)
            block = "libs"
            continue
        m = re.match(r"^PyTorch version\s+(\S+)$", s)  # retyped without the colon
        if m:
            values.setdefault("torch_version", m.group(1))
            block = None
            continue
        env_m = _ENV_VAR.match(s)
        if env_m and (in_env or block is None):
            env[env_m.group(1)] = env_m.group(2)
            continue
        if key is not None:
            values.setdefault(key, kv.group("val"))
            block = key if key in _BLOCKS else None
            if block:
                blocks.setdefault(block, [])
            continue
        if block in ("cpu", "cudnn", "vllm_flags"):
            if s:
                blocks[block].append(s)
            else:
                block = None
            continue
        if block == "gpus":
            if _GPU_LINE.match(raw):
                blocks["gpus"].append(s)
            elif s:
                block = None
            continue
        if block == "libs" and s:
            block = None
    return values, blocks, env


def parse(lines: list[str], part: Part) -> Part:
    """Fill ``part.facts`` from collect_env text (module docstring); only what the text states."""
    values, blocks, env = scan(lines)
    label = part.label
    sw, libs, gpu, host = (
        part.section("software"),
        part.section("libs"),
        part.section("gpu"),
        part.section("host"),
    )

    torch_v = values.get("torch_version")
    if torch_v is not None and not is_na(torch_v):
        torch_v = torch_v.split()[0]
        sw["torch"] = {
            "version": torch_v,
            "build": local_tag(torch_v)
            or missing(MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)"),
        }
        lt = {"version": torch_v, "version_py": torch_v}
        cuda = values.get("torch_cuda")
        if cuda is not None:
            lt["cuda"] = (
                cuda.strip()
                if not is_na(cuda)
                else missing(
                    MissingReason.NOT_APPLICABLE,
                    f"CUDA used to build PyTorch: {cuda.strip() or 'empty'}",
                )
            )
        lt["cuda_build_tag"] = local_tag(torch_v) or missing(
            MissingReason.NOT_APPLICABLE, "no local version tag"
        )
        if values.get("cuda_available") is not None:
            lt["cuda_available"] = values["cuda_available"].strip().lower() in ("true", "yes")
        rocm = values.get("torch_rocm")
        if rocm is not None and not is_na(rocm):
            lt["rocm"] = rocm.strip()
        libs["torch"] = lt
        if isinstance(lt.get("cuda"), str):
            libs["cuda_runtime"] = {
                "version": version_tuple(lt["cuda"]),
                "source": f"torch build ({label}: CUDA used to build PyTorch)",
            }
    elif torch_v is not None:
        part.notes.append(f"PyTorch version: {torch_v.strip() or 'empty'} (torch not importable)")

    py = values.get("python")
    if py is not None and not is_na(py):
        m = re.match(r"^\s*(\d+\.\d+(?:\.\d+)?)", py)
        if m:
            sw["python"] = {"version": m.group(1)}

    _packages(blocks.get("libs", []), sw, libs, part, label)

    nvcc = values.get("nvcc")
    if nvcc is not None:
        v = nvcc.strip().lstrip("V")
        if re.match(r"^\d+\.\d+", v):
            libs["nvcc"] = {"version": version_tuple(v), "build": v}
        else:
            libs["nvcc"] = na_value(nvcc, f"{label} CUDA runtime version (nvcc --version)")

    cudnn = values.get("cudnn")
    if cudnn is not None:
        files = [f for f in blocks.get("cudnn", []) if "cudnn" in f.lower()]
        if cudnn.strip() and not cudnn.lower().startswith("probably") and not is_na(cudnn):
            files = [cudnn.strip()] + files
        versions = sorted(
            {
                m.group(1)
                for f in files
                if (m := re.search(r"libcudnn[\w]*\.(?:so|dylib)\.(\d+\.\d+\.\d+)", f))
            }
        )
        if files and "cudnn" not in libs:
            entry: dict[str, Any] = {
                "source": f"system files listed by {label} (not necessarily the one torch loads)",
                "files": files,
            }
            entry["version"] = (
                versions[0]
                if len(versions) == 1
                else missing(
                    MissingReason.NOT_RECORDED,
                    f"{label} lists files of {len(versions)} cuDNN versions ({', '.join(versions)}) "
                    "and cannot tell which one is loaded"
                    if versions
                    else f"{label} names the file without a version",
                )
            )
            libs["cudnn"] = entry
        elif is_na(cudnn) and "cudnn" not in libs:
            libs["cudnn"] = na_value(cudnn, f"{label} cuDNN version")
    nccl = values.get("nccl")
    if nccl is not None and not is_na(nccl):
        libs["nccl"] = {"version": nccl.strip(), "source": f"{label} NCCL version"}

    _gpus(values, blocks, gpu, part, label)
    if "topology" in blocks:
        matrix = parse_topology(blocks["topology"])
        if matrix:
            gpu["topology"] = {
                "matrix": matrix,
                "raw": "\n".join(blocks["topology"]),
                "command": f"nvidia-smi topo -m (as printed by {label})",
            }

    os_ = values.get("os")
    if os_ is not None and not is_na(os_):
        host["os_release"] = re.sub(
            r"\s*\((x86_64|aarch64|arm64|ppc64le|s390x|AMD64)\)\s*$", "", os_.strip()
        )
    plat = values.get("platform") or ""
    m = re.match(r"^Linux-(.+?)-(x86_64|aarch64|ppc64le|s390x)(-with-.*)?$", plat.strip())
    if m:
        host["kernel"] = m.group(1)
    _cpu(blocks.get("cpu", []), host)

    if values.get("vllm") is not None and not is_na(values["vllm"]):
        part.tool_version = values["vllm"].strip().split()[0]
        sw.setdefault("packages", {}).setdefault("vllm", part.tool_version)
    if blocks.get("vllm_flags"):
        part.notes.append("vLLM build flags: " + "; ".join(blocks["vllm_flags"]))
    if env:
        claims = {
            k: v
            for k, v in env.items()
            if k
            in (
                "CUDA_VERSION",
                "NCCL_VERSION",
                "CUDNN_VERSION",
                "NV_CUDA_LIB_VERSION",
                "NV_CUDA_CUDART_VERSION",
                "NV_LIBNCCL_PACKAGE_VERSION",
                "NV_CUDNN_VERSION",
                "NVIDIA_REQUIRE_CUDA",
                "CUDA_HOME",
            )
        }
        if claims:
            libs["env_claims"] = claims
        part.section("nccl_env")["parent"] = {"env": dict(env)}
    return part


def _packages(lines: list[str], sw: dict, libs: dict, part: Part, label: str) -> None:
    pip: dict[str, str] = {}
    conda: dict[str, str] = {}
    for ln in lines:
        m = _PIP.match(ln)
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).strip()
        if is_na(rest):
            continue
        if kind.startswith("pip"):
            nm = re.match(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\[[^\]]*\])?\s*==\s*(\S+)$", rest)
            if nm:
                pip[normalise(nm.group(1))] = nm.group(2)
            else:
                part.notes.append(f"library line not read (cut off?): {ln.strip()}")
        else:
            cols = rest.split()
            if len(cols) >= 2:
                conda[normalise(cols[0])] = cols[1]
    ran = (sw.get("torch") or {}).get("version")  # torch.__version__
    if not ran and pip.get(
        "torch"
    ):  # a fragment without "PyTorch version": the installed distribution's version
        sw["torch"] = {
            "version": pip["torch"],
            "build": local_tag(pip["torch"])
            or missing(MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)"),
        }
    if pip or conda or ran:
        packages = dict(pip)
        if ran:
            listed = pip.get("torch")
            if listed is not None and listed.split("+")[0] != ran.split("+")[0]:
                part.notes.append(
                    f"pip lists torch=={listed} but the torch that ran is {ran} (another installation "
                    "shadows it); torch is taken from 'PyTorch version'"
                )
                listed = None
            # The software probe records the distribution's metadata version: PyPI wheels carry no "+cu130"
            # there, while torch.__version__ does. Use pip's value when it names the same release.
            meta = listed or ran
            packages["torch"] = meta
            sw["torch"] = {
                "version": meta,
                "build": local_tag(meta)
                or missing(
                    MissingReason.NOT_SUPPORTED, "no local version tag (PyPI default build)"
                ),
            }
            if isinstance(libs.get("torch"), dict):
                libs["torch"]["version"] = meta
        sw["packages"] = dict(sorted({**sw.get("packages", {}), **packages}.items()))
        part.partial_lists["software.packages"] = (
            f"{label} lists only the libraries it deems relevant (torch, numpy, triton, nvidia-*, ...)"
            if pip or conda
            else f"the {label} text holds no library list; only torch, from 'PyTorch version'"
        )
    if conda:
        sw["conda_packages"] = dict(sorted(conda.items()))
    for name, version in pip.items():
        if re.match(r"^nvidia-nccl-cu\d+$|^nvidia-nccl$", name):
            libs["nccl"] = {
                "version": version,
                "source": f"pip package {name} ({label}; the library itself was not asked)",
                "wheel": f"{name} {version}",
            }
        if re.match(r"^nvidia-cuda-runtime(-cu\d+)?$", name) and isinstance(
            libs.get("cuda_runtime"), dict
        ):
            libs["cuda_runtime"]["wheel"] = f"{name} {version}"
        if re.match(r"^nvidia-cudnn(-cu\d+)?$", name):
            libs["cudnn"] = {
                "version": ".".join(version.split(".")[:3]),
                "wheel": f"{name} {version}",
                "source": f"pip package {name} ({label}; the library itself was not asked)",
            }


def _gpus(
    values: dict[str, str], blocks: dict[str, list[str]], gpu: dict, part: Part, label: str
) -> None:
    first = values.get("gpus")
    lines = ([first] if first and first.strip() else []) + blocks.get("gpus", [])
    rocm = values.get("torch_rocm")
    names: dict[int, str] = {}
    for ln in lines:
        m = _GPU_LINE.match(ln)
        if m:
            names[int(m.group(1))] = re.sub(r"\s*\(UUID:.*\)$", "", m.group(2)).strip()
        elif ln.strip() and not names and not is_na(ln):
            names[0] = ln.strip()
    driver = values.get("driver")
    non_nvidia = [n for n in names.values() if re.search(r"\bgfx\d|AMD |Radeon|Instinct", n)]
    if non_nvidia or (rocm and not is_na(rocm) and not names):
        part.notes.append(f"no NVIDIA GPU in the text ({', '.join(non_nvidia) or 'ROCm build'})")
        gpu["_unavailable"] = (
            f"no NVIDIA GPU in the {label} output ({', '.join(non_nvidia) or 'ROCm build of torch'})"
        )
        return
    if driver is not None and not is_na(driver):
        gpu["driver_version"] = driver.strip()
    elif driver is not None:
        gpu["driver_version"] = na_value(driver, f"{label} Nvidia driver version")
    if names:
        gpu["gpu_count"] = len(names)
        gpu["gpus"] = {f"index-{i}": {"index": i, "name": n} for i, n in sorted(names.items())}
    elif first is not None and is_na(first):
        gpu["_unavailable"] = (
            f"{label} found no GPU (GPU models and configuration: {first.strip() or 'empty'})"
        )


def _cpu(lines: list[str], host: dict) -> None:
    kv = {}
    for ln in lines:
        m = re.match(r"^([^:]+):\s*(.*)$", ln)
        if m:
            kv.setdefault(m.group(1).strip(), m.group(2).strip())
    if not kv:
        return
    cpu: dict[str, Any] = {}
    set_if(cpu, "model", kv.get("Model name"))
    if (kv.get("CPU(s)") or "").isdigit():
        cpu["logical_cores"] = int(kv["CPU(s)"])
    cores, sockets = kv.get("Core(s) per socket", ""), kv.get("Socket(s)", "")
    if cores.isdigit() and sockets.isdigit():
        cpu["physical_cores"] = int(cores) * int(sockets)
    if cpu:
        host["cpu"] = cpu
    numa = {
        f"node{m.group(1)}": v
        for k, v in kv.items()
        if (m := re.match(r"^NUMA node(\d+) CPU\(s\)$", k))
    }
    if numa:
        host["numa_nodes"] = numa
