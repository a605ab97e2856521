"""The secrets corpus: each secret shape, in every place a string enters forensics, grepped for in
every output.

Places: the environment (an NCCL variable and a CUDA one), the snapshot label, a commit subject and a
commit body, the remote URL, the reflog (git writes the subject there as ``commit: ...``), a bench
command, and the NCCL config file. Outputs: the snapshot file (JSON and YAML), ``show``, the diff
report in HTML, Markdown and JSON, diff's terminal summary, the bench file and ``bench compare``.
Seen before the fix: a commit subject's ``token=...`` and ``ghp_...`` in all four diff outputs, and
``password: hunter3`` mid-text kept in the reflog; a ``--label`` stored verbatim.
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import git, make_repo, run_cli

# each value appears in exactly one place below; none may appear in any output
SECRETS = {
    "github token (commit subject)": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "token= assignment (commit subject)": "abc123secretvalue",
    "password: mid-text (commit subject)": "hunter3",
    "Bearer (commit body)": "Zm9vYmFyYmF6cXV4MTIzNDU2",
    "AWS key (commit body)": "AKIA" + "IOSFODNN7EXAMPLE",
    "private key (commit body)": "MIIEowIBAAKCAQEAsecretkeymaterial",
    "URL password (remote)": "s3cr3tpassw0rd",
    "Hugging Face token (label)": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
    "OpenAI-style key (env)": "sk-proj-" + "abc123def456ghi789jkl012",
    "URL credentials (env)": "envpass4242",
    "--api-key flag (bench command)": "benchkey9876543210",
    "password= (NCCL config file)": "ncclconfpw777",
}
S = {k.split(" (")[0]: v for k, v in SECRETS.items()}

SUBJECT = f"tune kernels token={S['token= assignment']} {S['github token']} password: {S['password: mid-text']}"
BODY = (
    f"Authorization: Bearer {S['Bearer']}\naws_access_key_id = {S['AWS key']}\n"
    f"-----BEGIN RSA PRIVATE KEY-----\n{S['private key']}\n-----END RSA PRIVATE KEY-----\n"
)
REMOTE = f"https://deploy:{S['URL password']}@git.example.invalid/team/model.git"
LABEL = f"after pull HF_TOKEN={S['Hugging Face token']}"
ENV = {
    "NCCL_TEST_NOTE": f"key {S['OpenAI-style key']}",
    "CUDA_TEST_MIRROR": f"https://user:{S['URL credentials']}@mirror.example.invalid/cuda",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, str]:
    """Every output of one before/after run over the corpus: {name: text}."""
    tmp = tmp_path_factory.mktemp("secrets")
    repo = make_repo(tmp / "model", {"kernels.py": "x = 1\n"})
    git(repo, "remote", "add", "origin", REMOTE)
    conf = tmp / "nccl.conf"
    conf.write_text(f"NCCL_ALGO=Ring\nNCCL_COLLNET_PASSWORD={S['password=']}\n")
    env = dict(ENV, NCCL_CONF_FILE=str(conf))
    probes = ["--probe", "git", "--probe", "nccl_env"]
    before, after = tmp / "before.json", tmp / "after.yaml"
    out: dict[str, str] = {}
    r = run_cli(
        "snapshot", *probes, "--repo", str(repo), "--label", "before", "-o", str(before), env=env
    )
    assert r.returncode == 0, r.stderr
    (repo / "kernels.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", SUBJECT + "\n\n" + BODY)
    r = run_cli(
        "snapshot", *probes, "--repo", str(repo), "--label", LABEL, "-o", str(after), env=env
    )
    assert r.returncode == 0, r.stderr
    out["snapshot stderr"] = r.stdout + r.stderr
    out["snapshot JSON"] = before.read_text()
    out["snapshot YAML"] = after.read_text()
    out["show"] = run_cli("show", str(after)).stdout
    for fmt in ("html", "md", "json"):
        r = run_cli(
            "diff",
            str(before),
            str(after),
            "--repo",
            str(repo),
            "-o",
            str(tmp / f"report.{fmt}"),
            env={"COLUMNS": "200"},
        )
        assert r.returncode == 0, r.stderr
        out[f"diff {fmt}"] = (tmp / f"report.{fmt}").read_text()
        out[f"diff terminal ({fmt})"] = r.stdout + r.stderr
    step = tmp / "step.py"
    step.write_text('import json\nprint(json.dumps({"metric": "step_ms", "value": 1.0}))\n')
    cmd = f"{sys.executable} {step} --api-key {S['--api-key flag']}"
    bench = tmp / "bench.json"
    r = run_cli("bench", "--cmd", cmd, "--processes", "3", "--budget", "20", "-q", "-o", str(bench))
    assert r.returncode == 0, r.stderr
    out["bench file"] = bench.read_text()
    out["bench stdout"] = r.stdout + r.stderr
    r = run_cli("bench", "compare", str(bench), str(bench))
    out["bench compare"] = r.stdout + r.stderr
    out["bench compare --json"] = run_cli(
        "bench", "compare", str(bench), str(bench), "--json"
    ).stdout
    return out


OUTPUTS = [
    "snapshot stderr",
    "snapshot JSON",
    "snapshot YAML",
    "show",
    "diff html",
    "diff md",
    "diff json",
    "diff terminal (html)",
    "diff terminal (md)",
    "diff terminal (json)",
    "bench file",
    "bench stdout",
    "bench compare",
    "bench compare --json",
]


def test_no_secret_in_any_output(outputs):
    leaks = [
        f"{where}: {what}"
        for where, text in outputs.items()
        for what, value in SECRETS.items()
        if value in text
    ]
    assert not leaks, "\n".join(leaks)


def test_corpus_reaches_the_outputs(outputs):
    """The places were really read: the redacted subject, the remote host and the label's words are there."""
    assert "tune kernels" in outputs["diff md"] and "tune kernels" in outputs["diff json"]
    assert "git.example.invalid" in outputs["snapshot YAML"]
    assert "after pull" in outputs["snapshot YAML"]
    assert "NCCL_TEST_NOTE" in outputs["snapshot JSON"]
    assert set(OUTPUTS) == set(outputs)
