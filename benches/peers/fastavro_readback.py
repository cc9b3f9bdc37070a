#!/usr/bin/env python3
"""Interop check: fastavro reads Avro files written by grist.

Writes prod19 with every codec through `grist gen prod19 --format avro`,
reads each file with fastavro, and checks that fastavro's records equal
the ones `grist cat --records` prints (records in fastavro's JSON form).

    benches/peers/fastavro_readback.py [path/to/grist] [records]

Needs fastavro with cramjam and backports.zstd (snappy, zstandard).
"""
import glob
import json
import subprocess
import sys
import tempfile

import fastavro

grist = sys.argv[1] if len(sys.argv) > 1 else "target/release/grist"
records = sys.argv[2] if len(sys.argv) > 2 else "3000"
ok = True
with tempfile.TemporaryDirectory() as tmp:
    for codec in ["null", "deflate", "snappy", "zstandard"]:
        subprocess.run([grist, "gen", "prod19", "--records", records, "--format", "avro",
                        "--codec", codec, "--out", f"{tmp}/{codec}"],
                       check=True, capture_output=True)
        for path in sorted(glob.glob(f"{tmp}/{codec}/*.avro")):
            with open(path, "rb") as fh:
                reader = fastavro.reader(fh)
                theirs = json.loads(json.dumps(list(reader)))
                file_codec = reader.codec
            out = subprocess.run([grist, "cat", "--records", path],
                                 check=True, capture_output=True, text=True).stdout
            ours = [json.loads(line) for line in out.splitlines()]
            same = ours == theirs
            ok &= same
            print(f"{codec}: {len(theirs)} records, header codec {file_codec}, "
                  f"fastavro == grist: {same}")
sys.exit(0 if ok else 1)
