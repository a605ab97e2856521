"""The benchmark's own processes (the user's step and its ranks) are never reported as contention.

Seen on 2 x H200: `forensics bench --cmd` listed the step's own ranks as "contention"."""

from __future__ import annotations

import os
import subprocess
import sys

from forensics.bench.compare import foreign_processes
from forensics.gpu.sampler import _descends_from_us


def test_descendants_are_ours():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert _descends_from_us(os.getpid()) and _descends_from_us(child.pid)
        assert not _descends_from_us(1)
    finally:
        child.kill()
        child.wait()


def test_foreign_processes_skip_our_own():
    doc = {
        "processes": [],
        "telemetry": {
            "gpus": {
                "GPU-0": {
                    "index": 0,
                    "processes": [
                        {"pid": 614, "name": "python3", "ours": True},
                        {"pid": 2116, "name": "python3", "ours": False},
                    ],
                }
            }
        },
    }
    assert foreign_processes(doc) == {"GPU 0": ["pid 2116 python3"]}
