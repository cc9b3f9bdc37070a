#!/usr/bin/env python3
"""Measure tensorflow-io's generic Avro path: `make_avro_record_dataset`
(AvroRecordDataset + parse_avro) with key-expression features, the design
grist's key-expression path follows.

Pipeline:
    make_avro_record_dataset(files, features, batch_size=B,
                             reader_schema=<the file's writer schema>,
                             num_epochs=1, shuffle=False,
                             prefetch_buffer_size=0, num_parallel_reads=1)
iterated eagerly, for --epochs passes and at least --min-seconds of timed
iteration, with TF's thread pools at one thread ("one core").

Features come from a spec JSON ({"features": [{"name": key expression,
"kind": "dense"|"varlen", "dtype", "shape", "default"}]}): dense as
tf.io.FixedLenFeature(shape, dtype, default), varlen as
tf.io.VarLenFeature(dtype). tensorflow-io 0.37.1's parse_avro is
memory-unsafe for array paths (`[*]`; see ../shared/corpus/README.md):
give it scalar paths only (gen_nested.py's nested.scalar.json).

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import _common  # noqa: E402


def writer_schema(path):
    import fastavro

    with open(path, "rb") as f:
        return json.dumps(fastavro.reader(f).writer_schema)


def build_features(tf, feats):
    out = {}
    for f in feats:
        dtype = tf.as_dtype(f["dtype"])
        if f["kind"] == "dense":
            shape = [(-1 if d is None else int(d)) for d in f.get("shape", [])]
            out[f["name"]] = tf.io.FixedLenFeature(shape, dtype, default_value=f.get("default"))
        elif f["kind"] == "varlen":
            out[f["name"]] = tf.io.VarLenFeature(dtype)
        else:
            _common.die(f"{f['name']}: only dense and varlen features here")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--spec", required=True, help="features JSON (key expressions)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--min-seconds", type=float, default=0.0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    import tensorflow as tf
    import tensorflow_io
    from tensorflow_io.python.experimental.make_avro_record_dataset import make_avro_record_dataset

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    features = build_features(tf, _common.load_features(args.spec))
    schema = writer_schema(args.files[0])

    def make():
        ds = make_avro_record_dataset(
            file_pattern=args.files,
            features=features,
            batch_size=args.batch_size,
            reader_schema=schema,
            num_epochs=1,
            shuffle=False,
            prefetch_buffer_size=0,
            num_parallel_reads=1,
        )
        opts = tf.data.Options()
        opts.threading.private_threadpool_size = 1
        opts.threading.max_intra_op_parallelism = 1
        return ds.with_options(opts)

    run = _common.run_epochs(make, args.epochs, 0, args.min_seconds)
    res = _common.result(
        "tfio-generic",
        run,
        args.files,
        1,
        args.batch_size,
        tensorflow=tf.__version__,
        tensorflow_io=tensorflow_io.__version__,
    )
    _common.report(res, args.json)


if __name__ == "__main__":
    main()
