#!/usr/bin/env python3
"""The conversion a user writes today, timed: the Python baseline of grist's
conversion benchmark (issue 17, "Speed").

  tfrecord-to-avro   tf.data.TFRecordDataset -> batch -> tf.io.parse_example
                     (the prod19 parse spec), the tensors turned into one
                     dict per record, written by fastavro.writer (codec
                     null by default) with the schema of the parsed types:
                     long, float, arrays for dense vectors, a record
                     {indices0, values} per sparse feature (grist's ATDS
                     layout, what `grist::convert` writes for the same spec).
  avro-to-tfrecord   fastavro.reader -> one tf.train.Example per record
                     (int/long/boolean -> int64_list, float/double ->
                     float_list, sparse -> <name>_indices + <name>_values)
                     -> SerializeToString -> tf.io.TFRecordWriter.

One thread: TF's inter-op and intra-op pools and the tf.data private pool
are set to 1 and the map runs with num_parallel_calls=None; pin the process
(taskset -c 0) for a one-core figure. Prints one JSON line: records,
seconds, records_per_s, cpu_seconds (process CPU time, all threads),
records_per_cpu_s.

Needs: tensorflow(-cpu) 2.16, fastavro, numpy (see README.md).
"""

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_features(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["features"] if isinstance(doc, dict) else doc


def one_thread(tf):
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)


AVRO_OF = {"int64": "long", "float32": "float", "float64": "double", "int32": "int", "bool": "boolean"}


def avro_schema(feats):
    fields = []
    for f in feats:
        t = AVRO_OF[f["dtype"]]
        if f["kind"] == "dense":
            for _ in f.get("shape") or []:
                t = {"type": "array", "items": t}
            fields.append({"name": f["name"], "type": t})
        elif f["kind"] == "sparse":
            fields.append({"name": f["name"], "type": {
                "type": "record", "name": f["name"] + "_sparse", "fields": [
                    {"name": "indices0", "type": {"type": "array", "items": "long"}},
                    {"name": "values", "type": {"type": "array", "items": t}}]}})
        else:
            raise SystemExit(f"{f['name']}: kind {f['kind']} is not handled here")
    return {"type": "record", "name": "Prod19", "fields": fields}


def tfrecord_to_avro(args):
    import fastavro
    import tensorflow as tf

    one_thread(tf)
    feats = load_features(args.spec)
    spec = {}
    for f in feats:
        if f["kind"] == "dense":
            spec[f["name"]] = tf.io.FixedLenFeature(f.get("shape") or [], tf.as_dtype(f["dtype"]))
        else:
            spec[f["name"]] = tf.io.SparseFeature(index_key=f["index_key"], value_key=f["value_key"],
                                                  dtype=tf.as_dtype(f["dtype"]), size=f["size"],
                                                  already_sorted=True)
    ds = tf.data.TFRecordDataset(args.input)
    if args.max_records:
        ds = ds.take(args.max_records)
    ds = ds.batch(args.batch_size).map(lambda s: tf.io.parse_example(s, spec)).prefetch(1)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 1
    ds = ds.with_options(opts)
    names = [f["name"] for f in feats]
    sparse = {f["name"] for f in feats if f["kind"] == "sparse"}
    schema = fastavro.parse_schema(avro_schema(feats))
    count = [0]

    def records():
        for batch in ds:
            cols = []
            for n in names:
                v = batch[n]
                if n in sparse:
                    ind = v.indices.numpy()
                    vals = v.values.numpy().tolist()
                    rows = ind[:, 0].tolist()
                    cols_i = ind[:, 1].tolist()
                    per = [{"indices0": [], "values": []} for _ in range(int(v.dense_shape[0]))]
                    for r, i, x in zip(rows, cols_i, vals):
                        per[r]["indices0"].append(i)
                        per[r]["values"].append(x)
                    cols.append(per)
                else:
                    cols.append(v.numpy().tolist())
            for row in zip(*cols):
                count[0] += 1
                yield dict(zip(names, row))

    with open(args.output, "wb") as fh:
        fastavro.writer(fh, schema, records(), codec=args.codec)
    return count[0]


def avro_to_tfrecord(args):
    import fastavro
    import tensorflow as tf

    one_thread(tf)
    feats = load_features(args.spec)
    n = 0
    with open(args.input, "rb") as fh, tf.io.TFRecordWriter(args.output) as w:
        for rec in fastavro.reader(fh):
            feature = {}
            for f in feats:
                name, v = f["name"], rec[f["name"]]
                floats = f["dtype"] in ("float32", "float64")
                if f["kind"] == "sparse":
                    feature[name + "_indices"] = tf.train.Feature(int64_list=tf.train.Int64List(value=v["indices0"]))
                    feature[name + "_values"] = tf.train.Feature(float_list=tf.train.FloatList(value=v["values"]))
                    continue
                vals = v if isinstance(v, list) else [v]
                if floats:
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=vals))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in vals]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            n += 1
            if args.max_records and n >= args.max_records:
                break
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("direction", choices=["tfrecord-to-avro", "avro-to-tfrecord"])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--spec", required=True,
                    help="tfrecord-to-avro: the tf.Example parse spec (prod19.spec.json); "
                         "avro-to-tfrecord: the ATDS feature list (prod19.atds.json)")
    ap.add_argument("--codec", default="null", help="fastavro codec of the Avro output (default null)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--max-records", type=int, default=0, help="stop after N records (default: all)")
    args = ap.parse_args()

    import tensorflow  # noqa: F401  (imported before timing starts)
    import fastavro  # noqa: F401

    c0, t0 = cpu_seconds(), time.perf_counter()
    n = (tfrecord_to_avro if args.direction == "tfrecord-to-avro" else avro_to_tfrecord)(args)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    print(json.dumps({
        "tool": "python-baseline", "direction": args.direction, "records": n,
        "seconds": round(seconds, 4), "records_per_s": round(n / seconds, 1),
        "cpu_seconds": round(cpu, 3), "records_per_cpu_s": round(n / cpu, 1) if cpu else None,
        "bytes": os.path.getsize(args.output), "codec": args.codec if args.direction == "tfrecord-to-avro" else None,
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
