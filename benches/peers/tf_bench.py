#!/usr/bin/env python3
"""Measure TensorFlow reading TFRecord files of tf.Example into tensor batches.

Pipeline (what a TF user writes):
    tf.data.TFRecordDataset(files, compression_type=C)
      .batch(B)
      .map(lambda x: tf.io.parse_example(x, features), num_parallel_calls=P)
      .prefetch(Q)
and iterate it eagerly, one epoch per pass, for --epochs passes and at least
--min-seconds of timed iteration.

--threads 1         inter/intra-op threads 1, tf.data private thread pool 1,
                    num_parallel_calls=1, prefetch(1): "one core".
--threads N         the same with N; num_parallel_calls=N, prefetch(N).
--threads autotune  TF's defaults, tf.data.AUTOTUNE for map and prefetch.
--framing-only      no parse: TFRecordDataset -> batch(B) -> iterate (record
                    framing, CRC checks and the batch copy of the strings).

features come from a spec JSON in the corpus manifest form
({"features": [...]}, see prod19.spec.json): dense -> FixedLenFeature,
varlen -> VarLenFeature, sparse -> SparseFeature, ragged -> RaggedFeature,
fixed_len_sequence -> FixedLenSequenceFeature.

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402


def parse_threads(s):
    if s == "autotune":
        return s
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("--threads takes 1, N or autotune")
    if n < 1:
        raise argparse.ArgumentTypeError("--threads must be >= 1")
    return n


def build_features(tf, feats):
    out = {}
    for f in feats:
        kind = f["kind"]
        name = f["name"]
        dtype = tf.as_dtype(f["dtype"])
        if kind == "dense":
            shape = [(-1 if d is None else d) for d in f.get("shape", [])]
            if any(d == -1 for d in shape):
                _common.die(f"{name}: dense with an unknown dimension is not a FixedLenFeature")
            default = f.get("default")
            out[name] = tf.io.FixedLenFeature(shape, dtype, default_value=default)
        elif kind == "varlen":
            out[name] = tf.io.VarLenFeature(dtype)
        elif kind == "sparse":
            index_key = f["index_key"]
            size = f["size"]
            out[name] = tf.io.SparseFeature(
                index_key=index_key,
                value_key=f["value_key"],
                dtype=dtype,
                size=size,
                already_sorted=bool(f.get("already_sorted", False)),
            )
        elif kind == "ragged":
            kwargs = {"dtype": dtype, "value_key": f.get("value_key", name)}
            if f.get("row_splits_dtype"):
                kwargs["row_splits_dtype"] = tf.as_dtype(f["row_splits_dtype"])
            parts = []
            for p in f.get("partitions", []):
                cls = {
                    "row_splits": tf.io.RaggedFeature.RowSplits,
                    "row_lengths": tf.io.RaggedFeature.RowLengths,
                    "row_starts": tf.io.RaggedFeature.RowStarts,
                    "row_limits": tf.io.RaggedFeature.RowLimits,
                    "value_rowids": tf.io.RaggedFeature.ValueRowIds,
                    "uniform_row_length": tf.io.RaggedFeature.UniformRowLength,
                }[p["kind"]]
                parts.append(cls(p["key"] if "key" in p else p["length"]))
            kwargs["partitions"] = tuple(parts)
            out[name] = tf.io.RaggedFeature(**kwargs)
        elif kind == "fixed_len_sequence":
            out[name] = tf.io.FixedLenSequenceFeature(
                f.get("shape", []), dtype, allow_missing=bool(f.get("allow_missing", True)),
                default_value=f.get("default"),
            )
        else:
            _common.die(f"{name}: unknown kind {kind!r}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--spec", help="feature spec JSON (manifest form); required unless --framing-only")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--threads", type=parse_threads, default="autotune", help="1, N or autotune (default)")
    ap.add_argument("--steady", action="store_true",
                    help="one endless iterator (the dataset repeated) timed for --min-seconds, as `grist bench` "
                         "measures, instead of a new iterator per epoch")
    ap.add_argument("--epochs", type=int, default=1, help="minimum number of passes over the files (default 1)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep doing whole epochs until this much time was timed (default 0)")
    ap.add_argument("--warmup-steps", type=int, default=0, help="steps not timed at the start (default 0)")
    ap.add_argument("--compression", choices=["auto", "none", "gzip", "zlib"], default="auto",
                    help="auto: GZIP when every file ends in .gz (default)")
    ap.add_argument("--framing-only", action="store_true", help="time TFRecordDataset + batch only, no parse")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if not args.framing_only and not args.spec:
        ap.error("--spec is required unless --framing-only")

    if args.compression == "auto":
        comp = "GZIP" if all(f.endswith(".gz") for f in args.files) else ""
    else:
        comp = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}[args.compression]

    import tensorflow as tf

    if args.threads != "autotune":
        # Must happen before any op runs.
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        par = args.threads
        prefetch = args.threads
    else:
        par = tf.data.AUTOTUNE
        prefetch = tf.data.AUTOTUNE

    features = None if args.framing_only else build_features(tf, _common.load_features(args.spec))

    def make_ds():
        ds = tf.data.TFRecordDataset(args.files, compression_type=comp)
        ds = ds.batch(args.batch_size)
        if features is not None:
            ds = ds.map(lambda x: tf.io.parse_example(x, features), num_parallel_calls=par)
        ds = ds.prefetch(prefetch)
        if args.threads != "autotune":
            opts = tf.data.Options()
            opts.threading.private_threadpool_size = args.threads
            opts.threading.max_intra_op_parallelism = args.threads
            ds = ds.with_options(opts)
        return ds

    ds = make_ds()
    if args.framing_only:
        rows = lambda b: int(b.shape[0])
    else:
        rows = _common.batch_rows
    if args.steady:
        run = _common.run_steady(lambda: ds.repeat(), args.warmup_steps, args.min_seconds, rows=rows)
    else:
        run = _common.run_epochs(lambda: ds, args.epochs, args.warmup_steps, args.min_seconds, rows=rows)
    res = _common.result(
        "tensorflow-framing" if args.framing_only else "tensorflow",
        run,
        args.files,
        args.threads,
        args.batch_size,
        mode="framing_only" if args.framing_only else "parse_example",
        compression=comp or "none",
        warmup_steps=args.warmup_steps,
        tensorflow=tf.__version__,
    )
    _common.report(res, args.json)


if __name__ == "__main__":
    main()
