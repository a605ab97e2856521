"""Commands are thin: the core names parameters, the command its flags; the step options are declared once."""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from forensics.cli.common import error_boundary
from forensics.cli.options import step_options
from forensics.errors import BadInputError
from forensics.step.spec import StepOptions
from tests.conftest import ROOT


def test_a_core_message_names_the_parameter_and_the_command_its_flag():
    exc = BadInputError("must be at least 1, got 0", option="processes")
    assert str(exc) == "--processes must be at least 1, got 0"  # no command running: --name

    @click.command()
    @click.option("--callable", "target")
    @click.option("-n", "--procs", "processes", type=int)
    @error_boundary
    def cmd(target, processes):
        raise BadInputError(
            "give {target} or nothing; {processes} is wrong",
            option="processes",
            names=("target", "processes"),
        )

    r = CliRunner().invoke(cmd, ["-n", "0"])
    assert r.exit_code == 2
    assert (
        r.output.strip() == "forensics: error: --procs give --callable or nothing; --procs is wrong"
    )


def test_braces_in_a_message_are_text_unless_named():
    assert str(BadInputError('print {"metric": "x"} lines')) == 'print {"metric": "x"} lines'


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (StepOptions(cmd="a", target="m:f"), "give either --cmd or --target, not both"),
        (StepOptions(cmd="  "), "--cmd is empty; give the command that runs your step"),
        (
            StepOptions(metric_regex="x(\\d)"),
            "--metric and --metric-regex read the output of --cmd; give --cmd too",
        ),
    ],
)
def test_the_step_is_checked_in_the_core(step, message):
    with pytest.raises(BadInputError) as info:
        step.check()
    assert str(info.value) == message


def test_the_step_options_arrive_as_one_record():
    seen = {}

    @click.command()
    @step_options(cmd_help="c", callable_help="f", unit=True, processes_default=4)
    def cmd(step, threshold):
        seen.update(step=step, threshold=threshold)

    r = CliRunner().invoke(cmd, ["--cmd", "x", "--metric", "m", "--unit", "tok", "--timeout", "9"])
    assert r.exit_code == 0, r.output
    assert seen == {
        "step": StepOptions(cmd="x", metric="m", unit="tok", processes=4, timeout_s=9.0),
        "threshold": "5%",
    }


def _body_lines(fn: ast.FunctionDef) -> int:
    """Lines of the body as written without the formatter's folding: one per statement (docstring left out)."""
    body = (
        fn.body[1:]
        if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
        else fn.body
    )
    return sum(isinstance(n, ast.stmt) for stmt in body for n in ast.walk(stmt))


THIN = ("bench", "bisect", "bisect_step", "diff", "investigate", "report")
"""The commands whose bodies were moved into the core; their bodies stay short (fleet's ``report`` too)."""


def test_command_bodies_are_short():
    long = {}
    for path in (ROOT / "forensics" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef)
                and node.name in THIN
                and any(
                    "command" in ast.unparse(d) or "group" in ast.unparse(d)
                    for d in node.decorator_list
                )
            ):
                if _body_lines(node) > 30:
                    long[f"{Path(path).name}:{node.name}"] = _body_lines(node)
    assert long == {}
