"""``forensics import FILE...``: texts pasted in tickets -> one snapshot file."""

from __future__ import annotations

from pathlib import Path

import click

from forensics.cli.common import error_boundary
from forensics.cli.types import OUTPUT_FILE, PathArg

FORMAT_CHOICES = [
    "auto",
    "collect-env",
    "vllm",
    "sglang",
    "nvidia-smi",
    "nvidia-smi-q",
    "nvidia-smi-xml",
    "pip",
]


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=PathArg(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    help="Snapshot file to write (.json, or .yaml/.yml). Default: forensics-imported-<first file>.json here.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMAT_CHOICES),
    default="auto",
    show_default=True,
    help="What the texts are; auto finds every part of each file (several pasted into one is common). "
    "nvidia-smi-q is the -q text, nvidia-smi-xml the -q -x XML.",
)
@click.option("--label", help="Label stored in the snapshot (default: 'imported: <files>').")
@click.option("-q", "--quiet", is_flag=True, help="Print only the output path.")
@error_boundary
def import_cmd(files, output, fmt, label, quiet):
    """Read environment texts people paste into tickets into one snapshot.

    Reads `python -m torch.utils.collect_env` (torch 1.x-2.x), `vllm collect-env`,
    `python -m sglang.check_env`, `nvidia-smi`, `nvidia-smi -q`, `nvidia-smi -q -x` and
    `pip list`/`pip freeze`, tolerating Markdown fences, <details> blocks, quoted replies,
    Windows line ends and trimmed lines. The FILES describe one machine. What the texts do
    not hold is recorded as not recorded ("not in collect_env output"), never guessed;
    `forensics diff` reports it as not compared. `diff` and `show` also read such texts
    directly, without importing first.

    Exit codes: 0 written, 2 bad input (a file that is not an environment report, two
    reports of the same kind, an XML document that declares entities).
    """
    from forensics import docfile
    from forensics.importers import import_files
    from forensics.render.terminal import print_snapshot_summary

    doc = import_files(list(files), fmt=fmt, label=label)
    out = Path(output) if output else _default(files[0])
    for f in files:
        if out.exists() and Path(f).exists() and out.resolve() == Path(f).resolve():
            from forensics.errors import BadInputError

            raise BadInputError(f"-o {out} is one of the input files; choose another name")
    docfile.save(doc, out)
    if quiet:
        click.echo(str(out))
        return
    print_snapshot_summary(doc, detail=False, wrote=str(out))


def _default(first: Path, folder: Path = Path(".")) -> Path:
    """forensics-imported-<stem>.json in the current folder, never overwriting an existing file; a secret
    in the file's name (env-hf_....txt) is not carried into the new one's (``redacted`` instead)."""
    import re

    from forensics.docfile import unused_path
    from forensics.redact import redact_text

    name = redact_text(Path(first).stem)[0].replace("<redacted>", "redacted")
    stem = re.sub(r"[^\w.-]+", "-", name).strip("-.")[:60] or "text"
    return unused_path(folder, f"forensics-imported-{stem}")
