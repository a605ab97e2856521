"""Prepare files from a GPU machine for committing: placeholders for machine identifiers.

Replaces each distinct GPU UUID with ``GPU-00000000-0000-0000-0000-00000000000N`` and each
board serial with ``SERIAL-N`` (consistently across all files given, so GPUs still match
by UUID between snapshots), and the checkout path on that machine with ``<checkout>``.

Usage: python3 sanitize.py CHECKOUT_PATH FILE...   (files are rewritten in place)
"""

import json
import re
import sys


def main(argv: list[str]) -> int:
    checkout, files = argv[1], argv[2:]
    uuids: dict[str, str] = {}
    serials: dict[str, str] = {}
    uuid_re = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    texts = {f: open(f, encoding="utf-8").read() for f in files}
    for text in texts.values():
        for u in uuid_re.findall(text):
            uuids.setdefault(u, f"GPU-00000000-0000-0000-0000-{len(uuids):012d}")
        for s in re.findall(r'"serial": "([^"<]+)"', text):
            serials.setdefault(s, f"SERIAL-{len(serials)}")
    for f, text in texts.items():
        for old, new in list(uuids.items()) + list(serials.items()):
            text = text.replace(old, new)
        text = text.replace(checkout, "<checkout>")
        if f.endswith(".json"):
            json.loads(text)  # still valid
        open(f, "w", encoding="utf-8").write(text)
    print(f"{len(files)} files: {len(uuids)} GPU UUIDs, {len(serials)} serials replaced")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
