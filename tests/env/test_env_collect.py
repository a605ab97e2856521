"""The nccl_env collector with real workers on the CPU: every start method, hooks, launchers, torchrun."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.env import collect as envcollect
from forensics.env.data import collect_nccl_env
from forensics.env.judge import judge_propagation
from forensics.model import HypothesisStatus, Severity
from forensics.probe import ProbeContext
from forensics.redact import Redactor

UNSET = {"missing": "not_found", "detail": "unset"}
HAS_TORCH = importlib.util.find_spec("torch") is not None


def stop_forkserver():
    """A forkserver keeps the environment it started with; each test starts from a fresh one."""
    import multiprocessing.forkserver as fs

    stop = getattr(fs._forkserver, "_stop", None)
    if stop is not None:
        stop()


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """Parent environment with known NCCL variables, no NCCL config file, no running forkserver."""
    stop_forkserver()
    for name in list(os.environ):
        if name.startswith(("NCCL_", "TORCH_", "OMP_")) or name in (
            "PYTHONPATH",
            envcollect.EXTRA_VAR,
        ):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def collect(options=None, timeout_s=120.0):
    errors = []
    red = Redactor()
    data = collect_nccl_env(options or {}, red, timeout_s, lambda f, m: errors.append((f, m)))
    return data, errors, red


def test_each_start_method_sees_the_parent(clean_env):
    data, errors, _ = collect()
    assert errors == []
    assert data["parent"]["env"] == {"NCCL_ALGO": "Ring"}
    for method in ("spawn", "forkserver", "subprocess"):
        entry = data["start_methods"][method]
        assert entry["status"] == "ok", entry
        assert entry["method"] == method
        assert entry["env"] == {"NCCL_ALGO": "Ring"}
        assert entry["differs"] == []
        assert entry["pid"] != os.getpid()
    ts = data["start_methods"]["torch_spawn"]
    assert ts["status"] == "unavailable" and ts["reason"]["missing"] == "not_applicable"
    assert data["launcher"] == {"missing": "not_applicable", "detail": "no --launcher given"}
    assert data["nccl_init"]["missing"] == "not_applicable"
    [finding] = judge_propagation(None, data)
    assert finding.status is HypothesisStatus.RULED_OUT
    assert finding.summary.endswith("variables compared in forkserver, spawn, subprocess")


def test_a_spawn_worker_with_no_standard_output_still_hands_in_its_record(tmp_path):
    """forensics started with its standard output closed (``>&-``, some job schedulers): the spawn worker
    has no ``sys.stdout``. Its record is in place before it ends, so it must end with status 0, not 1."""
    code = (
        "import json, sys\n"
        "from forensics.env import collect\n"
        "from forensics.env.workers import envdump\n"
        "if __name__ == '__main__':\n"
        f"    got = collect._mp_worker('spawn', {str(tmp_path / 'spawn.json')!r}, envdump.DEFAULT_SELECT, 60)\n"
        "    print(json.dumps(got), file=sys.stderr)\n"
    )
    script = tmp_path / "closed.py"
    script.write_text(code)
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" "$1" >&-', sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stderr.strip().splitlines()[-1])
    assert "failure" not in got, got
    assert got["record"]["method"] == "spawn"


def test_default_probe_does_not_import_torch_in_the_parent(tmp_path):
    code = (
        "import sys; from forensics.env.data import collect_nccl_env; from forensics.redact import Redactor\n"
        "if __name__ == '__main__':\n"
        "    d = collect_nccl_env({}, Redactor(), 60, lambda f, m: None)\n"
        "    assert d['start_methods']['spawn']['status'] == 'ok'\n"
        "    print('torch' in sys.modules)\n"
    )
    script = tmp_path / "probe_once.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_sitecustomize_that_alters_a_variable(clean_env, tmp_path):
    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(
        "import os\nos.environ['NCCL_ALGO'] = 'Tree'\nos.environ['NCCL_SOCKET_IFNAME'] = 'eth9'\n"
    )
    clean_env.setenv("PYTHONPATH", str(hook_dir))
    data, errors, _ = collect()
    assert errors == []
    for method in ("spawn", "forkserver", "subprocess"):
        entry = data["start_methods"][method]
        diffs = {d["name"]: d for d in entry["differs"]}
        assert set(diffs) == {"NCCL_ALGO", "NCCL_SOCKET_IFNAME"}, (method, entry["differs"])
        assert diffs["NCCL_ALGO"] == {
            "name": "NCCL_ALGO",
            "parent": "Ring",
            "worker": "Tree",
            "where": "startup_hooks",
        }
        assert diffs["NCCL_SOCKET_IFNAME"]["parent"] == UNSET
        assert entry["hooks"]["sitecustomize"] == str(hook_dir / "sitecustomize.py")
        assert entry["changed_at_startup"] == ["NCCL_ALGO", "NCCL_SOCKET_IFNAME"]
    findings = {f.summary.split()[0]: f for f in judge_propagation(None, data)}
    algo = findings["NCCL_ALGO"]
    assert algo.status is HypothesisStatus.IMPLICATED and algo.severity is Severity.HIGH
    text = "\n".join(algo.evidence)
    assert "forkserver: NCCL_ALGO='Tree' vs launching process 'Ring'" in text
    assert "sitecustomize" in text and str(hook_dir) in text


def test_forkserver_keeps_the_environment_it_started_with(clean_env):
    """A real trap: variables set after the forkserver started never reach its workers."""
    collect()  # starts the forkserver with NCCL_ALGO=Ring
    clean_env.setenv("NCCL_PROTO", "Simple")
    data, _, _ = collect()
    assert data["start_methods"]["spawn"]["differs"] == []
    assert data["start_methods"]["forkserver"]["differs"] == [
        {"name": "NCCL_PROTO", "parent": "Simple", "worker": UNSET, "where": "at_exec"}
    ]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_launcher_wrapper_injects_and_scrubs(clean_env, tmp_path):
    """Stand-in for Ray's behaviour in case 10: the launcher injects NCCL_SOCKET_IFNAME and drops NCCL_ALGO."""
    wrapper = tmp_path / "ray_like_launcher.sh"
    wrapper.write_text(
        "#!/bin/sh\nexport NCCL_SOCKET_IFNAME='^lo,docker,veth'\nunset NCCL_ALGO\nexec \"$@\"\n"
    )
    wrapper.chmod(0o755)
    data, errors, _ = collect({"launcher": str(wrapper)})
    assert errors == []
    assert data["launcher"]["returncode"] == 0
    [rank] = data["launcher"]["ranks"]
    assert rank["method"] == "launcher"
    assert rank["env"] == {"NCCL_SOCKET_IFNAME": "^lo,docker,veth"}
    assert rank["differs"] == [
        {"name": "NCCL_ALGO", "parent": "Ring", "worker": UNSET, "where": "at_exec"},
        {
            "name": "NCCL_SOCKET_IFNAME",
            "parent": UNSET,
            "worker": "^lo,docker,veth",
            "where": "at_exec",
        },
    ]
    # the start methods still see the parent; torch.multiprocessing.spawn runs on this slow path
    for method in ("spawn", "forkserver", "subprocess", "torch_spawn"):
        assert data["start_methods"][method]["status"] == "ok", method
        assert data["start_methods"][method]["differs"] == []
    summaries = [f.summary for f in judge_propagation(None, data)]
    assert any(
        "NCCL_SOCKET_IFNAME differs" in s and "launcher rank 0: '^lo,docker,veth'" in s
        for s in summaries
    )
    assert any("NCCL_ALGO differs" in s and "('Ring')" in s for s in summaries)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_torchrun_with_gloo_on_localhost(clean_env):
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        pytest.skip("torchrun not next to this python")
    data, errors, _ = collect(
        {"launcher": f"{torchrun} --nproc-per-node 2 --standalone", "nccl_init": True}
    )
    assert errors == []
    ranks = data["launcher"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["rank_vars"]["WORLD_SIZE"] == "2" for r in ranks)
    for r in ranks:
        assert r["env"]["NCCL_ALGO"] == "Ring"
        names = {d["name"] for d in r["differs"]}
        assert (
            "RANK" not in names and "MASTER_PORT" not in names
        )  # launcher bookkeeping is expected
        assert "OMP_NUM_THREADS" in names  # torchrun sets OMP_NUM_THREADS=1 when it is unset
        assert r["nccl"]["backend"] == "gloo" and r["nccl"]["allreduce_ok"] is True
    summary = data["nccl_init"]
    assert summary["under"] == "launcher" and summary["nccl_available"] is False
    assert "NCCL not available" in summary["reason"]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_nccl_init_without_gpu_uses_gloo_with_two_ranks(clean_env):
    data, errors, _ = collect({"nccl_init": True})
    assert errors == []
    sec = data["nccl_init"]
    assert sec["under"] == "subprocess" and sec["backend"] == "gloo" and sec["allreduce_ok"] is True
    assert [r["rank"] for r in sec["ranks"]] == [0, 1]
    assert all(
        r["differs"] == [] for r in sec["ranks"]
    )  # NCCL_DEBUG is set only after each rank's dump


def test_nccl_conf_files(clean_env, tmp_path):
    conf = tmp_path / "custom.conf"
    conf.write_text("# site defaults\nNCCL_IB_HCA = mlx5_0\nNCCL_ALGO=Tree\n\n")
    (tmp_path / ".nccl.conf").write_text("NCCL_PROTO=LL\n")
    clean_env.setenv("NCCL_CONF_FILE", str(conf))
    files = envcollect.config_files(os.environ, system_path=str(tmp_path / "no-such-nccl.conf"))
    assert [f["role"] for f in files] == [
        "NCCL_CONF_FILE",
        "system",
    ]  # ~/.nccl.conf is skipped, as NCCL does
    assert files[0]["vars"] == {"NCCL_IB_HCA": "mlx5_0", "NCCL_ALGO": "Tree"}
    assert files[1]["vars"]["missing"] == "not_found"
    eff = envcollect.conf_effective(files, os.environ)
    assert eff == {
        "NCCL_IB_HCA": {"value": "mlx5_0", "from": str(conf)}
    }  # NCCL_ALGO: the environment wins
    clean_env.delenv("NCCL_CONF_FILE")
    files = envcollect.config_files(os.environ, system_path=str(tmp_path / "no-such-nccl.conf"))
    assert files[0] == {
        "path": str(tmp_path / ".nccl.conf"),
        "role": "user",
        "vars": {"NCCL_PROTO": "LL"},
    }


def test_secret_values_are_redacted(clean_env):
    clean_env.setenv("TORCH_HUB_TOKEN", "hub-secret-value-123")
    data, _, red = collect()
    text = json.dumps(data)
    assert "hub-secret-value-123" not in text
    assert data["parent"]["env"]["TORCH_HUB_TOKEN"] == "<redacted>"
    assert data["start_methods"]["spawn"]["env"]["TORCH_HUB_TOKEN"] == "<redacted>"
    assert any(r.where.endswith("TORCH_HUB_TOKEN") for r in red.records)


def test_extra_selection(clean_env):
    clean_env.setenv("MY_SETTING", "7")
    clean_env.setenv(envcollect.EXTRA_VAR, "MY_SETTING")
    data, _, _ = collect()
    assert data["parent"]["env"]["MY_SETTING"] == "7"
    assert data["start_methods"]["subprocess"]["env"]["MY_SETTING"] == "7"


def test_bad_launcher_is_a_field_error_not_a_crash(clean_env):
    from forensics.registry import find_probe_class

    probe = find_probe_class("nccl_env")
    ctx = ProbeContext({"launcher": "'unbalanced"}, Redactor(), 60)
    data = probe.collect(ctx)
    assert data["launcher"]["missing"] == "not_applicable"
    assert ctx.errors and "cannot use --launcher" in ctx.errors[0]["error"]


def test_launcher_argv_for_torchrun_and_others():
    assert envcollect.launcher_argv("torchrun --nproc-per-node 2", ["--x"])[-3:] == [
        "-m",
        envcollect.WORKER_MODULE,
        "--x",
    ]
    assert envcollect.launcher_argv("torchrun --no-python", [])[2:] == [
        sys.executable,
        "-m",
        envcollect.WORKER_MODULE,
    ]
    assert envcollect.launcher_argv("env -u NCCL_ALGO", [])[:4] == [
        "env",
        "-u",
        "NCCL_ALGO",
        sys.executable,
    ]
    with pytest.raises(ValueError):
        envcollect.launcher_argv("   ", [])


def test_worker_entry_point_writes_json(tmp_path, clean_env):
    out = tmp_path / "me.json"
    env = dict(os.environ, FORENSICS_ENVDUMP_OUT=str(out), RANK="3")
    proc = subprocess.run(
        [sys.executable, "-m", "forensics.env.workers.envdump"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert rec["schema"] == "forensics.envdump/1"
    assert rec["rank"] == 3 and rec["rank_vars"]["RANK"] == "3"
    assert rec["env"]["NCCL_ALGO"] == "Ring"
    assert rec["env_at_exec"]["NCCL_ALGO"] == "Ring"
    bad = subprocess.run(
        [sys.executable, "-m", "forensics.env.workers.envdump"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "FORENSICS_ENVDUMP_OUT"},
    )
    assert bad.returncode == 2 and "--out" in bad.stderr


def test_gather_files_and_marked_stdout_lines(tmp_path):
    from forensics.env.workers import envdump

    envdump.write_record(
        {"host": "a", "pid": 1, "rank": 1, "env": {}}, str(tmp_path / "envdump-a-1.json")
    )
    (tmp_path / "envdump-a-2.json").write_text("{truncated")
    remote = json.dumps({"host": "b", "pid": 9, "rank": 0, "env": {"NCCL_ALGO": "Tree"}})
    dup = json.dumps({"host": "a", "pid": 1, "rank": 1, "env": {"X": "from stdout"}})
    stdout = f"noise\n{envdump.STDOUT_MARKER}{remote}\n{envdump.STDOUT_MARKER}{dup}\n{envdump.STDOUT_MARKER}{{bad\n"
    recs = envcollect.gather(str(tmp_path), stdout)
    assert [(r["host"], r["rank"]) for r in recs] == [("b", 0), ("a", 1)]
    assert recs[1]["env"] == {}  # the file wins over the stdout line of the same process
