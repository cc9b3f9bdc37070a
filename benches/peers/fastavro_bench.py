#!/usr/bin/env python3
"""Measure plain fastavro reading Avro files into numpy column batches.

fastavro.reader(file) yields one dict per record; every --batch-size records
the batch is turned into numpy arrays, the same columns ATDSDataset returns:
  dense  -> array of shape [B, *shape] with the feature's dtype
  sparse -> (indices int64 [nnz, 1 + rank], values [nnz], dense_shape [1 + rank])
  varlen -> (indices int64 [nnz, 1 + rank], values [nnz], dense_shape)
Columns come from the ATDS feature list JSON (prod19.atds.json). Sparse
features are Avro records {indices0..indicesK-1: array, values: array}.
Single-threaded by nature (threads = 1).

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import argparse
import os
import sys
from itertools import chain

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import _common  # noqa: E402

NP_DTYPES = {
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
    "string": object,
}


def make_converter(feats):
    """Returns fn(list of record dicts) -> dict of numpy columns."""
    plan = []
    for f in feats:
        dt = NP_DTYPES[f["dtype"]]
        shape = [int(d) if d is not None else -1 for d in f.get("shape", [])]
        plan.append((f["name"], f["kind"], dt, shape))

    def sparse_col(values_per_row, rows, dt, shape, rank):
        # values_per_row: list of dicts {indices0.., values}
        lens = np.fromiter((len(v["values"]) for v in values_per_row), dtype=np.int64, count=rows)
        nnz = int(lens.sum())
        idx = np.empty((nnz, 1 + rank), dtype=np.int64)
        idx[:, 0] = np.repeat(np.arange(rows, dtype=np.int64), lens)
        for d in range(rank):
            key = f"indices{d}"
            idx[:, 1 + d] = np.fromiter(chain.from_iterable(v[key] for v in values_per_row), np.int64, nnz)
        if dt is object:
            vals = np.asarray(list(chain.from_iterable(v["values"] for v in values_per_row)), dtype=object)
        else:
            vals = np.fromiter(chain.from_iterable(v["values"] for v in values_per_row), dt, nnz)
        return idx, vals, np.asarray([rows] + shape, dtype=np.int64)

    def varlen_col(lists, rows, dt):
        lens = np.fromiter((len(v) for v in lists), dtype=np.int64, count=rows)
        nnz = int(lens.sum())
        idx = np.empty((nnz, 2), dtype=np.int64)
        idx[:, 0] = np.repeat(np.arange(rows, dtype=np.int64), lens)
        starts = np.repeat(np.cumsum(lens) - lens, lens)
        idx[:, 1] = np.arange(nnz, dtype=np.int64) - starts
        vals = np.asarray(list(chain.from_iterable(lists)), dtype=dt)
        return idx, vals, np.asarray([rows, int(lens.max()) if rows else 0], dtype=np.int64)

    def convert(records):
        rows = len(records)
        out = {}
        for name, kind, dt, shape in plan:
            col = [r[name] for r in records]
            if kind == "dense":
                a = np.asarray(col, dtype=dt)
                if list(a.shape[1:]) != shape:
                    raise ValueError(f"{name}: got shape {a.shape[1:]}, want {shape}")
                out[name] = a
            elif kind == "sparse":
                out[name] = sparse_col(col, rows, dt, shape, len(shape))
            elif kind == "varlen":
                if len(shape) > 1:
                    raise ValueError(f"{name}: only rank-1 varlen is implemented here")
                out[name] = varlen_col(col, rows, dt)
            else:
                raise ValueError(f"{name}: unknown kind {kind!r}")
        return out

    return convert


def batches(files, batch_size, convert, max_records=None):
    """One pass: batches of every file's records, in order; with
    max_records, the pass ends after that many records."""
    import fastavro

    left = max_records
    for path in files:
        buf = []
        with open(path, "rb") as fo:
            for rec in fastavro.reader(fo):
                buf.append(rec)
                if left is not None:
                    left -= 1
                if len(buf) == batch_size or left == 0:
                    yield len(buf), convert(buf)
                    buf = []
                if left == 0:
                    return
        if buf:
            yield len(buf), convert(buf)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--spec", required=True, help="ATDS feature list JSON")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=1, help="minimum number of passes over the files (default 1)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep doing whole epochs until this much time was timed (default 0)")
    ap.add_argument("--warmup-steps", type=int, default=0, help="steps not timed at the start (default 0)")
    ap.add_argument("--max-records", type=int, default=None,
                    help="end each pass after this many records (default: all); fastavro reads prod19 "
                         "at a few thousand records/s, so a whole 200,000-record pass takes about a minute")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.max_records is not None and args.max_records < 1:
        ap.error("--max-records must be >= 1")

    import fastavro

    convert = make_converter(_common.load_features(args.spec))
    run = _common.run_epochs(
        lambda: batches(args.files, args.batch_size, convert, args.max_records),
        args.epochs,
        args.warmup_steps,
        args.min_seconds,
        rows=lambda b: b[0],
    )
    codecs = []
    for path in args.files:
        with open(path, "rb") as fo:
            codecs.append(fastavro.reader(fo).codec)
    res = _common.result(
        "fastavro",
        run,
        args.files,
        1,
        args.batch_size,
        codec=",".join(sorted(set(codecs))),
        max_records=args.max_records,
        warmup_steps=args.warmup_steps,
        fastavro=fastavro.__version__,
        numpy=np.__version__,
    )
    if args.max_records is not None:
        # bytes_per_s assumes whole passes over the files.
        res["bytes_per_s"] = None
    _common.report(res, args.json)


if __name__ == "__main__":
    main()
