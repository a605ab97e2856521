"""PCI facts from sysfs and procfs (forensics.gpu.pci) on fake sysfs trees shaped like real ones, and
the ACS values of real lspci captures (tests/fixtures/sysfs/, each with its source URL)."""

import os

import pytest
from conftest import real_text

from forensics.gpu import pci


def config_with_acs(ctl: int, cap: int = 0x005F, size: int = 4096) -> bytes:
    """A config space whose extended list is: AER (0x0001) at 0x100 -> ACS (0x000D) at 0x148."""
    b = bytearray(size)
    b[0x100:0x104] = (0x0001 | (1 << 16) | (0x148 << 20)).to_bytes(4, "little")
    b[0x148:0x14C] = (0x000D | (1 << 16) | (0 << 20)).to_bytes(4, "little")
    b[0x14C:0x14E] = cap.to_bytes(2, "little")
    b[0x14E:0x150] = ctl.to_bytes(2, "little")
    return bytes(b)


def make_tree(root, chain, configs, numa="-1", cpulist="0-15", group=None):
    """sysfs with devices/pci0000:00/<chain...>, bus/pci/devices links, and config files."""
    path = root / "devices" / "pci0000:00"
    for bdf in chain:
        path = path / bdf
        path.mkdir(parents=True)
        (path / "config").write_bytes(configs.get(bdf, bytes(64)))
    (path / "numa_node").write_text(numa + "\n")
    (path / "local_cpulist").write_text(cpulist + "\n")
    links = root / "bus" / "pci" / "devices"
    links.mkdir(parents=True)
    for i, bdf in enumerate(chain):
        os.symlink(root / "devices" / "pci0000:00" / os.path.join(*chain[: i + 1]), links / bdf)
    if group is not None:
        g = root / "kernel" / "iommu_groups" / "7"
        g.mkdir(parents=True)
        (g / "type").write_text(group + "\n")
        os.symlink(g, path / "iommu_group")
    (root / "class" / "iommu").mkdir(parents=True)
    return path


def test_acs_0x001d_of_nccl_2079_decodes_like_lspci():
    acs = pci.acs_from_config(config_with_acs(0x001D))
    assert acs["control"] == "0x001d" and acs["redirect"] is True
    assert pci.acs_text(acs["control_flags"]) == (
        "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    )


def test_acs_needs_root_when_only_64_bytes_are_readable():
    acs = pci.acs_from_config(config_with_acs(0x001D)[:64])
    assert acs == {"missing": "no_permission", "detail": pci.NEEDS_ROOT}


def test_no_acs_capability_is_not_supported_not_off():
    b = bytearray(4096)
    b[0x100:0x104] = (0x0001 | (1 << 16)).to_bytes(4, "little")  # AER only, end of list
    assert pci.acs_from_config(bytes(b))["missing"] == "not_supported"


def test_h200_layout_gpu_on_the_root_bus(tmp_path):
    """The 1 x H200 VM of 2026-12-01: 0000:00:06.0 directly under pci0000:00, numa_node -1, no IOMMU."""
    make_tree(tmp_path, ["0000:00:06.0"], {})
    topo = pci.device_topology("00000000:00:06.0", root=str(tmp_path))
    assert topo["bdf"] == "0000:00:06.0" and topo["bridges"] == []
    assert topo["numa_node"]["missing"] == "not_supported" and "-1" in topo["numa_node"]["detail"]
    assert topo["local_cpulist"] == "0-15" and topo["iommu_group"]["missing"] == "not_applicable"
    state = pci.iommu_state(str(tmp_path))
    assert state == {"units": [], "groups": 0, "group_types": {}}
    assert pci.iommu_mode({}, state, [topo["iommu_type"]]) == "off"


def test_gpu_behind_a_switch_with_acs_redirect(tmp_path):
    chain = ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0"]
    make_tree(
        tmp_path,
        chain,
        {
            "0000:00:01.0": config_with_acs(0x0000),
            "0000:01:00.0": config_with_acs(0x001D),
            "0000:02:08.0": config_with_acs(0x0001),
        },
        numa="1",
        cpulist="48-95",
        group="DMA",
    )
    topo = pci.device_topology("00000000:03:00.0", root=str(tmp_path))
    assert [b["bdf"] for b in topo["bridges"]] == [
        "0000:02:08.0",
        "0000:01:00.0",
        "0000:00:01.0",
    ]  # nearest first
    assert [b["acs"]["redirect"] for b in topo["bridges"]] == [False, True, False]
    assert (
        topo["bridges"][0]["acs"]["control_flags"]["src_valid"] is True
    )  # SrcValid alone: on, no redirect
    assert topo["numa_node"] == 1 and topo["iommu_group"] == "7" and topo["iommu_type"] == "DMA"
    assert pci.iommu_mode({}, pci.iommu_state(str(tmp_path)), ["DMA"]) == "translated"


def test_device_absent_from_sysfs_says_why(tmp_path):
    assert pci.device_topology("00000000:00:06.0", root=str(tmp_path))["missing"] == "not_found"
    assert pci.device_topology("junk", root=str(tmp_path))["missing"] == "error"


@pytest.mark.parametrize(
    "name, controls, redirect",
    [
        ("lspci-vvv-plx-bridge-acs-enabled.txt", ["0x001d"], [True]),
        ("lspci-vv-root-port-acs-capable-but-disabled.txt", ["0x0000"], [False]),
        ("lspci-vvv-endpoint-acs-none.txt", ["0x0000"], [False]),
    ],
)
def test_lspci_vvv_blocks(name, controls, redirect):
    got = pci.parse_lspci_acs(real_text(f"sysfs/{name}"))
    assert [v["control"] for v in got.values()] == controls
    assert [v["redirect"] for v in got.values()] == redirect


def test_lspci_capable_but_disabled_keeps_the_capability():
    [entry] = pci.parse_lspci_acs(
        real_text("sysfs/lspci-vv-root-port-acs-capable-but-disabled.txt")
    ).values()
    assert entry["capability"]["req_redir"] is True and entry["control_flags"]["req_redir"] is False


def test_lspci_grep_output_with_tabs_nccl629():
    got = list(pci.parse_lspci_acs(real_text("sysfs/lspci-acsctl-grep-tabs-nccl629.txt")).values())
    assert len(got) >= 12
    assert sum(v["redirect"] for v in got) == 4 and {v["control"] for v in got} == {
        "0x0000",
        "0x001d",
    }


def test_lspci_grep_srcvalid_only_nccl606_is_on_without_redirect():
    got = list(
        pci.parse_lspci_acs(real_text("sysfs/lspci-acsctl-grep-amd-switch-nccl606.txt")).values()
    )
    assert {v["control"] for v in got} == {"0x0001", "0x0000"} and not any(
        v["redirect"] for v in got
    )


def test_kernel_cmdline_samples():
    lines = [
        ln.split("Command line: ", 1)[-1]
        for ln in real_text("sysfs/proc-cmdline-samples.txt").splitlines()
        if ("BOOT_IMAGE=" in ln or "initrd=" in ln) and not ln.startswith("#")
    ]
    parsed = [pci.parse_cmdline(ln) for ln in lines]
    assert parsed[0] == {"intel_iommu": "on", "iommu": "pt"}
    assert {"iommu": "pt"} in parsed
    amd = next(p for p in parsed if "amd_iommu" in p)
    assert amd == {"amd_iommu": "on"}  # not a valid amd_iommu value; kept as written
    assert (
        pci.iommu_mode({"iommu": "pt"}, {"units": ["dmar0"], "groups": 3, "group_types": {}}, [])
        == "passthrough"
    )


def test_h200_cmdline_stops_at_the_init_separator():
    text = (
        "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet swiotlb=noforce pci=realloc=off "
        "driver_async_probe=mlx5_core -- --firecracker-init --addr 0.0.0.0:2024 --iommu=bogus"
    )
    assert pci.parse_cmdline(text) == {"pci": "realloc=off"}


def test_sysfs_bdf():
    assert pci.sysfs_bdf("00000000:18:00.0") == "0000:18:00.0"
    assert pci.sysfs_bdf("00000001:AB:00.1") == "0001:ab:00.1"
    assert pci.sysfs_bdf("03:00.0") == "0000:03:00.0"
    assert pci.sysfs_bdf("nope") is None
