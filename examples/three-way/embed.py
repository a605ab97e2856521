"""Put a canary bench file and a user-step bench file into a snapshot, as `snapshot --bench --bench-cmd` does.

usage: python3 embed.py SNAPSHOT CANARY.json USER.json OUT.json

`forensics snapshot --bench --bench-cmd` runs the canary and then the step and appends the
step's result (kind "user") to the canary's document (forensics.bench._add_user_step); this
does the same with runs already made, so run.sh measures each side once.
"""

import json
import sys

snap_path, canary_path, user_path, out_path = sys.argv[1:5]
snap = json.load(open(snap_path))
canary = json.load(open(canary_path))
user = json.load(open(user_path))
bench = {k: v for k, v in canary.items() if k not in ("redaction", "redactions")}
bench["results"] = list(canary["results"]) + [r for r in user["results"] if r.get("kind") == "user"]
bench["config"] = dict(
    canary["config"],
    user_step={
        "command": user["config"].get("command"),
        "metric": user["config"].get("metric"),
        "processes": len(user["results"][0]["process_medians"]),
    },
)
snap["bench"] = bench
json.dump(snap, open(out_path, "w"), indent=1)
