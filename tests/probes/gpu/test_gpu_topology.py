"""The topology matrix from NVML (forensics_probes.gpu.topology) against what nvidia-smi topo -m printed.

The fake NVML replays the 2 x H200 capture (tests/fixtures/h200x2/nvml_torch.json); the nvidia-smi text
is that machine's real ``nvidia-smi topo -m`` (tests/fixtures/h200x2/nvidia-smi-topo.txt). Where NVML can
answer, the probe records the same matrix without running nvidia-smi; where it cannot (network cards,
NVLinks through an NVSwitch, calls this nvidia-ml-py lacks) it runs nvidia-smi as before.
"""

from __future__ import annotations

import pynvml
import pytest
from _fakenvml import FakePynvml
from forensics_probes.gpu import topology
from forensics_probes.gpu.probe import GpuProbe, parse_topo

from forensics.gpu.nvml import Nvml
from forensics.probe import ProbeContext
from forensics.readers import CommandResult
from tests.conftest import FIXTURES

TOPO = (FIXTURES / "h200x2" / "nvidia-smi-topo.txt").read_text()
PLAIN = TOPO.replace("\x1b[4m", "").replace(
    "\x1b[0m", ""
)  # as the probe reads it (ANSI codes stripped)


def collect(tmp_path, nics=(), **fake):
    """The probe's data and the nvidia-smi commands it ran (a runner that answers with the real text)."""
    ran = []

    def runner(argv, timeout):
        ran.append(argv)
        return CommandResult(True, TOPO)

    folder = tmp_path / "infiniband"
    folder.mkdir(exist_ok=True)
    for name in nics:
        (folder / name).mkdir()
    probe = GpuProbe(
        nvml=Nvml(FakePynvml("idle", **fake)), topo_runner=runner, nic_folder=str(folder)
    )
    ctx = ProbeContext({})
    assert probe.available(ctx) is None
    return probe.collect(ctx), ran


def test_nvml_gives_the_matrix_nvidia_smi_printed_without_running_it(tmp_path):
    data, ran = collect(tmp_path, topology={})
    assert ran == []
    assert (
        data["topology"]["matrix"]
        == parse_topo(PLAIN)
        == {
            "GPU0": {
                "GPU0": "X",
                "GPU1": "NV18",
                "CPU Affinity": "0-31",
                "NUMA Affinity": "0",
                "GPU NUMA ID": "N/A",
            },
            "GPU1": {
                "GPU0": "NV18",
                "GPU1": "X",
                "CPU Affinity": "0-31",
                "NUMA Affinity": "0",
                "GPU NUMA ID": "N/A",
            },
        }
    )
    assert data["topology"]["command"] == topology.SOURCE
    assert data["topology"]["raw"] == PLAIN  # the text nvidia-smi printed, ANSI codes aside


def test_without_nvlinks_the_pcie_path_comes_from_the_common_ancestor(tmp_path):
    def idle_links(r):
        for dev in r["devices"]:
            for link in dev["nvlink"]:
                link["state"] = 0

    data, ran = collect(tmp_path, topology={"ancestor": pynvml.NVML_TOPOLOGY_NODE}, edit=idle_links)
    assert ran == []
    matrix = data["topology"]["matrix"]
    assert (matrix["GPU0"]["GPU1"], matrix["GPU1"]["GPU0"]) == ("NODE", "NODE")


@pytest.mark.parametrize(
    "case", ["switch", "nics", "old nvidia-ml-py", "no memory node", "two memory nodes"]
)
def test_what_nvml_cannot_say_is_asked_of_nvidia_smi(tmp_path, case):
    kw = {
        "switch": {"topology": {"far_type": pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH}},
        "nics": {"topology": {}, "nics": ["mlx5_0"]},
        "old nvidia-ml-py": {},
        "no memory node": {"topology": {"memory_nodes": [0]}},
        "two memory nodes": {"topology": {"memory_nodes": [0b11]}},
    }[case]  # the default fake answers FunctionNotFound to the topology calls
    data, ran = collect(tmp_path, **kw)
    assert ran == [["nvidia-smi", "topo", "-m"]]
    assert data["topology"]["command"] == "nvidia-smi topo -m"
    assert data["topology"]["matrix"] == parse_topo(PLAIN)
    assert data["topology"]["raw"] == PLAIN


def test_reasons_name_what_nvml_could_not_give(tmp_path):
    nv = Nvml(FakePynvml("idle", topology={"far_type": pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH}))
    devices = nv.devices()
    assert (
        topology.from_nvml(nv, devices, str(tmp_path))
        == "GPU0 NVLink 0 ends in an NVSwitch or another device"
    )
    nv = Nvml(
        FakePynvml("idle", topology={}, edit=lambda r: r["devices"][1].update(mig_mode=[1, 1]))
    )
    assert topology.from_nvml(nv, nv.devices(), str(tmp_path)) == "GPU1: MIG mode"
    (tmp_path / "mlx5_0").mkdir()
    assert topology.from_nvml(nv, nv.devices(), str(tmp_path)).startswith("network cards in ")


def test_one_gpu_text_is_what_nvidia_smi_printed_on_the_1_gpu_h200():
    real = (
        "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n"  # examples/snapshot-speed
        + topology.LEGEND
    )
    assert topology.render(parse_topo(real)) == real


def test_cpu_and_node_masks_read_as_nvidia_smi_writes_them():
    assert topology.ranges([0xFFFF, 0, 0, 0]) == "0-15"
    assert topology.ranges([2**32 - 1]) == "0-31"
    assert topology.ranges([0xFFFF, 0xFFFF]) == "0-15,64-79"
    assert topology.ranges([0b1011]) == "0-1,3"
    assert topology.ranges([0, 0]) == "N/A"


def test_nvidia_smi_topo_runs_out_of_reach_of_the_terminals_ctrl_c(tmp_path):
    """The probe runs nvidia-smi from a thread of its own while NVML is read: that child, like the probe's
    others, starts in a session of its own (the terminal's Ctrl-C to forensics' group does not reach it; the
    runner ends it with the probe). It was started in forensics' process group."""
    import os
    import sys

    from forensics.procgroup import ChildGroups, probe_children
    from forensics.readers import run_command

    groups = []

    def runner(argv, timeout):  # a real child in nvidia-smi's place: says its process group
        res = run_command([sys.executable, "-c", "import os; print(os.getpgid(0))"], timeout)
        groups.append(int(res.stdout))
        return CommandResult(True, TOPO)

    probe = GpuProbe(
        nvml=Nvml(FakePynvml("idle")),  # without the topology calls: nvidia-smi is asked
        topo_runner=runner,
        nic_folder=str(tmp_path),
    )
    with probe_children(ChildGroups()):
        data = probe.collect(ProbeContext({}))
    assert data["topology"]["command"] == "nvidia-smi topo -m"
    assert len(groups) == 1 and groups[0] != os.getpgrp()
