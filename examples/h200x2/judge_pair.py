"""Print the nccl_env judge's findings for two snapshots: python judge_pair.py BEFORE.json AFTER.json."""

import json
import sys

from forensics import snapshot as snap
from forensics.probe import ProbeResult
from forensics.registry import find_probe_class


def main(before_path: str, after_path: str) -> int:
    probe = find_probe_class("nccl_env")
    before, after = (
        ProbeResult.from_json(snap.load(p)["probes"]["nccl_env"]) for p in (before_path, after_path)
    )
    findings = probe.judge(before, after)
    for f in findings:
        print(
            f"{f.hypothesis} {f.status.value} ({f.severity.value}, relevance {f.relevance}): {f.summary}"
        )
        for line in f.evidence:
            print(f"    {line}")
    print(json.dumps([f.to_json() for f in findings], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
