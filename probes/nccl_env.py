"""Probe ``nccl_env``: NCCL/CUDA/torch variables as the launching process *and its workers* see them.

Fields (full layout and sources in ``docs/nccl-env-probe.md``):

- ``select``: the names and prefixes recorded (``NCCL_``, ``CUDA_``, ... ``PYTHONPATH``).
- ``parent``: the launching process: ``env`` (``os.environ``),
  ``changed_in_process`` (names whose value differs from ``/proc/self/environ``),
  ``hooks`` (sitecustomize, usercustomize, ``.pth`` files), ``python``.
- ``config_files``: NCCL's ``$NCCL_CONF_FILE`` / ``~/.nccl.conf`` and
  ``/etc/nccl.conf`` (``files``), and the entries NCCL would apply (``effective``).
- ``start_methods``: ``spawn``, ``forkserver``, ``subprocess``, ``torch_spawn``:
  each worker's ``env``, ``hooks``, ``changed_at_startup`` and ``differs``
  (variable, parent value, worker value, ``where``: ``at_exec`` or ``startup_hooks``).
- ``launcher``: with ``--launcher``: ``command``, ``returncode``, ``ranks`` (one
  entry per rank, as above plus ``rank``, ``local_rank``, ``world_size``, ``rank_vars``).
- ``nccl_init``: with ``--nccl-init``: ``backend``, ``nccl_available``, ``version``,
  ``allreduce_ok``; per rank ``nccl``: ``set_by_environment``, ``channels``,
  ``transports``, ``network``, ``warnings``, ``p2p_failures``, ``failures``, ``nccl_differs``.
- ``network``: the host's interfaces (``/sys/class/net``: operstate, MTU, address families).
- ``binding`` (parent and every worker/rank): CPU affinity, Mems_allowed, numa_maps summary;
  ``--nccl-init`` ranks add ``binding.gpu`` (PCI address, NUMA node, local CPUs).

Judged: ``nccl.env``, ``nccl.env-propagation`` (:mod:`forensics.env.judge`), ``nccl.transport``
(:mod:`forensics.env.transport`), ``host.numa`` (:mod:`forensics.env.numa`).

Values are redacted with the snapshot's Redactor. The parent never imports torch.
"""

from __future__ import annotations

from typing import Any

# Imported with the probe, not in its thread: the workers (the snapshot's slowest part) then start the
# moment the probe does, instead of after an import that waits on the other probes' imports.
from forensics.env.data import collect_nccl_env
from forensics.model import Finding
from forensics.probe import FieldSpec, JudgeContext, Probe, ProbeContext, ProbeResult

NCCL_INIT_EXTRA_S = 90.0
LAUNCHER_EXTRA_S = 60.0


class NcclEnvProbe(Probe):
    """What the launching process and its fresh workers see of NCCL/CUDA/torch variables."""

    name = "nccl_env"
    description = "NCCL/CUDA/torch variables as the launching process and its workers see them (per start method, per rank)"
    hypotheses = ("nccl.env", "nccl.env-propagation", "nccl.transport", "host.numa")
    start_first = True  # its workers are fresh interpreters, the slowest part of a snapshot
    types = {
        "select": "list",
        "select.*": "string",
        "parent": "mapping",
        "parent.env": "mapping",
        "parent.env.*": "string",
        "config_files": "mapping",
        "start_methods": "mapping",
        "start_methods.*": "mapping",
        "launcher": "mapping",
        "nccl_init": "mapping",
    }
    fields = {
        "parent.env.*": FieldSpec(label="variable of the launching process", source="os.environ"),
        "start_methods.*.duration_s": FieldSpec(unit="s", label="worker round trip", volatile=True),
        "launcher.duration_s": FieldSpec(unit="s", label="launcher run time", volatile=True),
        "nccl_init.duration_s": FieldSpec(unit="s", label="nccl-init run time", volatile=True),
        "start_methods.*.pid": FieldSpec(label="worker pid", volatile=True),
        "launcher.ranks.*.pid": FieldSpec(label="rank pid", volatile=True),
        "nccl_init.ranks.*.pid": FieldSpec(label="rank pid", volatile=True),
        "launcher.ranks.*.rank_vars.*": FieldSpec(label="launcher bookkeeping", volatile=True),
        "parent.binding.numa_maps": FieldSpec(
            label="pages per NUMA node", source="/proc/self/numa_maps", volatile=True
        ),
        "start_methods.*.binding.numa_maps": FieldSpec(label="pages per NUMA node", volatile=True),
        "nccl_init.ranks.*.binding.numa_maps": FieldSpec(
            label="pages per NUMA node", volatile=True
        ),
        "launcher.ranks.*.binding.numa_maps": FieldSpec(label="pages per NUMA node", volatile=True),
    }
    map_fields = (
        "parent.env",
        "config_files.effective",
        "start_methods.*.env",
        "launcher.ranks.*.env",
        "launcher.ranks.*.rank_vars",
        "launcher.ranks.*.nccl.set_by_environment",
        "launcher.ranks.*.nccl.transports",
        "nccl_init.ranks.*.env",
        "nccl_init.ranks.*.rank_vars",
        "nccl_init.ranks.*.nccl.set_by_environment",
        "nccl_init.ranks.*.nccl.transports",
        "config_files.files.*.vars",
        "network.interfaces",
        "parent.binding.host_nodes",
        "parent.binding.numa_maps.anon_pages_by_node",
        "parent.binding.numa_maps.policies",
        "start_methods.*.binding.host_nodes",
        "start_methods.*.binding.numa_maps.anon_pages_by_node",
        "start_methods.*.binding.numa_maps.policies",
        "launcher.ranks.*.binding.host_nodes",
        "launcher.ranks.*.binding.numa_maps.anon_pages_by_node",
        "launcher.ranks.*.binding.numa_maps.policies",
        "nccl_init.ranks.*.binding.host_nodes",
        "nccl_init.ranks.*.binding.numa_maps.anon_pages_by_node",
        "nccl_init.ranks.*.binding.numa_maps.policies",
    )

    def extra_timeout_s(self, options: dict[str, Any]) -> float:
        """Seconds beyond the per-probe timeout: ``--nccl-init`` starts torch and NCCL in each rank,
        ``--launcher`` runs the user's launcher; ``--deep`` imports torch in one child."""
        extra = 0.0
        if options.get("nccl_init"):
            extra += NCCL_INIT_EXTRA_S
        if options.get("launcher"):
            extra += LAUNCHER_EXTRA_S
        if options.get("deep") and not extra:
            extra += 20.0
        return extra

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        """Run the workers and gather what they saw (:func:`forensics.env.data.collect_nccl_env`)."""
        try:
            return collect_nccl_env(ctx.options, ctx.redactor, ctx.timeout_s, ctx.error)
        except ValueError as exc:  # an unusable --launcher string
            ctx.error("launcher", f"cannot use --launcher {ctx.option('launcher')!r}: {exc}")
            return collect_nccl_env(
                {**ctx.options, "launcher": None}, ctx.redactor, ctx.timeout_s, ctx.error
            )

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ) -> list[Finding]:
        """``nccl.env`` and ``nccl.env-propagation`` (rules in :mod:`forensics.env.judge`); ``jctx``'s
        benchmark configs say whether the canary ran on one machine (what it could not see)."""
        from forensics.env.judge import canary_on_one_machine, judge

        one = jctx is not None and canary_on_one_machine(jctx.before, jctx.after)
        return judge(before, after, one)

    def headline(self, data: dict[str, Any]) -> str:
        """E.g. ``7 vars; workers agree (spawn, forkserver, subprocess)`` or the variables that differ."""
        from forensics.env.judge import problems

        n = len((data.get("parent") or {}).get("env") or {})
        probs = problems(data)
        nccl = data.get("nccl_init")
        tail = ""
        if isinstance(nccl, dict) and "backend" in nccl:
            tail = (
                f"; NCCL {nccl['version']} all-reduce {'ok' if nccl.get('allreduce_ok') else 'FAILED'}"
                if nccl.get("nccl_available") and isinstance(nccl.get("version"), str)
                else f"; {nccl.get('backend')} (NCCL not available)"
            )
        if not probs:
            ok = [
                m
                for m, e in (data.get("start_methods") or {}).items()
                if isinstance(e, dict) and e.get("status") == "ok"
            ]
            return f"{n} vars; workers agree ({', '.join(ok) or 'none ran'}){tail}"
        names = sorted({k[0] for k in probs})
        chans = sorted({k[1] for k in probs})
        return (
            f"{n} vars; differ in workers: {', '.join(names[:4])}{' ...' if len(names) > 4 else ''} "
            f"({', '.join(chans[:3])}){tail}"
        )
