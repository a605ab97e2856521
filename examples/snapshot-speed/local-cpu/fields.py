"""Field by field: the paths one snapshot records that the other does not (values aside)."""

import json
import sys


def paths(node, prefix=""):
    out = {prefix or "."}
    if isinstance(node, dict):
        if "missing" in node and len(node) <= 3 and isinstance(node.get("missing"), str):
            return {prefix + " (missing: " + node["missing"] + ")"}
        for k, v in node.items():
            out |= paths(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, list):
        for v in node:
            out |= paths(v, prefix + "[]")
    return out


a, b = (json.load(open(p)) for p in sys.argv[1:3])
pa, pb = paths(a), paths(b)
print(f"{sys.argv[1]}: {len(pa)} field paths; {sys.argv[2]}: {len(pb)} field paths")
only_a, only_b = sorted(pa - pb), sorted(pb - pa)
print(f"only in {sys.argv[1]} ({len(only_a)}):")
print("\n".join("  " + p for p in only_a[:80]))
print(f"only in {sys.argv[2]} ({len(only_b)}):")
print("\n".join("  " + p for p in only_b[:80]))
for name in sorted(set(a["probes"]) | set(b["probes"])):
    sa, sb = a["probes"].get(name, {}), b["probes"].get(name, {})
    print(f"{name}: {sa.get('status')} -> {sb.get('status')}")
