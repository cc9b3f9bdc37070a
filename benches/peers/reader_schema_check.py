#!/usr/bin/env python3
"""Interop check: reader schemas (Avro schema resolution), grist vs fastavro.

Reads the three schema versions of grist-testkit's evolution dataset
(written by apache-avro: `grist-evolution-dataset DIR`) through its reader
schema with `fastavro.reader(f, reader_schema=...)`, and compares each
record with the line `grist cat --records --reader-schema` prints for it.

    cargo run -p grist-testkit --bin grist-evolution-dataset -- /tmp/evo
    benches/peers/reader_schema_check.py /tmp/evo [path/to/grist]

Prints one line per file (records compared, differences) and the first
differences; exits 1 when any record differs.
"""
import json
import math
import subprocess
import sys

import fastavro

folder = sys.argv[1]
grist = sys.argv[2] if len(sys.argv) > 2 else "target/debug/grist"
with open(f"{folder}/reader.avsc") as fh:
    reader_schema = fastavro.parse_schema(json.load(fh))


def same(a, b):
    """JSON equality, numbers compared as numbers (1 == 1.0 is noted apart)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


ok = True
for name in ["v1.avro", "v2.avro", "v3.avro"]:
    path = f"{folder}/{name}"
    with open(path, "rb") as fh:
        theirs = list(fastavro.reader(fh, reader_schema=reader_schema))
    run = subprocess.run([grist, "cat", "--records", "--reader-schema",
                          f"{folder}/reader.avsc", path],
                         check=True, capture_output=True, text=True)
    ours = [json.loads(line) for line in run.stdout.splitlines()]
    diffs = [(i, t, o) for i, (t, o) in enumerate(zip(theirs, ours)) if not same(t, o)]
    if len(theirs) != len(ours):
        diffs.append((None, len(theirs), len(ours)))
    print(f"{name}: {len(theirs)} records, {len(diffs)} differ")
    for i, t, o in diffs[:3]:
        print(f"  record {i}:\n    fastavro {t}\n    grist    {o}")
    ok &= not diffs
sys.exit(0 if ok else 1)
