"""A synthetic fleet built from real H200 readings, with planted outliers (tests, ``make bench``).

Every value comes from a file recorded on a 2 x H200 machine (paths relative
to the repository root, passed in by the caller; none is installed):

- each node's snapshot: ``examples/h200x2/snapshot-all-probes.json`` (all
  probes), its two GPUs cloned to ``gpus_per_node`` (UUID, index and PCI bus
  id renumbered, nothing else changed);
- each GPU's samples under load: the canary telemetry of
  ``examples/{aa,nccl-lost,silent-pull}/*.json`` and
  ``examples/h200x2/bench/{a1,a2,p2p}.json`` (busy samples, 1980 MHz, PCIe
  Gen5 x16, SW power cap active in 18-30% of busy samples), drawn at random;
- each rank's bench figures: the per-process medians of the canary
  components (matmul TFLOP/s, H2D/D2H GB/s) of those bench files, drawn at random;
- each rank's environment: the launching process's NCCL/CUDA variables of that snapshot.

Planted (``plant=True``), each on its own node:

- ``pcie``: one GPU whose link ran at Gen3 x16 under load (samples and
  ``pcie.gen_current`` 3; its copies scaled by the link rate, 8/32 GT/s);
- ``driver``: one node with driver 470.57.02 (``tests/fixtures/cases/case01_power_brake``);
- ``nccl_algo``: one rank with ``NCCL_ALGO=Ring`` (``examples/h200x2/nccl-env-set.json``);
- ``power_cap``: one GPU whose samples are those of GPU 0 in
  ``examples/h200x2/gpu-under-load.json`` (SW power cap in 100% of busy samples, 1470 MHz).

``peer_power_cap_scale`` scales the peers' SW power cap fractions (0.25 puts
them at ~5%, the figure of issue 17; real canary runs show more: docs/bench.md, 'Limitations').
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Iterator

from forensics.env.workers.record import DEFAULT_SELECT, RANK_VARS, filter_env
from forensics.fleet.document import RECORD_SCHEMA, header, write
from forensics.gpu.readings import CLOCK_SM_MHZ, PCIE_GEN

BASE_SNAPSHOT = "examples/h200x2/snapshot-all-probes.json"
UNDER_LOAD = "examples/h200x2/gpu-under-load.json"
TELEMETRY_FILES = (
    "examples/aa/before.json",
    "examples/aa/after.json",
    "examples/nccl-lost/before.json",
    "examples/nccl-lost/after.json",
    "examples/silent-pull/before.json",
    "examples/silent-pull/after.json",
    "examples/h200x2/bench/a1.json",
    "examples/h200x2/bench/a2.json",
    "examples/h200x2/bench/p2p.json",
)
OTHER_DRIVER_FILE = "tests/fixtures/cases/case01_power_brake/after.json"
NCCL_ENV_SET = "examples/h200x2/nccl-env-set.json"
PLANTS = ("pcie", "driver", "nccl_algo", "power_cap")


class Sources:
    """The real readings a synthetic fleet is drawn from (module docstring), loaded once."""

    def __init__(self, root: Path):
        root = Path(root)
        self.base = json.loads((root / BASE_SNAPSHOT).read_text())
        load = json.loads((root / UNDER_LOAD).read_text())
        self.capped = next(iter(load["probes"]["gpu"]["data"]["sample"]["gpus"].values()))
        self.telemetry: list[dict[str, Any]] = []
        self.figures: dict[str, list[float]] = {"matmul_tflops": [], "h2d_gbps": [], "d2h_gbps": []}
        for rel in TELEMETRY_FILES:
            doc = json.loads((root / rel).read_text())
            bench = doc.get("bench") if "probes" in doc else doc
            if not isinstance(bench, dict):
                continue
            for g in (bench.get("telemetry") or {}).get("gpus", {}).values():
                if g.get("busy_samples", 0) >= 3 and isinstance(g.get(CLOCK_SM_MHZ), dict):
                    self.telemetry.append({k: v for k, v in g.items() if k != "processes"})
            for r in bench.get("results") or []:
                key = r.get("name", "").replace("component.", "")
                if key in self.figures:
                    self.figures[key] += [float(x) for x in r.get("process_medians") or []]
        other = json.loads((root / OTHER_DRIVER_FILE).read_text())
        self.other_driver = other["probes"]["gpu"]["data"]["driver_version"]
        env_set = json.loads((root / NCCL_ENV_SET).read_text())
        self.nccl_algo = env_set["probes"]["nccl_env"]["data"]["parent"]["env"]["NCCL_ALGO"]
        parent = self.base["probes"]["nccl_env"]["data"]["parent"]["env"]
        self.env = {
            k: v
            for k, v in filter_env(parent, DEFAULT_SELECT).items()
            if k not in RANK_VARS and k != "CUDA_VISIBLE_DEVICES"
        }
        if not self.telemetry or not all(self.figures.values()):
            raise ValueError(f"no canary telemetry or components found under {root}")


def _uuid(node: int, gpu: int) -> str:
    return f"GPU-{node:08x}-1111-2222-3333-{gpu:012x}"


def plan(n_nodes: int, plant: bool, gpus_per_node: int = 8) -> dict[str, tuple[int, int]]:
    """Where each planted outlier goes: name -> (node number, GPU or local rank); fixed, spread out."""
    if not plant:
        return {}
    spots = {
        "pcie": (n_nodes * 3 // 7, 3),
        "driver": (n_nodes * 5 // 9, 0),
        "nccl_algo": (n_nodes * 2 // 11, 5),
        "power_cap": (n_nodes * 7 // 8, 6),
    }
    return {k: (min(v[0], n_nodes - 1), v[1] % gpus_per_node) for k, v in spots.items()}


def node_name(i: int) -> str:
    """``node0042``."""
    return f"node{i:04d}"


def records(
    src: Sources,
    n_nodes: int,
    gpus_per_node: int = 8,
    *,
    plant: bool = True,
    seed: int = 0,
    peer_power_cap_scale: float = 1.0,
) -> Iterator[dict[str, Any]]:
    """Yield the rank records of the fleet, one rank per GPU, rank = node x gpus_per_node + GPU."""
    rng = random.Random(seed)
    spots = plan(n_nodes, plant, gpus_per_node)
    base_gpus = list(src.base["probes"]["gpu"]["data"]["gpus"].values())
    for n in range(n_nodes):
        name = node_name(n)
        snap = dict(src.base)
        snap["machine"] = {**src.base.get("machine", {}), "hostname": name}
        probes = dict(snap["probes"])
        gsec = copy.copy(probes["gpu"])
        gdata = dict(gsec["data"])
        gpus: dict[str, Any] = {}
        tel: dict[str, Any] = {}
        for i in range(gpus_per_node):
            u = _uuid(n, i)
            g = {
                **base_gpus[i % len(base_gpus)],
                "index": i,
                "uuid": u,
                "pci_bus_id": f"0000:{i + 1:02x}:00.0",
            }
            s = copy.deepcopy(rng.choice(src.telemetry))
            s["index"] = i
            frac = s.get("reason_fraction") or {}
            if "sw_power_cap" in frac:
                frac["sw_power_cap"] = round(frac["sw_power_cap"] * peer_power_cap_scale, 3)
            if spots.get("pcie") == (n, i):
                s[PCIE_GEN] = {"min": 3, "median": 3, "max": 3}
                g = {**g, "pcie": {**g["pcie"], "gen_current": 3}}
            if spots.get("power_cap") == (n, i):
                s = {**copy.deepcopy(src.capped), "index": i}
            gpus[u] = g
            tel[u] = s
        gdata["gpus"] = gpus
        gdata["gpu_count"] = gpus_per_node
        gdata.pop("sample", None)
        if spots.get("driver", (None,))[0] == n:
            gdata["driver_version"] = src.other_driver
        gsec["data"] = gdata
        probes["gpu"] = gsec
        snap["probes"] = probes
        telemetry = {"duration_s": 20.0, "interval_s": 0.1, "gpus": tel}
        for i in range(gpus_per_node):
            rank = n * gpus_per_node + i
            env = dict(src.env)
            if spots.get("nccl_algo") == (n, i):
                env["NCCL_ALGO"] = src.nccl_algo
            figs = {
                k: {
                    "value": rng.choice(v),
                    "unit": "TFLOP/s" if k.startswith("matmul") else "GB/s",
                    "noise_iqr_over_median": 0.01,
                    "blocks": 30,
                }
                for k, v in src.figures.items()
            }
            if spots.get("pcie") == (n, i):
                for k in ("h2d_gbps", "d2h_gbps"):
                    figs[k]["value"] = figs[k]["value"] * 8 / 32
            yield {
                "schema": RECORD_SCHEMA,
                "created": snap.get("created", ""),
                "label": "synthetic",
                "rank": rank,
                "local_rank": i,
                "world_size": n_nodes * gpus_per_node,
                "local_world_size": gpus_per_node,
                "node": name,
                "node_index": n,
                "hostname": name,
                "launcher": "torchrun",
                "run_id": "synthetic",
                "pid": 1000 + i,
                "launcher_vars": {},
                "env": env,
                "gpu": {"cuda_index": i, "uuid": _uuid(n, i), "source": "synthetic"},
                "bench": {
                    "device": "cuda",
                    "device_name": "NVIDIA H200",
                    "gpu_uuid": _uuid(n, i),
                    "figures": figs,
                    "duration_s": 20.0,
                },
                "snapshot": snap if i == 0 else None,
                "telemetry": telemetry if i == 0 else None,
                "errors": [],
                "redactions": [],
                "duration_s": 25.0,
            }


def write_fleet(
    path: Path,
    root: Path,
    n_nodes: int = 1000,
    gpus_per_node: int = 8,
    *,
    plant: bool = True,
    seed: int = 0,
    peer_power_cap_scale: float = 1.0,
) -> Path:
    """Write a synthetic fleet file (streamed: the fleet is never held in memory)."""
    src = Sources(root)
    head = header(
        world_size=n_nodes * gpus_per_node,
        launcher="torchrun",
        run_id="synthetic",
        gather={"channel": "synthetic"},
        missing=[],
        label="synthetic",
    )
    return write(
        path,
        head,
        records(
            src,
            n_nodes,
            gpus_per_node,
            plant=plant,
            seed=seed,
            peer_power_cap_scale=peer_power_cap_scale,
        ),
    )


NODE_SNAPSHOT = "examples/snapshot-speed/h200/final-main/snapshot.json"
"""A default ``forensics snapshot`` of the final main on an H200 machine (one GPU): the node snapshots' base."""
NVLINK_GPU_SNAPSHOT = "examples/h200x2/snapshot-all-probes.json"
"""The 2 x H200 snapshot whose GPU entries (18 NVLinks each) and NV18 topology the node's 8 GPUs copy."""
CANARY_SNAPSHOT = "examples/aa/before.json"
"""A ``forensics snapshot --bench`` of 2 x H200: its embedded canary (results, telemetry) goes into every node's."""


def node_snapshots(
    root: Path, n_nodes: int, gpus_per_node: int = 8, *, plant: bool = True, seed: int = 0
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(hostname, snapshot)`` for each node: plain ``forensics snapshot --sample`` documents.

    Each snapshot is a fresh copy of :data:`NODE_SNAPSHOT` (parsed again from its text, so no two
    nodes share an object) with ``machine.hostname`` set, its GPU list the GPU entries of
    :data:`NVLINK_GPU_SNAPSHOT` cloned to ``gpus_per_node`` (UUID, index, PCI bus id and serial
    renumbered), the NV18 topology of that machine widened to every GPU pair, and a ``sample``
    section per GPU drawn from the canary telemetry of :class:`Sources` (busy samples, as
    ``--sample`` taken while the job runs records them). Planted as in :func:`records`: one GPU at
    Gen3 under load, one node with another driver, one node whose launching environment has
    ``NCCL_ALGO=Ring``, one GPU whose samples are the real 100%-SW-power-cap ones. Every node also
    embeds the canary of :data:`CANARY_SNAPSHOT` (``--bench``), as a full snapshot would.
    """
    rng = random.Random(seed)
    src = Sources(root)
    base_text = (Path(root) / NODE_SNAPSHOT).read_text()
    nv = json.loads((Path(root) / NVLINK_GPU_SNAPSHOT).read_text())["probes"]["gpu"]["data"]
    nv_gpus = list(nv["gpus"].values())
    link = nv["topology"]["matrix"]["GPU0"]["GPU1"]
    bench_text = json.dumps(json.loads((Path(root) / CANARY_SNAPSHOT).read_text())["bench"])
    spots = plan(n_nodes, plant, gpus_per_node)
    for n in range(n_nodes):
        name = node_name(n)
        snap = json.loads(base_text)
        snap["machine"]["hostname"] = name
        snap["bench"] = json.loads(bench_text)
        gdata = snap["probes"]["gpu"]["data"]
        gpus: dict[str, Any] = {}
        samples: dict[str, Any] = {}
        for i in range(gpus_per_node):
            u = _uuid(n, i)
            g = copy.deepcopy(nv_gpus[i % len(nv_gpus)])
            g.update(
                index=i,
                uuid=u,
                pci_bus_id=f"0000:{0x18 + i * 0x10:02X}:00.0",
                serial=f"{n:07d}{i:06d}",
            )
            s = copy.deepcopy(rng.choice(src.telemetry))
            s["index"] = i
            if spots.get("pcie") == (n, i):
                s[PCIE_GEN] = {"min": 3, "median": 3, "max": 3}
                g["pcie"]["gen_current"] = 3
            if spots.get("power_cap") == (n, i):
                s = {**copy.deepcopy(src.capped), "index": i}
            gpus[u] = g
            samples[u] = s
        gdata["gpus"] = gpus
        gdata["gpu_count"] = gpus_per_node
        cols = [f"GPU{j}" for j in range(gpus_per_node)]
        gdata["topology"] = {
            "matrix": {
                a: {
                    **{b: ("X" if a == b else link) for b in cols},
                    "CPU Affinity": "0-15",
                    "NUMA Affinity": "0",
                    "GPU NUMA ID": "N/A",
                }
                for a in cols
            },
            "raw": gdata["topology"]["raw"],
            "command": gdata["topology"].get("command"),
        }
        gdata["sample"] = {"duration_s": 20.0, "interval_s": 0.1, "gpus": samples}
        if spots.get("driver", (None,))[0] == n:
            gdata["driver_version"] = src.other_driver
        if spots.get("nccl_algo", (None,))[0] == n:
            snap["probes"]["nccl_env"]["data"]["parent"]["env"]["NCCL_ALGO"] = src.nccl_algo
        yield name, snap


def write_node_snapshots(
    folder: Path,
    root: Path,
    n_nodes: int = 1000,
    gpus_per_node: int = 8,
    *,
    plant: bool = True,
    seed: int = 0,
    suffix: str = ".json",
) -> list[Path]:
    """Write :func:`node_snapshots` as ``folder/<hostname><suffix>`` (``.json``, ``.yaml`` or ``.json.gz``),
    as ``srun forensics snapshot -o snaps/%N.json`` leaves them; returns the paths."""
    import gzip

    from forensics.docfile import dumps

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, snap in node_snapshots(root, n_nodes, gpus_per_node, plant=plant, seed=seed):
        path = folder / f"{name}{suffix}"
        if suffix.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                fh.write(dumps(snap, Path(name + ".json")))
        else:
            path.write_text(dumps(snap, path), encoding="utf-8")
        out.append(path)
    return out
