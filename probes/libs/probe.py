"""The ``libs`` probe: the CUDA runtime, NCCL and cuDNN that the installed torch would load.

What it records (top-level data keys):

- ``torch``: ``version`` from the package metadata; ``version_py``
  (``__version__``) and ``cuda`` from the text of ``torch/version.py`` (torch
  is never imported); ``cuda_build_tag`` (e.g. ``cu130``), the local version
  tag of either (wheels from the default index carry it only in version.py);
  or missing ``not_found``.
- ``cuda_runtime``, ``nccl``, ``cudnn``: the library file torch would load,
  found where pip wheels and torch put them (``torch/lib``, then
  ``site-packages/nvidia/*/lib``; system CUDA folders only when torch brings
  none), with ``version`` asked from the library itself through ctypes
  (``cudaRuntimeGetVersion``, ``ncclGetVersion``, ``cudnnGetVersion``; none of
  these starts the driver or creates a CUDA context), ``version_code`` (the raw
  integer), ``path``, ``source`` (``torch_lib``, ``nvidia_wheel`` or
  ``system``) and ``wheel`` (the pip distribution that ships it). The version
  calls run in a child Python process with a timeout, so a broken library can
  neither crash nor hang the snapshot.
- ``nvcc``: the toolkit on PATH (``nvcc --version``), kept apart: it is not
  what torch loads.
- ``env_claims``: variables that *claim* versions (``NCCL_VERSION``,
  ``CUDA_VERSION``...), kept apart from what is loaded.
- ``deep`` (only with ``--deep``): a child process imports torch and reports
  ``torch.version.cuda``, ``torch.cuda.nccl.version()``,
  ``torch.backends.cudnn.version()`` and the library files it mapped; a
  CPU-only build's NCCL, CUDA and cuDNN are ``not_applicable`` ("this torch
  build has no NCCL"), an exception is ``error`` with its text.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from forensics.model import MissingReason, is_missing, missing
from forensics.probe import FieldSpec, JudgeContext, Probe, ProbeContext, ProbeResult
from forensics.readers import name_and_version

# kind -> (file glob under a lib folder, ctypes version function, wheel name fragment)
LIBS: dict[str, tuple[str, str, str]] = {
    "cuda_runtime": ("libcudart*.so*", "cudaRuntimeGetVersion", "cuda-runtime"),
    "nccl": ("libnccl*.so*", "ncclGetVersion", "nccl"),
    "cudnn": ("libcudnn.so*", "cudnnGetVersion", "cudnn"),
}
SYSTEM_DIRS = (
    "/usr/local/cuda/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib/aarch64-linux-gnu",
)
ENV_CLAIMS = (
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
VERSION_TIMEOUT_S = 5.0
DEEP_TIMEOUT_S = 60.0

# Runs in a child: python -I -S -c _CHILD '[["nccl", "/path/libnccl.so.2"], ...]'; prints {kind: int|"error: ..."}.
# -S: without ``site`` (the child imports only ctypes and json, and opens each library by its absolute
# path), so no .pth hook runs (what they cost the child's start-up: docs/benchmarks.md, 'measured phase
# by phase').
_CHILD = r"""
import ctypes, json, sys
out = {}
for kind, path, fn in json.loads(sys.argv[1]):
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        f = getattr(lib, fn)
        if fn == "cudnnGetVersion":
            f.restype = ctypes.c_size_t
            out[kind] = int(f())
        else:
            v = ctypes.c_int(0)
            rc = f(ctypes.byref(v))
            out[kind] = int(v.value) if rc == 0 else "error: %s returned %d" % (fn, rc)
    except Exception as exc:
        out[kind] = "error: %s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""

_DEEP = r"""
import json, torch
def na(what):
    return {"missing": "not_applicable", "detail": "this torch build has no %s" % what}
def err(exc):
    return {"missing": "error", "detail": "%s: %s" % (type(exc).__name__, exc)}
out = {"torch": torch.__version__, "cuda": torch.version.cuda or na("CUDA")}
if torch.version.cuda is None or not hasattr(torch._C, "_nccl_version"):  # a CPU-only (or ROCm) build
    out["nccl"] = na("NCCL")
else:
    try:
        v = torch.cuda.nccl.version(); out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        out["nccl"] = err(exc)
try:
    v = torch.backends.cudnn.version()
    out["cudnn"] = v if v is not None else na("cuDNN")
except Exception as exc:
    out["cudnn"] = err(exc)
maps = set()
for line in open("/proc/self/maps"):
    p = line.split()[-1]
    if any(k in p for k in ("libcudart", "libnccl", "libcudnn.so")):
        maps.add(p)
out["mapped"] = sorted(maps)
print(json.dumps(out))
"""


def decode_version(kind: str, code: int) -> str:
    """Version string from the integer a library returns.

    cudaRuntimeGetVersion: 1000*major + 10*minor (13000 -> "13.0").
    ncclGetVersion: 10000*major + 100*minor + patch since 2.9 (22809 -> "2.28.9"),
    1000*major + 100*minor + patch before. cudnnGetVersion: 10000*major +
    100*minor + patch from 9.0 (91900 -> "9.19.0"), 1000*major + 100*minor + patch before.
    """
    if kind == "cuda_runtime":
        return f"{code // 1000}.{(code % 1000) // 10}"
    if code >= 20900 if kind == "nccl" else code >= 90000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def _torch_dist() -> metadata.Distribution | None:
    try:
        return metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return None


def read_torch() -> tuple[Any, Path | None]:
    """torch version, CUDA build tag and ``torch.version.cuda`` without importing torch.

    Sources: package metadata (``importlib.metadata``) and the text of
    ``torch/version.py``. Returns ``(data, site_packages_dir or None)``.
    """
    dist = _torch_dist()
    if dist is None:
        return missing(MissingReason.NOT_FOUND, "torch is not installed"), None
    site = Path(str(dist.locate_file("")))
    text = None
    try:
        text = (site / "torch" / "version.py").read_text()
    except OSError:
        pass
    out: dict[str, Any] = {"version": dist.version}
    gone = missing(MissingReason.NOT_FOUND, "torch/version.py")
    # Wheels from the default index carry no "+cu130" in their metadata; torch/version.py has it.
    out["version_py"] = parse_version_py(text, "__version__") if text else gone
    out["cuda"] = parse_version_py(text, "cuda") if text else gone
    tag = next(
        (
            v.split("+", 1)[1]
            for v in (dist.version, out["version_py"])
            if isinstance(v, str) and "+" in v
        ),
        None,
    )
    out["cuda_build_tag"] = tag or missing(
        MissingReason.NOT_APPLICABLE, "no local version tag in metadata or version.py"
    )
    return out, site


def parse_version_py(text: str, name: str) -> Any:
    """Value of ``name = '...'`` (or ``name: Optional[str] = '...'``) in torch/version.py text."""
    m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
    if not m:
        return missing(MissingReason.NOT_FOUND, f"{name} not in torch/version.py")
    val = m.group(1) if m.group(1) is not None else m.group(2)
    return (
        val if val is not None else missing(MissingReason.NOT_APPLICABLE, "CPU-only build of torch")
    )


def nvidia_distributions() -> list[tuple[str, str]]:
    """``(name, version)`` of every installed distribution named ``nvidia-*``, in
    ``importlib.metadata.distributions()`` order; ``name`` normalised (PEP 503).

    Names and versions come from the ``<name>-<version>.dist-info`` folder names
    (:func:`forensics.readers.name_and_version`): no METADATA is parsed except for other
    layouts (``.egg-info``). An environment with torch holds hundreds of distributions, and
    parsing a METADATA costs interpreter time that the other probes wait for
    (docs/benchmarks.md, 'Snapshot critical path').
    """
    out = []
    for dist in metadata.distributions():
        name, version = name_and_version(dist)
        if name and name.startswith("nvidia-"):
            out.append((name, version))
    return out


def _wheel_for(path: str, fragment: str, dists: list[tuple[str, str]] | None = None) -> Any:
    """The nvidia-* distribution (name and version) that ships ``path``, by name fragment.

    ``dists``: :func:`nvidia_distributions`, when the caller already has it.
    """
    if "/nvidia/" not in path:
        return missing(MissingReason.NOT_APPLICABLE, "not from an nvidia-* wheel")
    for name, version in nvidia_distributions() if dists is None else dists:
        if fragment in name:
            return f"{name} {version}"
    return missing(MissingReason.NOT_FOUND, f"no nvidia-*{fragment}* distribution")


def find_library(kind: str, site: Path | None, system_dirs=SYSTEM_DIRS) -> dict[str, Any] | None:
    """The file of library ``kind`` that torch would load, with its source; ``None`` if none.

    Order: ``torch/lib`` (bundled copy), ``site-packages/nvidia/*/lib`` and
    ``site-packages/nvidia/*/*/lib`` (pip wheels, e.g. ``nvidia/cu13/lib``),
    then system folders (only when torch brings none).
    """
    pattern = LIBS[kind][0]
    places: list[tuple[str, str]] = []
    if site is not None:
        places += [
            ("torch_lib", str(site / "torch" / "lib" / pattern)),
            ("nvidia_wheel", str(site / "nvidia" / "*" / "lib" / pattern)),
            ("nvidia_wheel", str(site / "nvidia" / "*" / "*" / "lib" / pattern)),
        ]
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    dirs = ([os.path.join(cuda_home, "lib64")] if cuda_home else []) + list(system_dirs)
    places += [("system", os.path.join(d, pattern)) for d in dirs]
    for source, pat in places:
        hits = sorted(p for p in glob.glob(pat) if os.path.isfile(p) and not p.endswith(".a"))
        if hits:
            # Prefer the soname-versioned file (libnccl.so.2) over a dev symlink (libnccl.so).
            hits.sort(key=lambda p: (p.endswith(".so"), len(p)))
            return {"path": hits[0], "source": source}
    return None


def query_versions(
    found: dict[str, dict[str, Any]], timeout_s: float = VERSION_TIMEOUT_S
) -> dict[str, Any]:
    """Ask each library its version in a child process (ctypes); ``{kind: int | missing}``."""
    if not found:
        return {}
    args = json.dumps([[k, v["path"], LIBS[k][1]] for k, v in found.items()])
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _CHILD, args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        res = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
        if proc.returncode != 0:
            why = missing(
                MissingReason.ERROR,
                f"version query exit {proc.returncode}: "
                f"{(proc.stderr.strip().splitlines() or [''])[-1]}",
            )
            return {k: why for k in found}
    except subprocess.TimeoutExpired:
        return {
            k: missing(MissingReason.TIMED_OUT, f"version query after {timeout_s:g} s")
            for k in found
        }
    except (OSError, ValueError, IndexError) as exc:
        return {k: missing(MissingReason.ERROR, f"version query: {exc}") for k in found}
    return {
        k: (v if isinstance(v, int) else missing(MissingReason.ERROR, str(v)))
        for k, v in res.items()
    }


class LibsProbe(Probe):
    """CUDA runtime, NCCL and cuDNN as loaded: see the module docstring."""

    name = "libs"
    description = "CUDA runtime, NCCL and cuDNN that torch loads (asked from the libraries), nvcc, version claims"
    hypotheses = ("cuda.version", "nccl.version")
    types = {
        **{k: "mapping" for k in ("torch", "cuda_runtime", "nccl", "cudnn", "nvcc", "env_claims")},
        **{f"{k}.version": "string" for k in ("torch", "cuda_runtime", "nccl", "cudnn", "nvcc")},
        "env_claims.*": "string",
    }
    map_fields = ("env_claims",)
    fields = {
        "torch.version": FieldSpec("", "torch", "package metadata"),
        "torch.cuda_build_tag": FieldSpec(
            "", "torch CUDA build tag", "package metadata (local version)"
        ),
        "cuda_runtime.version": FieldSpec(
            "", "CUDA runtime loaded", "cudaRuntimeGetVersion (ctypes)"
        ),
        "nccl.version": FieldSpec("", "NCCL loaded", "ncclGetVersion (ctypes)"),
        "cudnn.version": FieldSpec("", "cuDNN loaded", "cudnnGetVersion (ctypes)"),
        "nvcc.version": FieldSpec("", "CUDA toolkit on PATH", "nvcc --version"),
        "env_claims.*": FieldSpec("", "version claimed by a variable", "environment"),
    }

    def extra_timeout_s(self, options: dict[str, Any]) -> float:
        """Extra seconds the runner allows when ``--deep`` imports torch in a child."""
        return DEEP_TIMEOUT_S if options.get("deep") else 0.0

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        from concurrent.futures import ThreadPoolExecutor

        from forensics.procgroup import carry_children
        from forensics.readers import run_command

        with ThreadPoolExecutor(
            max_workers=1
        ) as pool:  # nvcc runs beside the version query's child
            nvcc = pool.submit(
                carry_children(run_command), ["nvcc", "--version"], min(5.0, ctx.timeout_s / 2)
            )
            data = self._loaded(ctx)
            data["nvcc"] = read_nvcc(nvcc.result())
        data["env_claims"] = {
            k: ctx.redactor.env(k, os.environ[k], f"libs.env_claims.{k}")
            for k in ENV_CLAIMS
            if k in os.environ
        }
        if ctx.option("deep"):
            data["deep"] = read_deep()
        return data

    @staticmethod
    def _loaded(ctx: ProbeContext) -> dict[str, Any]:
        """``torch`` and the three libraries: files, versions asked in a child, wheels."""
        torch, site = read_torch()
        data: dict[str, Any] = {"torch": torch}
        found = {k: f for k in LIBS if (f := find_library(k, site)) is not None}
        codes = query_versions(found, min(VERSION_TIMEOUT_S, ctx.timeout_s / 2))
        dists = (
            nvidia_distributions() if any("/nvidia/" in f["path"] for f in found.values()) else []
        )
        for kind in LIBS:
            if kind not in found:
                data[kind] = missing(
                    MissingReason.NOT_FOUND,
                    "no library file in torch/lib, nvidia wheels or system CUDA folders",
                )
                continue
            entry = dict(found[kind])
            code = codes.get(kind, missing(MissingReason.ERROR, "no answer"))
            entry["version_code"] = code
            entry["version"] = decode_version(kind, code) if isinstance(code, int) else code
            entry["wheel"] = _wheel_for(entry["path"], LIBS[kind][2], dists)
            if is_missing(code):
                ctx.error(f"{kind}.version", str(code.get("detail")))
            data[kind] = entry
        return data

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ):
        from forensics_probes.libs.judge import judge_libs

        return judge_libs(before, after)

    def headline(self, data: dict[str, Any]) -> str:
        parts = []
        for kind, label in (("cuda_runtime", "CUDA"), ("nccl", "NCCL"), ("cudnn", "cuDNN")):
            v = (data.get(kind) or {}).get("version") if isinstance(data.get(kind), dict) else None
            if isinstance(v, str):
                parts.append(f"{label} {v}")
        deep = data.get("deep")
        if isinstance(deep, dict) and is_missing(deep.get("nccl")):
            m = deep["nccl"]
            parts.append(
                f"torch's NCCL: {m['missing'].replace('_', ' ')}"
                + (f": {m['detail']}" if m.get("detail") else "")
            )
        return ", ".join(parts)


def read_nvcc(res) -> Any:
    """Parse ``nvcc --version`` (a :class:`forensics.readers.CommandResult`): release and build."""
    if not res.ok:
        return res.failure
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", res.stdout)
    if not m:
        return missing(MissingReason.ERROR, "nvcc --version: no 'release X.Y' line")
    import shutil

    return {"version": m.group(1), "build": m.group(2), "path": shutil.which("nvcc") or "nvcc"}


def read_deep(timeout_s: float = DEEP_TIMEOUT_S) -> Any:
    """Import torch in a child process and report what it loads (``--deep``)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _DEEP],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return missing(MissingReason.TIMED_OUT, f"importing torch took over {timeout_s:g} s")
    if proc.returncode != 0:
        return missing(
            MissingReason.ERROR, (proc.stderr.strip().splitlines() or ["import torch failed"])[-1]
        )
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return missing(MissingReason.ERROR, "unreadable output from the torch child")
