"""The ``gpu`` probe: clocks, P-states, clocks-event reasons, power, PCIe, topology, health.

Modules: ``probe`` (the :class:`GpuProbe` class: collect through
``forensics.gpu.nvml``), ``fields`` (the field table), ``views`` (read-only
views of one snapshot's GPU section), ``judge`` (busy-sample judging:
throttling, clocks, PCIe link), ``load`` (memory near full and a spinning
collective, judged from a window of samples) and ``state`` (settled state:
config, health, topology, driver), ``topology`` (the ``nvidia-smi topo -m`` matrix
answered by NVML). May import the core and ``forensics.gpu``; never pynvml
or torch.
"""

from forensics_probes.gpu.probe import GpuProbe

__all__ = ["GpuProbe"]
