"""The ``gpu`` probe: clocks, P-states, clocks-event reasons, power, PCIe, topology, health.

Modules: ``probe`` (the :class:`GpuProbe` class: collect through
``forensics.gpu.nvml``), ``fields`` (the field table), ``views`` (read-only
views of one snapshot's GPU section), ``judge`` (busy-sample judging:
throttling, clocks, PCIe link) and ``state`` (settled state: config, health,
topology, driver). May import the core and ``forensics.gpu``; never pynvml
or torch.
"""

from forensics_probes.gpu.probe import GpuProbe

__all__ = ["GpuProbe"]
