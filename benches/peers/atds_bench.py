#!/usr/bin/env python3
"""Measure tensorflow-io's ATDSDataset (AvroTensorDataset) reading Avro files.

Pipeline:
    ATDSDataset(files, batch_size=B, features=F,
                shuffle_buffer_size=S, num_parallel_calls=P).prefetch(Q)
iterated eagerly, one epoch per pass, for --epochs passes and at least
--min-seconds of timed iteration.

features come from an ATDS feature list JSON ({"features": [{"name", "kind":
"dense"|"sparse"|"varlen", "dtype", "shape"}]}, see prod19.atds.json), built
with tensorflow_io.python.experimental.atds.features.{DenseFeature,
SparseFeature, VarlenFeature}(shape, dtype). (tensorflow-io 0.37.1 does not
export ATDS under `tfio.experimental`; the module paths used here are the
ones in the installed package.)

--num-parallel-calls 1         inter/intra-op threads 1, tf.data private
                               thread pool 1, ATDS num_parallel_calls=1,
                               prefetch(1): "one core".
--num-parallel-calls N         N threads for ATDS, prefetch(N).
--num-parallel-calls autotune  ATDS num_parallel_calls=tf.data.AUTOTUNE,
                               prefetch(AUTOTUNE), TF's default thread pools.

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _common  # noqa: E402


def parse_par(s):
    if s == "autotune":
        return s
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("takes 1, N or autotune")
    if n < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return n


def build_features(tf, atds_features, feats):
    cls = {
        "dense": atds_features.DenseFeature,
        "sparse": atds_features.SparseFeature,
        "varlen": atds_features.VarlenFeature,
    }
    out = {}
    for f in feats:
        kind = f["kind"]
        if kind not in cls:
            _common.die(f"{f['name']}: ATDS has no {kind!r} feature (dense, sparse, varlen)")
        shape = [(-1 if d is None else int(d)) for d in f.get("shape", [])]
        out[f["name"]] = cls[kind](shape, tf.as_dtype(f["dtype"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--spec", required=True, help="ATDS feature list JSON")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--num-parallel-calls", type=parse_par, default=1, help="1 (default), N or autotune")
    ap.add_argument("--shuffle-buffer", type=int, default=0, help="ATDS shuffle_buffer_size (default 0: off)")
    ap.add_argument("--reader-buffer", type=int, default=None, help="ATDS reader_buffer_size bytes (default 128 KiB)")
    ap.add_argument("--prefetch", default=None, help="prefetch N or autotune (default: as num-parallel-calls)")
    ap.add_argument("--steady", action="store_true",
                    help="one endless iterator (the dataset repeated) timed for --min-seconds, as `grist bench` "
                         "measures, instead of a new iterator per epoch")
    ap.add_argument("--epochs", type=int, default=1, help="minimum number of passes over the files (default 1)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep doing whole epochs until this much time was timed (default 0)")
    ap.add_argument("--warmup-steps", type=int, default=0, help="steps not timed at the start (default 0)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    import tensorflow as tf
    import tensorflow_io
    from tensorflow_io.python.experimental.atds import features as atds_features
    from tensorflow_io.python.experimental.atds.dataset import ATDSDataset

    n = args.num_parallel_calls
    if n != "autotune":
        tf.config.threading.set_inter_op_parallelism_threads(n)
        tf.config.threading.set_intra_op_parallelism_threads(n)
        par = n
    else:
        par = tf.data.AUTOTUNE
    pf = args.prefetch if args.prefetch is not None else str(n)
    prefetch = tf.data.AUTOTUNE if pf == "autotune" else int(pf)

    features = build_features(tf, atds_features, _common.load_features(args.spec))

    ds = ATDSDataset(
        filenames=args.files,
        batch_size=args.batch_size,
        features=features,
        reader_buffer_size=args.reader_buffer,
        shuffle_buffer_size=args.shuffle_buffer,
        num_parallel_calls=par,
    )
    if prefetch != 0:
        ds = ds.prefetch(prefetch)
    if n != "autotune":
        opts = tf.data.Options()
        opts.threading.private_threadpool_size = n
        opts.threading.max_intra_op_parallelism = n
        ds = ds.with_options(opts)

    if args.steady:
        run = _common.run_steady(lambda: ds.repeat(), args.warmup_steps, args.min_seconds)
    else:
        run = _common.run_epochs(lambda: ds, args.epochs, args.warmup_steps, args.min_seconds)
    res = _common.result(
        "atds",
        run,
        args.files,
        n,
        args.batch_size,
        num_parallel_calls=n,
        shuffle_buffer=args.shuffle_buffer,
        prefetch=pf,
        warmup_steps=args.warmup_steps,
        tensorflow=tf.__version__,
        tensorflow_io=tensorflow_io.__version__,
    )
    _common.report(res, args.json)


if __name__ == "__main__":
    main()
