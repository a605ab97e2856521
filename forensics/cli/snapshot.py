"""``forensics snapshot``: record this machine's state into a snapshot file."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click

from forensics.cli.common import check_repo, error_boundary
from forensics.cli.types import OUTPUT_FILE, POSITIVE, PathArg
from forensics.docfile import unused_path
from forensics.options import probe_options

SAMPLE_MARGIN_S = 2.0
"""Seconds the GPU probe needs beyond a ``--sample`` window (its own reads), as its ``extra_timeout_s`` asks."""


def default_output(label: str | None, folder: Path = Path(".")) -> Path:
    """``forensics-<label or timestamp>.json`` in ``folder``, never overwriting an existing file.

    The label keeps letters (any script), digits, ``._-``; other runs become ``-``; a secret in it becomes
    ``redacted``, as in the snapshot; it is cut to 80 characters. If the name exists, ``-2``,
    ``-3``... is appended.
    """
    if label:
        from forensics.redact import redact_text

        shown = redact_text(label)[0].replace("<redacted>", "redacted")
        stem = re.sub(r"[^\w.-]+", "-", shown).strip("-.")[:80].strip("-.") or "snapshot"
    else:
        stem = time.strftime("%Y%m%d-%H%M%S")
    return unused_path(folder, f"forensics-{stem}")


@click.command()
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    help="Output file (.json, or .yaml/.yml). Default: forensics-<label or timestamp>.json here.",
)
@click.option("--label", help="Free text stored in the snapshot, e.g. 'before' or 'after-pull'.")
@click.option(
    "--probe", "only", multiple=True, metavar="NAME", help="Run only this probe (repeatable)."
)
@click.option("--skip", multiple=True, metavar="NAME", help="Do not run this probe (repeatable).")
@click.option(
    "--timeout",
    "timeout_s",
    type=POSITIVE,
    default=10.0,
    show_default=True,
    help="Per-probe timeout in seconds; a probe that takes longer is recorded as failed. Left out, "
    "--launcher, --nccl-init, --deep and --sample get their own time on top (60-90 s for the "
    "first two); given, it bounds every probe, what they start included.",
)
@click.option(
    "--repo",
    type=PathArg(path_type=Path),
    help="Git repository of the code under test (default: the current folder if it is in one).",
)
@click.option(
    "--sample",
    "sample_s",
    type=POSITIVE,
    default=None,
    metavar="SECONDS",
    help="GPU probe: sample clocks, power and clocks-event reasons at ~10 Hz for this long.",
)
@click.option(
    "--deep",
    is_flag=True,
    help="Import torch to confirm the CUDA/NCCL/cuDNN versions it loads (slower).",
)
@click.option(
    "--nccl-init",
    is_flag=True,
    help="NCCL env probe: start workers that initialise a real NCCL "
    "communicator (NCCL_DEBUG=INFO) and report what NCCL read.",
)
@click.option(
    "--launcher",
    metavar="CMD",
    help="NCCL env probe: start the workers under this launcher prefix, "
    "e.g. 'torchrun --nproc-per-node 2'.",
)
@click.option(
    "--bench", "with_bench", is_flag=True, help="Run the built-in verify-step canary and embed it."
)
@click.option(
    "--bench-cmd",
    metavar="CMD",
    help="With --bench: also benchmark your step, a command printing JSON "
    'lines like {"metric": "step_ms", "value": 19.3}. Its program is checked first; if the '
    "step fails, the snapshot is still written with the canary's results and the exit code is 2.",
)
@click.option(
    "--bench-timeout",
    metavar="DURATION",
    help="With --bench-cmd: the time all the processes of your step may take together (seconds or 90s, "
    "10m; default 10m, and 5m for one process). Past it the process running is stopped with its "
    "process group, the snapshot is still written with the canary's results and the exit code is 2.",
)
@click.option(
    "--bench-processes",
    type=click.IntRange(3, 100),
    help="With --bench: fresh processes per benchmark (default 5).",
)
@click.option(
    "--higher-is-better",
    is_flag=True,
    help="With --bench-cmd: the step's metric is a throughput (tok/s).",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Keep secrets (tokens, keys, URL credentials) in the snapshot.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the output path.")
@error_boundary
def snapshot(
    output,
    label,
    only,
    skip,
    timeout_s,
    repo,
    sample_s,
    deep,
    nccl_init,
    launcher,
    with_bench,
    bench_cmd,
    bench_timeout,
    bench_processes,
    higher_is_better,
    no_redact,
    quiet,
):
    """Record this machine's state: GPU, drivers and libraries, NCCL variables, git, host.

    Writes a JSON (or YAML) snapshot and prints a summary. Probes run
    concurrently, each under --timeout; one that fails or hangs is recorded as
    such and never loses the others' data.
    """
    from forensics import snapshot as snap
    from forensics.collect import take_snapshot

    timeout_given, step_limit_s = _check_options(
        timeout_s, sample_s, launcher, repo, with_bench, bench_cmd, bench_processes, bench_timeout
    )
    out = output or default_output(label)
    options = probe_options(
        repo=str(repo) if repo else None,
        sample_s=sample_s,
        deep=deep,
        nccl_init=nccl_init,
        launcher=launcher,
    )
    bench = None
    if with_bench:

        def bench():
            from forensics.bench import run_for_snapshot
            from forensics.cli.common import Terminated

            if not quiet:
                click.echo(
                    "running the verify-step canary"
                    + (" and your step" if bench_cmd else "")
                    + " in fresh processes (about a minute)...",
                    err=True,
                )
            return run_for_snapshot(
                {
                    "launcher": launcher,
                    "cmd": bench_cmd,
                    "processes": bench_processes,
                    "higher_is_better": higher_is_better or None,
                    "step_limit_s": step_limit_s,
                },
                interrupts=(KeyboardInterrupt, Terminated),  # the probes and the canary are kept
            )

    doc = take_snapshot(
        label=label,
        only=only,
        skip=skip,
        options=options,
        timeout_s=timeout_s,
        redact=not no_redact,
        bench=bench,
        extra_time=not timeout_given,
    )
    snap.save(doc, out)
    if quiet:
        click.echo(str(out))
    else:
        from forensics.render.terminal import print_snapshot_summary

        print_snapshot_summary(doc, wrote=str(out))
    _check_outcome(doc, out, timeout_s)
    if not with_bench:
        from forensics.cli.common import allow_quick_exit

        allow_quick_exit()  # the file is written and closed, the summary printed


def _check_options(
    timeout_s, sample_s, launcher, repo, with_bench, bench_cmd, bench_processes, bench_timeout
) -> tuple[bool, float | None]:
    """Refuse options that cannot work before any probe runs; returns whether ``--timeout`` was given and
    ``--bench-timeout`` in seconds (None when not given).

    Raises:
        BadInputError: ``--sample`` or ``--timeout`` out of range, a sample that does not fit in a given
            timeout, a launcher or ``--bench-cmd`` that cannot start, a bad ``--repo``, bench options
            without ``--bench``, ``--bench-timeout`` without ``--bench-cmd`` or not a duration,
            ``--bench`` without PyTorch.
    """
    from click.core import ParameterSource

    from forensics.errors import BadInputError

    if sample_s is not None and not 0 < sample_s <= 600:
        raise BadInputError(f"--sample must be between 0 and 600 seconds, got {sample_s:g}")
    if not 0 < timeout_s <= 3600:
        raise BadInputError(f"--timeout must be between 0 and 3600 seconds, got {timeout_s:g}")
    timeout_given = (
        click.get_current_context().get_parameter_source("timeout_s") is not ParameterSource.DEFAULT
    )
    if timeout_given and sample_s is not None and sample_s + SAMPLE_MARGIN_S > timeout_s:
        raise BadInputError(
            f"--sample {sample_s:g} does not fit in --timeout {timeout_s:g}, which bounds each probe "
            f"when given: give --timeout {sample_s + SAMPLE_MARGIN_S:g} or more, or leave it out"
        )
    if launcher is not None:
        from forensics.step.command import check_launcher

        check_launcher(launcher)
    check_repo(repo)
    if (bench_cmd is not None or bench_processes or bench_timeout is not None) and not with_bench:
        raise BadInputError("--bench-cmd, --bench-processes and --bench-timeout go with --bench")
    if bench_cmd is not None:  # an empty one too ("$STEP" unset): bench --cmd '' refuses it as well
        from forensics.step.command import check_step_command

        check_step_command(bench_cmd, "--bench-cmd")  # before a minute of canary, not after
    step_limit_s = None
    if bench_timeout is not None:
        from forensics.cli.investigate import parse_duration

        if not bench_cmd:
            raise BadInputError(
                "--bench-timeout bounds your step; give the step with --bench-cmd too"
            )
        step_limit_s = parse_duration(
            bench_timeout, "--bench-timeout"
        )  # before the canary's minute
    if with_bench:
        import importlib.util

        if importlib.util.find_spec("torch") is None:  # say so before the probes run, not after
            raise BadInputError(
                "--bench runs the canary, which needs PyTorch: pip install 'forensics[bench]' "
                "(or torch) in this Python"
            )
    return timeout_given, step_limit_s


def _check_outcome(doc, out: Path, timeout_s: float) -> None:
    """After the file is written: warn of probes that timed out; exit 128 + the signal (130 for Ctrl-C,
    143 for SIGTERM) when a signal stopped the canary or the step of --bench-cmd, 2 when the step failed or
    ran past --bench-timeout, 3 when every probe failed.

    Raises:
        ForensicsError: a signal stopped the benchmark (``bench.config.interrupted``,
            :func:`forensics.bench.interruption`); the snapshot holds what was measured.
        BadInputError: the user's step failed or was stopped at --bench-timeout (the snapshot holds the
            canary's results only).
        InconclusiveError: every probe failed.
    """
    from forensics.errors import BadInputError, ForensicsError, InconclusiveError
    from forensics.words import plural

    all_failed = all(sec.get("status") == "failed" for sec in doc["probes"].values())
    timed_out = sorted(
        n
        for n, sec in doc["probes"].items()
        if sec.get("status") == "failed" and str(sec.get("reason", "")).startswith("timed out")
    )
    if timed_out and not all_failed:
        click.echo(
            f"forensics: warning: {len(timed_out)} of {len(doc['probes'])} probes timed out under --timeout "
            f"{timeout_s:g} s ({', '.join(timed_out)}): their data is missing; give a longer --timeout",
            err=True,
        )
    config = (doc.get("bench") or {}).get("config") or {}
    user_step = config.get("user_step") or {}
    stop = config.get("interrupted")
    if stop and stop.get("during") == "your step":
        n = user_step.get("processes_finished", 0)
        kept = (
            f"the probes, the canary's results and the {plural(n, 'process', 'processes')} of your step "
            "that finished"
            if n
            else "the probes and the canary's results; no process of your step finished"
        )
        raise ForensicsError(
            f"interrupted ({stop['name']}) while your step ran; {out} was written with {kept} "
            "(bench.config.user_step)",
            128 + stop["signal"],
        )
    if stop:
        raise ForensicsError(
            f"interrupted ({stop['name']}) while the canary ran; {out} was written with the probes only "
            "(bench.config.interrupted)",
            128 + stop["signal"],
        )
    step_failed = user_step.get("failed")
    if step_failed and user_step.get("limit_s"):
        raise BadInputError(
            f"--bench-cmd {user_step.get('command')!r} was {step_failed}; {out} was written with the "
            "canary's results only (bench.config.user_step); give a longer --bench-timeout if the step is "
            "slow, or see why it hangs"
        )
    if step_failed:
        raise BadInputError(
            f"--bench-cmd failed ({step_failed}); {out} was written with the canary's results "
            "only (bench.config.user_step.failed)"
        )
    if all_failed:
        raise InconclusiveError(
            f"{out}: every probe failed; the snapshot holds no data (see the reasons above)"
        )
