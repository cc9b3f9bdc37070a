#!/usr/bin/env python3
"""Generate the "nested" Avro benchmark dataset (docs/BENCHMARKS.md, "Avro
for any schema"): nested records, records in arrays, arrays in records in
arrays, a map, nullable unions and an enum, as Java and Spark pipelines
write them.

Writes, into --out DIR:
  nested-null.avro      record `Session`, codec null, sync interval 64000
  nested-deflate.avro   the same records, codec deflate
  nested.spec.json      grist's key-expression spec: every feature below
  nested.scalar.json    the scalar-path subset tensorflow-io 0.37.1 parses
                        reliably (its array paths are memory-unsafe)
  nested.meta.json      record count, sizes and sha256 of every file

Schema `Session` (fields in this order):
  session_id  long
  user        record User {id: long, country: string, age: int,
                           segment: enum Segment {NEW, ACTIVE, CHURNED}}
  score       ["null", float]            (null in 1 record of 5)
  emb         array<float>, 32 items
  events      array<record Event {ts: long,
                                  kind: enum Kind {VIEW, CLICK, CART, BUY},
                                  price: ["null", double] (null unless BUY),
                                  items: array<long> (0-4 items)}>
              (1-24 events)
  attrs       map<float> (2-6 entries: a0, and keys from a1..a9)
  tags        array<string> (0-4 tags of 3-12 letters)

Determinism: one `random.Random(7)`, records drawn in order; fixed sync
markers, so the files are reproducible byte for byte.

A side-by-side peer script for humans; nothing in CI depends on it.
Needs: fastavro (see README.md).
"""

import argparse
import hashlib
import json
import os
import random
import string

import fastavro

SEED = 7
SYNC_INTERVAL = 64000

SCHEMA = {
    "type": "record",
    "name": "Session",
    "namespace": "bench.nested",
    "fields": [
        {"name": "session_id", "type": "long"},
        {
            "name": "user",
            "type": {
                "type": "record",
                "name": "User",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "country", "type": "string"},
                    {"name": "age", "type": "int"},
                    {
                        "name": "segment",
                        "type": {"type": "enum", "name": "Segment", "symbols": ["NEW", "ACTIVE", "CHURNED"]},
                    },
                ],
            },
        },
        {"name": "score", "type": ["null", "float"], "default": None},
        {"name": "emb", "type": {"type": "array", "items": "float"}},
        {
            "name": "events",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Event",
                    "fields": [
                        {"name": "ts", "type": "long"},
                        {
                            "name": "kind",
                            "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "CLICK", "CART", "BUY"]},
                        },
                        {"name": "price", "type": ["null", "double"], "default": None},
                        {"name": "items", "type": {"type": "array", "items": "long"}},
                    ],
                },
            },
        },
        {"name": "attrs", "type": {"type": "map", "values": "float"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}

COUNTRIES = ["US", "DE", "FR", "IN", "BR", "JP", "NG", "GB"]
KINDS = ["VIEW", "CLICK", "CART", "BUY"]


def feature(name, kind, dtype, shape=None, default=None):
    f = {"name": name, "kind": kind, "dtype": dtype}
    if shape is not None:
        f["shape"] = shape
    if default is not None:
        f["default"] = default
    return f


# Paths tensorflow-io 0.37.1 parses reliably: scalars through records,
# unions with a default, a map key, an array element by index.
SCALAR_FEATURES = [
    feature("session_id", "dense", "int64", []),
    feature("user.id", "dense", "int64", []),
    feature("user.country", "dense", "string", []),
    feature("user.age", "dense", "int32", []),
    feature("user.segment", "dense", "string", []),
    feature("score", "dense", "float32", [], -1.0),
    feature("events[0].ts", "dense", "int64", []),
    feature("events[0].kind", "dense", "string", []),
    feature("attrs['a0']", "dense", "float32", [], 0.0),
]

ALL_FEATURES = SCALAR_FEATURES + [
    feature("emb[*]", "dense", "float32", [32]),
    feature("events[*].ts", "varlen", "int64"),
    feature("events[*].kind", "varlen", "string"),
    feature("events[*].items[*]", "varlen", "int64"),
    feature("tags[*]", "varlen", "string"),
]


def record(rng, i):
    n_events = rng.randint(1, 24)
    ts = 1_700_000_000_000 + rng.randrange(10**9)
    events = []
    for _ in range(n_events):
        ts += rng.randrange(1, 60_000)
        kind = rng.choice(KINDS)
        events.append(
            {
                "ts": ts,
                "kind": kind,
                "price": round(rng.uniform(1, 500), 2) if kind == "BUY" else None,
                "items": [rng.randrange(10**7) for _ in range(rng.randint(0, 4))],
            }
        )
    # a0 always: tensorflow-io fails on a missing map key even with a
    # default.
    keys = ["a0"] + rng.sample([f"a{k}" for k in range(1, 10)], rng.randint(1, 5))
    return {
        "session_id": i,
        "user": {
            "id": rng.randrange(10**12),
            "country": rng.choice(COUNTRIES),
            "age": rng.randint(13, 90),
            "segment": rng.choice(["NEW", "ACTIVE", "CHURNED"]),
        },
        "score": None if rng.random() < 0.2 else rng.gauss(0, 1),
        "emb": [rng.gauss(0, 1) for _ in range(32)],
        "events": events,
        "attrs": {k: rng.gauss(0, 1) for k in keys},
        "tags": [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 12)))
            for _ in range(rng.randint(0, 4))
        ],
    }


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(SEED)
    records = [record(rng, i) for i in range(args.records)]
    parsed = fastavro.parse_schema(SCHEMA)
    files = {}
    for codec in ["null", "deflate"]:
        path = os.path.join(args.out, f"nested-{codec}.avro")
        with open(path, "wb") as f:
            fastavro.writer(
                f,
                parsed,
                records,
                codec=codec,
                sync_interval=SYNC_INTERVAL,
                sync_marker=hashlib.md5(f"nested-{codec}".encode()).digest(),
            )
        files[os.path.basename(path)] = {"size": os.path.getsize(path), "sha256": sha256(path)}
    for name, feats in [("nested.spec.json", ALL_FEATURES), ("nested.scalar.json", SCALAR_FEATURES)]:
        with open(os.path.join(args.out, name), "w") as f:
            json.dump({"features": feats}, f, indent=1)
    meta = {"records": args.records, "seed": SEED, "schema": SCHEMA, "files": files}
    with open(os.path.join(args.out, "nested.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({"records": args.records, "files": files}))


if __name__ == "__main__":
    main()
