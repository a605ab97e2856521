"""The ``forensics`` command line: a thin click layer over the core.

Each subcommand lives in its own module of this package and is imported only
when it runs (``--help`` stays instant, and the snapshot never imports torch).
Exit codes (DESIGN section 12): 0 ok / no regression, 1 regression found,
2 bad input or usage, 3 inconclusive, 4 internal error (a bug: please report),
130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP: child processes are stopped first;
141 when the reader of the output went away (``| head``), quietly.

Owns the commands (``snapshot``, ``show``, ``probes``, ``env``, ``diff``, ``bench``,
``bisect``/``bisect-step``, ``fleet``, ``investigate``, ``importer``: ``forensics import``), the error boundary and console (``common``),
the shared click types (``types``: finite numbers, ``OUTPUT_FILE``) and the option groups several
commands share (``options``: the user's step). A command body is its options, one call into
the core, one render and the exit code (docs/architecture.md, "Commands"). May import
every other package; nothing imports ``cli`` except ``__main__`` and ``demo``.
"""

from __future__ import annotations

import importlib

import click

from forensics import __version__

# command name -> "module:attribute"; a module not present yet simply isn't listed.
COMMANDS: dict[str, str] = {
    "snapshot": "forensics.cli.snapshot:snapshot",
    "show": "forensics.cli.show:show",
    "import": "forensics.cli.importer:import_cmd",
    "probes": "forensics.cli.probes:probes",
    "env": "forensics.cli.env:env",
    "diff": "forensics.cli.diff:diff",
    "bench": "forensics.cli.bench:bench",
    "bisect": "forensics.cli.bisect:bisect",
    "bisect-step": "forensics.cli.bisect:bisect_step",
    "fleet": "forensics.cli.fleet:fleet",
    "investigate": "forensics.cli.investigate:investigate",
}


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._load(name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        return getattr(module, attr, None)


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: click usage errors become one line and exit code 2."""
    try:
        _run(argv)
    finally:  # the multiprocessing helpers and any child left: stopped and reaped before exit
        from forensics.procgroup import end_helpers

        end_helpers()


def _run(argv: list[str] | None) -> None:
    import sys

    from forensics.cli.common import (
        Terminated,
        broken_pipe,
        cannot_write_stdout,
        internal_error,
        path_refused,
        safe,
        signals_raise,
        stdout_failed,
    )

    try:
        with signals_raise():
            rv = main.main(args=argv, prog_name="forensics", standalone_mode=False)
    except (
        Terminated
    ) as exc:  # every finally has run: child process groups stopped, temp files gone
        click.echo(f"forensics: error: terminated by signal {exc.signum}", err=True)
        sys.exit(128 + exc.signum)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(0)
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx is not None else "forensics"
        click.echo(f"forensics: error: {safe(exc.format_message())} (see '{cmd} --help')", err=True)
        sys.exit(
            exc.exit_code
        )  # 2, or 128 for bisect-step (git bisect run must abort, not read "slow")
    except click.exceptions.Abort:
        click.echo("forensics: error: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"forensics: error: {safe(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # the reader went away (| head): 141, as for a program ended by SIGPIPE
        broken_pipe()
    except (
        Exception
    ) as exc:  # outside any command (--help, a click type): never a traceback, never exit 1
        if stdout_failed(exc):
            cannot_write_stdout(exc)
        if path_refused(exc):
            click.echo(f"forensics: error: {safe(path_refused(exc))}", err=True)
            sys.exit(2)
        internal_error(exc)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        broken_pipe()
    except OSError as exc:  # > /dev/full, a full disk: the user's I/O error, exit 2
        cannot_write_stdout(exc)
    sys.exit(rv if isinstance(rv, int) else 0)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="forensics")
def main() -> None:
    """Find out why a GPU/ML step got slower.

    Take a snapshot before and after a change, benchmark the step, and diff:
    the report ranks the causes (GPU clocks and throttling, PCIe link, driver,
    CUDA, NCCL, PyTorch, NCCL variables the workers never saw, a git pull) and
    says what was ruled out and how.

    Exit codes: 0 ok, 1 regression found (diff --fail-on, bench compare),
    2 bad input, 3 inconclusive,
    4 internal error, 130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP,
    141 output pipe closed (| head).
    """
