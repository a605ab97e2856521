"""``forensics bench --device cuda`` where no GPU is visible: one line naming the device, exit 2."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("extra", [[], ["--tp", "2"]])
def test_cuda_without_a_visible_gpu_says_no_cuda_device(tmp_path, extra):
    # CUDA_VISIBLE_DEVICES='' hides every GPU, also on a machine that has some
    r = run_cli(
        "bench",
        "--device",
        "cuda",
        *extra,
        "-o",
        "b.json",
        cwd=tmp_path,
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(
        "forensics: error: --device cuda: no CUDA device is visible here (CUDA_VISIBLE_DEVICES='')"
    ), r.stderr
    assert "--device cpu" in r.stderr and "--tp" not in r.stderr
    assert not (tmp_path / "b.json").exists()
