#!/usr/bin/env python3
"""Generate the "prod19" benchmark dataset (shared/bench/prod19.md).

Writes, into --out DIR:
  prod19.tfrecord        tf.Example per record, uncompressed
  prod19.tfrecord.gz     the same records, GZIP
  prod19-null.avro       Avro record `Prod19`, codec null,    sync interval 64000
  prod19-deflate.avro    Avro record `Prod19`, codec deflate, sync interval 64000
  prod19.spec.json       the tf.Example parse spec (corpus manifest `features` form)
  prod19.atds.json       the ATDS feature list for the Avro files
  prod19.meta.json       record count, draw order, sizes and sha256 of every file

Determinism: one `numpy.random.default_rng(42)`; records are drawn in chunks
of CHUNK (8192) records, a whole chunk is always drawn (and truncated at the
end), and within a chunk the columns are drawn in schema order (see
`draw_chunk`).  So `--records N` gives exactly the first N records of the
200,000-record set, and every output file is byte-for-byte reproducible
(TFRecord maps are serialized deterministically, Avro sync markers are fixed).

This is a side-by-side peer script for humans; nothing in CI depends on it.
Needs: tensorflow(-cpu) 2.16, fastavro, numpy (see README.md).
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

SEED = 42
DEFAULT_RECORDS = 200_000
CHUNK = 8192
SPARSE_SIZE = 50001
NNZ_MIN, NNZ_MAX = 10, 50  # inclusive
INT_HIGH = 1_000_000
LONG_HIGH = 1_000_000_000_000
SYNC_INTERVAL = 64000
# Fixed Avro sync markers so the files are reproducible byte for byte.
SYNC_NULL = hashlib.md5(b"prod19-null").digest()
SYNC_DEFLATE = hashlib.md5(b"prod19-deflate").digest()

# (name, avro type) of the scalar fields, in schema order.
SCALARS = [
    ("s_int", "int"),
    ("s_long0", "long"),
    ("s_long1", "long"),
    ("s_float", "float"),
    ("s_double", "double"),
    ("s_bool", "boolean"),
]
# (name, avro item type, length) of the dense rank-1 fields, in schema order.
DENSE = [
    ("d_f32_0", "float", 32),
    ("d_f32_1", "float", 32),
    ("d_f32_2", "float", 32),
    ("d_f32_3", "float", 32),
    ("d_i64_0", "long", 8),
    ("d_i64_1", "long", 8),
    ("d_f64_0", "double", 16),
    ("d_i32_0", "int", 4),
]
SPARSE = [f"sp_{k}" for k in range(5)]

AVRO_TO_ATDS = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "bool",
}
# tf.Example only has int64_list / float_list / bytes_list.
AVRO_TO_EXAMPLE = {
    "int": "int64",
    "long": "int64",
    "boolean": "int64",
    "float": "float32",
    "double": "float32",
}


def avro_schema():
    fields = [{"name": n, "type": t} for n, t in SCALARS]
    fields += [{"name": n, "type": {"type": "array", "items": t}} for n, t, _ in DENSE]
    for k, n in enumerate(SPARSE):
        fields.append(
            {
                "name": n,
                "type": {
                    "type": "record",
                    "name": f"Sp{k}",
                    "fields": [
                        {"name": "indices0", "type": {"type": "array", "items": "long"}},
                        {"name": "values", "type": {"type": "array", "items": "float"}},
                    ],
                },
            }
        )
    return {"type": "record", "name": "Prod19", "fields": fields}


def example_spec():
    feats = []
    for n, t in SCALARS:
        feats.append({"name": n, "kind": "dense", "dtype": AVRO_TO_EXAMPLE[t], "shape": [], "default": None})
    for n, t, length in DENSE:
        feats.append({"name": n, "kind": "dense", "dtype": AVRO_TO_EXAMPLE[t], "shape": [length], "default": None})
    for n in SPARSE:
        feats.append(
            {
                "name": n,
                "kind": "sparse",
                "dtype": "float32",
                "index_key": f"{n}_indices",
                "value_key": f"{n}_values",
                "size": SPARSE_SIZE,
                "already_sorted": True,
            }
        )
    return {"features": feats}


def atds_spec():
    feats = []
    for n, t in SCALARS:
        feats.append({"name": n, "kind": "dense", "dtype": AVRO_TO_ATDS[t], "shape": []})
    for n, t, length in DENSE:
        feats.append({"name": n, "kind": "dense", "dtype": AVRO_TO_ATDS[t], "shape": [length]})
    for n in SPARSE:
        feats.append({"name": n, "kind": "sparse", "dtype": "float32", "shape": [SPARSE_SIZE]})
    return {"features": feats}


def sorted_unique_rows(rng, nnz):
    """For each row r, nnz[r] distinct indices in [0, SPARSE_SIZE), sorted.

    Draws 64 candidates per row, keeps the first nnz[r] distinct ones in draw
    order (so every index is equally likely), then sorts them.
    Returns (flat_indices int64, row_offsets int64 of len rows+1).
    """
    rows = nnz.shape[0]
    width = 64
    cand = rng.integers(0, SPARSE_SIZE, size=(rows, width), dtype=np.int64)
    order = np.argsort(cand, axis=1, kind="stable")
    srt = np.take_along_axis(cand, order, axis=1)
    dup_sorted = np.zeros_like(srt, dtype=bool)
    dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
    dup = np.zeros_like(dup_sorted)
    np.put_along_axis(dup, order, dup_sorted, axis=1)  # later occurrences are dups
    keep = ~dup
    rank = np.cumsum(keep, axis=1)
    if np.any(rank[:, -1] < nnz):
        raise RuntimeError("too many collisions drawing sparse indices (cannot happen in practice)")
    keep &= rank <= nnz[:, None]
    vals = np.where(keep, cand, np.iinfo(np.int64).max)
    vals.sort(axis=1)
    flat = vals[vals != np.iinfo(np.int64).max]
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(nnz, out=offsets[1:])
    assert flat.shape[0] == offsets[-1]
    return flat, offsets


def draw_chunk(rng, n):
    """Draw n records, columns in schema order. Returns a dict of numpy arrays."""
    c = {}
    for name, t in SCALARS:
        if t == "int":
            c[name] = rng.integers(0, INT_HIGH, size=n, dtype=np.int32)
        elif t == "long":
            c[name] = rng.integers(0, LONG_HIGH, size=n, dtype=np.int64)
        elif t == "float":
            c[name] = rng.standard_normal(size=n, dtype=np.float32)
        elif t == "double":
            c[name] = rng.standard_normal(size=n, dtype=np.float64)
        elif t == "boolean":
            c[name] = rng.integers(0, 2, size=n, dtype=np.int8).astype(bool)
    for name, t, length in DENSE:
        shape = (n, length)
        if t == "int":
            c[name] = rng.integers(0, INT_HIGH, size=shape, dtype=np.int32)
        elif t == "long":
            c[name] = rng.integers(0, LONG_HIGH, size=shape, dtype=np.int64)
        elif t == "float":
            c[name] = rng.standard_normal(size=shape, dtype=np.float32)
        elif t == "double":
            c[name] = rng.standard_normal(size=shape, dtype=np.float64)
    for name in SPARSE:
        nnz = rng.integers(NNZ_MIN, NNZ_MAX + 1, size=n, dtype=np.int64)
        idx, off = sorted_unique_rows(rng, nnz)
        vals = rng.standard_normal(size=int(off[-1]), dtype=np.float32)
        c[name] = (idx, vals, off)
    return c


def truncate_chunk(c, n):
    out = {}
    for k, v in c.items():
        if isinstance(v, tuple):
            idx, vals, off = v
            off = off[: n + 1]
            out[k] = (idx[: off[-1]], vals[: off[-1]], off)
        else:
            out[k] = v[:n]
    return out


def chunk_to_lists(c, n):
    """Per-column Python lists (one entry per record), for both writers."""
    cols = {}
    for name, _ in SCALARS:
        cols[name] = c[name].tolist()
    for name, _, _ in DENSE:
        cols[name] = c[name].tolist()
    for name in SPARSE:
        idx, vals, off = c[name]
        il, vl, ol = idx.tolist(), vals.tolist(), off.tolist()
        cols[name] = [(il[ol[r] : ol[r + 1]], vl[ol[r] : ol[r + 1]]) for r in range(n)]
    return cols


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="number of records (default 200000)")
    ap.add_argument("--out", default=".", help="output directory (created if missing)")
    ap.add_argument("--skip-gzip", action="store_true", help="do not write prod19.tfrecord.gz")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import fastavro

    t0 = time.perf_counter()
    schema = fastavro.parse_schema(avro_schema())
    p = lambda name: os.path.join(args.out, name)

    with open(p("prod19.spec.json"), "w") as f:
        json.dump(example_spec(), f, indent=1)
        f.write("\n")
    with open(p("prod19.atds.json"), "w") as f:
        json.dump(atds_spec(), f, indent=1)
        f.write("\n")

    f_null = open(p("prod19-null.avro"), "wb")
    f_defl = open(p("prod19-deflate.avro"), "wb")
    w_null = fastavro.write.Writer(f_null, schema, codec="null", sync_interval=SYNC_INTERVAL, sync_marker=SYNC_NULL)
    w_defl = fastavro.write.Writer(f_defl, schema, codec="deflate", sync_interval=SYNC_INTERVAL, sync_marker=SYNC_DEFLATE)
    tfw = tf.io.TFRecordWriter(p("prod19.tfrecord"))
    tfw_gz = None if args.skip_gzip else tf.io.TFRecordWriter(p("prod19.tfrecord.gz"), options=tf.io.TFRecordOptions(compression_type="GZIP"))

    int_cols = {n for n, t in SCALARS if t in ("int", "long", "boolean")} | {n for n, t, _ in DENSE if t in ("int", "long")}
    scalar_names = [n for n, _ in SCALARS]
    dense_names = [n for n, _, _ in DENSE]
    bool_names = {n for n, t in SCALARS if t == "boolean"}

    rng = np.random.default_rng(SEED)
    done = 0
    t_draw = t_ex = t_avro = 0.0
    while done < args.records:
        n = min(CHUNK, args.records - done)
        ta = time.perf_counter()
        c = draw_chunk(rng, CHUNK)
        if n < CHUNK:
            c = truncate_chunk(c, n)
        cols = chunk_to_lists(c, n)
        tb = time.perf_counter()
        t_draw += tb - ta
        for r in range(n):
            # tf.Example
            ex = tf.train.Example()
            fm = ex.features.feature
            for name in scalar_names:
                v = cols[name][r]
                if name in int_cols:
                    fm[name].int64_list.value.append(int(v))
                else:
                    fm[name].float_list.value.append(v)
            for name in dense_names:
                if name in int_cols:
                    fm[name].int64_list.value.extend(cols[name][r])
                else:
                    fm[name].float_list.value.extend(cols[name][r])
            for name in SPARSE:
                il, vl = cols[name][r]
                fm[name + "_indices"].int64_list.value.extend(il)
                fm[name + "_values"].float_list.value.extend(vl)
            data = ex.SerializeToString(deterministic=True)
            tfw.write(data)
            if tfw_gz is not None:
                tfw_gz.write(data)
        tc = time.perf_counter()
        t_ex += tc - tb
        for r in range(n):
            rec = {}
            for name in scalar_names:
                rec[name] = cols[name][r]
            for name in bool_names:
                rec[name] = bool(rec[name])
            for name in dense_names:
                rec[name] = cols[name][r]
            for name in SPARSE:
                il, vl = cols[name][r]
                rec[name] = {"indices0": il, "values": vl}
            w_null.write(rec)
            w_defl.write(rec)
        t_avro += time.perf_counter() - tc
        done += n
        print(f"\r{done}/{args.records} records, {time.perf_counter() - t0:.1f}s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    w_null.flush()
    w_defl.flush()
    f_null.close()
    f_defl.close()
    tfw.close()
    if tfw_gz is not None:
        tfw_gz.close()
    elapsed = time.perf_counter() - t0

    names = ["prod19.tfrecord", "prod19.tfrecord.gz", "prod19-null.avro", "prod19-deflate.avro", "prod19.spec.json", "prod19.atds.json"]
    files = {}
    for name in names:
        if os.path.exists(p(name)):
            files[name] = {"size": os.path.getsize(p(name)), "sha256": sha256_file(p(name))}
    meta = {
        "dataset": "prod19",
        "records": args.records,
        "seed": SEED,
        "rng": "numpy.random.default_rng(42), chunks of %d records drawn whole, columns in schema order" % CHUNK,
        "generator": "benches/peers/gen_prod19.py",
        "versions": {"numpy": np.__version__, "tensorflow": tf.__version__, "fastavro": fastavro.__version__},
        "seconds": round(elapsed, 2),
        "seconds_breakdown": {"draw": round(t_draw, 2), "tf_example": round(t_ex, 2), "avro": round(t_avro, 2)},
        "avro_schema": avro_schema(),
        "files": files,
    }
    with open(p("prod19.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(json.dumps({"seconds": meta["seconds"], "breakdown": meta["seconds_breakdown"],
                      "sizes": {k: v["size"] for k, v in files.items()}}))


if __name__ == "__main__":
    main()
