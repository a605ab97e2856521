"""GPU readings shared by the ``gpu`` probe and the benchmark's telemetry.

Owns ``nvml`` (the only gateway to NVML/pynvml: timeouts, missing reasons,
``_v2`` vs v1 chosen once), ``readings`` (decoding NVML values: clocks-event
reasons, P-states, PCIe counters, busy/idle), ``sampler`` (sampling every
GPU at ~10 Hz over a window and summarising it) and ``pci`` (sysfs and procfs
facts of a GPU's PCI path: bridges and ACS, NUMA node, IOMMU).

May import ``forensics.model`` and the standard library; never torch (no
CUDA context), never a probe, ``bench`` or ``cli``.
"""
