#!/usr/bin/env python3
"""Write the conformance files of issue 18 with the reference tools, and
what the reference tools read from them.

    python gen_conformance.py avro     crates/avro-tensor/tests/conformance
    python gen_conformance.py atds     crates/avro-tensor/tests/conformance
    python gen_conformance.py tfrecord crates/tfrecord/tests/conformance

avro (fastavro 1.13.1): files Java and Spark writers produce (records that
take no bytes; names as Java reflection writes them; the `error` type) and
one with each logical type fastavro converts. Beside each NAME.avro,
NAME.records.jsonl holds fastavro's records, one per line, dumped with
json.dumps in fastavro's key order, datetime/date/time values as
isoformat(), Decimal and UUID as str(), bytes as grist's corpus form (a
UTF-8 string, else {"base64": ...}).

atds (tensorflow-io 0.37.1): varlen features of rank 2 and 3 whose inner
lists are empty at the end of rows, read by ATDSDataset in batches; beside
the file, NAME.atds.json holds the spec and every batch's sparse tensor.

tfrecord (tensorflow 2.16.2): what tf.io.parse_example,
parse_single_example, parse_sequence_example and
parse_single_sequence_example do with a default_value on a
FixedLenSequenceFeature and with a field other than the map inside a
Features or FeatureLists message (or other than the features inside a
FeatureList); outcomes in NAME.tf.json.

Run with /work/peers/venv/bin/python. The outputs are committed; the Rust
tests compare grist with them value by value.
"""

import base64
import datetime
import decimal
import io
import json
import os
import sys
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def bytes_json(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode("ascii")}


def plain(v):
    """fastavro's value in JSON terms (see the module doc)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return bytes_json(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    return v


def gen_avro(out):
    import fastavro

    def lt(t, name, **kw):
        d = {"type": t, "logicalType": name}
        d.update(kw)
        return d

    dec = decimal.Decimal
    cases = {
        # Records that take no bytes: a block of them claims records in 0
        # bytes of data.
        "zero_empty_record": ({"type": "record", "name": "Empty", "fields": []}, [{}] * 5),
        "zero_null": ("null", [None] * 4),
        "zero_null_field": (
            {"type": "record", "name": "N", "fields": [{"name": "n", "type": "null"}]},
            [{"n": None}] * 3,
        ),
        # Java reflection: nested classes as Outer$Inner, namespaces
        # ending in Outer$, references by short and full name.
        "java_names": (
            {
                "type": "record",
                "name": "Outer$Inner",
                "namespace": "com.example",
                "fields": [
                    {
                        "name": "a",
                        "type": {
                            "type": "record",
                            "name": "Nested$X",
                            "fields": [{"name": "b", "type": "long"}],
                        },
                    },
                    {"name": "c", "type": "Nested$X"},
                    {"name": "d", "type": ["null", "com.example.Nested$X"]},
                    {
                        "name": "e",
                        "type": {
                            "type": "enum",
                            "name": "Kind",
                            "namespace": "com.example.Outer$",
                            "symbols": ["A", "B"],
                        },
                    },
                    {"name": "f", "type": "com.example.Outer$.Kind"},
                    {"name": "g$h", "type": "int"},
                ],
            },
            [
                {"a": {"b": 1}, "c": {"b": 2}, "d": {"b": 3}, "e": "B", "f": "A", "g$h": 7},
                {"a": {"b": -1}, "c": {"b": 0}, "d": None, "e": "A", "f": "B", "g$h": 8},
            ],
        ),
        # The error type is a record.
        "error_type": (
            {
                "type": "record",
                "name": "R",
                "fields": [
                    {
                        "name": "e",
                        "type": {
                            "type": "error",
                            "name": "Failure",
                            "fields": [{"name": "msg", "type": "string"}],
                        },
                    },
                    {"name": "f", "type": ["null", "Failure"]},
                ],
            },
            [{"e": {"msg": "x"}, "f": {"msg": "y"}}, {"e": {"msg": ""}, "f": None}],
        ),
        "error_top": (
            {"type": "error", "name": "E", "fields": [{"name": "code", "type": "int"}]},
            [{"code": 404}],
        ),
        # Field order: not sorted.
        "field_order": (
            {
                "type": "record",
                "name": "O",
                "fields": [
                    {"name": "zeta", "type": "int"},
                    {"name": "alpha", "type": {"type": "map", "values": "int"}},
                    {"name": "mid", "type": "string"},
                ],
            },
            [{"zeta": 1, "alpha": {"y": 1, "b": 2, "m": 3}, "mid": "x"}],
        ),
        # Every logical type fastavro 1.13.1 converts, and some it does not.
        "logical": (
            {
                "type": "record",
                "name": "L",
                "fields": [
                    {"name": "date", "type": lt("int", "date")},
                    {"name": "tms", "type": lt("int", "time-millis")},
                    {"name": "tus", "type": lt("long", "time-micros")},
                    {"name": "tsms", "type": lt("long", "timestamp-millis")},
                    {"name": "tsus", "type": lt("long", "timestamp-micros")},
                    {"name": "tsns", "type": lt("long", "timestamp-nanos")},
                    {"name": "ltms", "type": lt("long", "local-timestamp-millis")},
                    {"name": "ltus", "type": lt("long", "local-timestamp-micros")},
                    {"name": "dec", "type": lt("bytes", "decimal", precision=10, scale=3)},
                    {"name": "dec7", "type": lt("bytes", "decimal", precision=20, scale=7)},
                    {"name": "dec0", "type": lt("bytes", "decimal", precision=2)},
                    {
                        "name": "decf",
                        "type": {
                            "type": "fixed",
                            "name": "F",
                            "size": 6,
                            "logicalType": "decimal",
                            "precision": 14,
                            "scale": 2,
                        },
                    },
                    {"name": "u", "type": lt("string", "uuid")},
                    {
                        "name": "uf",
                        "type": {"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"},
                    },
                    {"name": "other", "type": lt("string", "date")},
                    {"name": "opt", "type": ["null", lt("long", "timestamp-millis")]},
                    {"name": "days", "type": {"type": "array", "items": lt("int", "date")}},
                ],
            },
            [
                {
                    "date": 19000,
                    "tms": 3723004,
                    "tus": 3723004005,
                    "tsms": 1600000000123,
                    "tsus": 1600000000123456,
                    "tsns": 1600000000123456789,
                    "ltms": 1600000000000,
                    "ltus": -1,
                    "dec": dec("-1234.567"),
                    "dec7": dec("1E-7"),
                    "dec0": 8388607,
                    "decf": dec("-12.34"),
                    "u": "0f8fad5b-d9cb-469f-a165-70867728950e",
                    "uf": uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e").bytes,
                    "other": "x",
                    "opt": 0,
                    "days": [0, -719162, 2932896],
                },
                {
                    "date": -1,
                    "tms": 0,
                    "tus": 86399999999,
                    "tsms": -1,
                    "tsus": -62135596800000000,
                    "tsns": 0,
                    "ltms": 253402300799999,
                    "ltus": 0,
                    "dec": dec("0.000"),
                    "dec7": dec("0"),
                    "dec0": -99,
                    "decf": dec("999999999.99"),
                    "u": "{0F8FAD5B-D9CB-469F-A165-70867728950E}",
                    "uf": bytes(16),
                    "other": "y",
                    "opt": None,
                    "days": [],
                },
            ],
        ),
    }
    for name, (schema, records) in cases.items():
        path = os.path.join(out, name + ".avro")
        for r in records:
            # dec0's unscaled integers go in as bytes (fastavro writes
            # bytes as they are), so that fastavro rounds them on reading.
            if isinstance(r, dict) and isinstance(r.get("dec0"), int):
                v = r["dec0"]
                r["dec0"] = v.to_bytes((v.bit_length() + 8) // 8, "big", signed=True)
        with open(path, "wb") as f:
            fastavro.writer(f, fastavro.parse_schema(schema), records, codec="null")
        with open(path, "rb") as f:
            got = [plain(r) for r in fastavro.reader(f)]
        with open(os.path.join(out, name + ".records.jsonl"), "w") as f:
            for r in got:
                f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")


def gen_atds(out):
    def arr(t):
        return {"type": "array", "items": t}

    schema = {
        "type": "record",
        "name": "V",
        "fields": [
            {"name": "v1", "type": arr("long")},
            {"name": "v2", "type": arr(arr("long"))},
            {"name": "v3", "type": arr(arr(arr("float")))},
            {"name": "s2", "type": arr(arr("string"))},
        ],
    }
    # Inner lists empty at the end of rows, rows with no leaf at all, and
    # a batch (the last) with no value.
    records = [
        {"v1": [1, 2], "v2": [[1, 2], [3], []], "v3": [[[1.0], []], []], "s2": [["a"], [], []]},
        {"v1": [], "v2": [[4], [], [], []], "v3": [[[], [2.0, 3.0], []]], "s2": [[], ["b", "c"]]},
        {"v1": [3], "v2": [], "v3": [], "s2": []},
        {"v1": [], "v2": [[], []], "v3": [[[]], [[], []]], "s2": [[]]},
        {"v1": [4, 5, 6], "v2": [[], [5, 6, 7], [], [8], []], "v3": [[], [[4.0], [], [5.0]]], "s2": [["d", "e"]]},
        {"v1": [], "v2": [[]], "v3": [[]], "s2": []},
        {"v1": [], "v2": [], "v3": [[[]]], "s2": [[], []]},
    ]
    spec = [
        {"name": "v1", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "v2", "kind": "varlen", "dtype": "int64", "shape": [-1, -1]},
        {"name": "v3", "kind": "varlen", "dtype": "float32", "shape": [-1, -1, -1]},
        {"name": "s2", "kind": "varlen", "dtype": "string", "shape": [-1, -1]},
    ]
    one_atds(out, "atds_varlen", schema, records, spec)
    # Known sizes beside unknown ones: known ones stay as declared.
    schema2 = {
        "type": "record",
        "name": "W",
        "fields": [{"name": "a", "type": arr(arr("long"))}, {"name": "b", "type": arr(arr("long"))}],
    }
    records2 = [
        {"a": [[1], []], "b": [[1, 2], [3, 4]]},
        {"a": [[], []], "b": []},
        {"a": [[], [5]], "b": [[6, 7]]},
    ]
    spec2 = [
        {"name": "a", "kind": "varlen", "dtype": "int64", "shape": [2, -1]},
        {"name": "b", "kind": "varlen", "dtype": "int64", "shape": [-1, 2]},
    ]
    one_atds(out, "atds_varlen_known", schema2, records2, spec2)


def one_atds(out, name, schema, records, spec):
    """NAME.avro from `records`, fastavro's records of it, and ATDS's
    batches of it for `spec` in NAME.atds.json."""
    import fastavro
    import tensorflow as tf
    from tensorflow_io.python.experimental.atds import features as atds_features
    from tensorflow_io.python.experimental.atds.dataset import ATDSDataset

    path = os.path.join(out, name + ".avro")
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records, codec="null")
    with open(path, "rb") as f, open(os.path.join(out, name + ".records.jsonl"), "w") as o:
        for r in fastavro.reader(f):
            o.write(json.dumps(plain(r), separators=(",", ":"), ensure_ascii=False) + "\n")
    features = {
        f["name"]: atds_features.VarlenFeature(f["shape"], tf.as_dtype(f["dtype"])) for f in spec
    }
    parses = []
    for batch_size in (2, 3):
        ds = ATDSDataset(
            filenames=[path], batch_size=batch_size, features=features, drop_remainder=False
        )
        batches = []
        for b in ds:
            outputs = {}
            rows = None
            for f in spec:
                t = b[f["name"]]
                values = t.values.numpy().tolist()
                if f["dtype"] == "string":
                    values = [bytes_json(v) for v in values]
                dense_shape = t.dense_shape.numpy().tolist()
                rows = dense_shape[0]
                outputs[f["name"]] = {
                    "kind": "sparse",
                    "dtype": f["dtype"],
                    "indices": t.indices.numpy().tolist(),
                    "values": values,
                    "dense_shape": dense_shape,
                }
            batches.append({"records": rows, "outputs": outputs})
        parses.append({"batch_size": batch_size, "batches": batches})
    doc = {
        "reference": "tensorflow-io %s ATDSDataset" % __import__("tensorflow_io").__version__,
        "features": spec,
        "parses": parses,
    }
    with open(os.path.join(out, name + ".atds.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def varint(n):
    out = b""
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            out += bytes([x | 0x80])
        else:
            return out + bytes([x])


def ld(field, b):
    """A length-delimited protobuf field."""
    return varint(field << 3 | 2) + varint(len(b)) + b


def tensor_json(t, dtype):
    """A TensorFlow output in the corpus manifests' tensor form."""
    import tensorflow as tf

    def vals(a):
        out = a.numpy().reshape(-1).tolist()
        return [bytes_json(v) for v in out] if dtype == "string" else out

    if isinstance(t, tf.SparseTensor):
        return {
            "kind": "sparse",
            "dtype": dtype,
            "indices": t.indices.numpy().tolist(),
            "values": vals(t.values),
            "dense_shape": t.dense_shape.numpy().tolist(),
        }
    return {"kind": "dense", "dtype": dtype, "shape": list(t.shape), "values": vals(t)}


def tf_outcome(run, dtypes):
    """What a parse returned, or the class and first line of its error."""
    try:
        out = run()
    except Exception as e:  # noqa: BLE001 - the reference's errors are the data
        msg = str(e).split("}}")[-1].strip().splitlines()[0]
        return {"outcome": "error", "error_class": type(e).__name__, "message": msg}
    if isinstance(out, tuple):
        sections = {}
        for key, part in zip(("context", "feature_lists", "feature_list_lengths"), out):
            sections[key] = {k: tensor_json(v, dtypes[k]) for k, v in part.items()}
        return {"outcome": "ok", **sections}
    return {"outcome": "ok", "outputs": {k: tensor_json(v, dtypes[k]) for k, v in out.items()}}


def gen_tfrecord(out):
    import tensorflow as tf

    F = tf.train.Feature
    i64 = lambda v: F(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    fl = lambda v: F(float_list=tf.train.FloatList(value=v))  # noqa: E731

    def write(name, records):
        path = os.path.join(out, name + ".tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for r in records:
                w.write(r)
        return path

    def dump(name, doc):
        doc["reference"] = "tensorflow %s" % tf.__version__
        with open(os.path.join(out, name + ".tf.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")

    # 1. A default_value on a FixedLenSequenceFeature: padding in
    # parse_example, refused by the sequence parses before reading.
    ex = [
        tf.train.Example(features=tf.train.Features(feature={"a": i64([1, 2, 3, 4])})),
        tf.train.Example(features=tf.train.Features(feature={"a": i64([5, 6])})),
        tf.train.Example(),
    ]
    ex = [e.SerializeToString() for e in ex]
    write("fls_default_example", ex)
    seq = tf.train.SequenceExample(
        context=tf.train.Features(feature={"c": i64([9])}),
        feature_lists=tf.train.FeatureLists(
            feature_list={"s": tf.train.FeatureList(feature=[i64([1, 2]), i64([3, 4])])}
        ),
    ).SerializeToString()
    write("fls_default_sequence", [seq])
    fls = tf.io.FixedLenSequenceFeature
    spec = lambda d: {  # noqa: E731
        "name": "a",
        "kind": "fixed_len_sequence",
        "dtype": "int64",
        "shape": [2],
        "allow_missing": True,
        "default": d,
    }
    parses = []
    for default in (-1, 0, None):
        tf_spec = {"a": fls([2], tf.int64, allow_missing=True, default_value=default)}
        parses.append(
            {
                "api": "parse_example",
                "spec": {"features": [spec(default)]},
                **tf_outcome(lambda: tf.io.parse_example(ex, tf_spec), {"a": "int64"}),
            }
        )
    for default in (-1, 0, None):
        for allow in (True, False):
            seq_spec = dict(spec(default), name="s", allow_missing=allow)
            tf_spec = {"s": fls([2], tf.int64, allow_missing=allow, default_value=default)}
            ctx = {"c": tf.io.FixedLenFeature([1], tf.int64)}
            grist = {
                "context_features": [{"name": "c", "kind": "dense", "dtype": "int64", "shape": [1]}],
                "sequence_features": [seq_spec],
            }
            dtypes = {"c": "int64", "s": "int64"}
            parses.append(
                {
                    "api": "parse_sequence_example",
                    "spec": grist,
                    **tf_outcome(
                        lambda: tf.io.parse_sequence_example(
                            [seq], context_features=ctx, sequence_features=tf_spec
                        ),
                        dtypes,
                    ),
                }
            )
            single = tf_outcome(
                lambda: tf.io.parse_single_sequence_example(
                    seq, context_features=ctx, sequence_features=tf_spec
                ),
                dtypes,
            )
            parses.append(
                {
                    "api": "parse_single_sequence_example",
                    "spec": grist,
                    "outcome": single["outcome"],
                    **({k: single[k] for k in ("error_class", "message")} if single["outcome"] == "error" else {}),
                }
            )
    # In the context, a FixedLenSequenceFeature is refused with or
    # without a default.
    for default in (-1, None):
        tf_ctx = {"c": fls([], tf.int64, allow_missing=True, default_value=default)}
        grist = {
            "context_features": [dict(spec(default), name="c", shape=[])],
            "sequence_features": [],
        }
        parses.append(
            {
                "api": "parse_sequence_example",
                "spec": grist,
                **tf_outcome(
                    lambda: tf.io.parse_sequence_example([seq], context_features=tf_ctx),
                    {"c": "int64"},
                ),
            }
        )
    dump("fls_default", {"example_file": "fls_default_example.tfrecord",
                         "sequence_file": "fls_default_sequence.tfrecord", "parses": parses})

    # 2. A field other than the feature map inside Features (and, for
    # SequenceExample, inside the context Features or the FeatureLists).
    feat = i64([1, 2]).SerializeToString()
    entry = ld(1, ld(1, b"a") + ld(2, feat))
    unknowns = {
        "varint_2": varint(2 << 3) + b"\x05",
        "bytes_3": ld(3, b"xyz"),
        "fixed64_4": varint(4 << 3 | 1) + bytes(8),
        "fixed32_15": varint(15 << 3 | 5) + bytes(4),
        "varint_1": varint(1 << 3) + b"\x01",
    }
    # Each record: where its unknown field is, and the field's number.
    field = lambda k: int(k.rsplit("_", 1)[1])  # noqa: E731
    records, what = [], []
    records.append(ld(1, entry))
    what.append({"where": "nowhere"})
    for k, u in unknowns.items():
        records.append(ld(1, entry + u))
        what.append({"where": "Features", "field": field(k), "after": True})
        records.append(ld(1, u + entry))
        what.append({"where": "Features", "field": field(k), "after": False})
        records.append(ld(1, entry) + u)
        what.append({"where": "Example", "field": field(k)})
    write("features_unknown_field", records)
    specs = [
        {"features": [{"name": "a", "kind": "varlen", "dtype": "int64", "shape": [-1]}]},
        {"features": [{"name": "zz", "kind": "varlen", "dtype": "int64", "shape": [-1]}]},
    ]
    parses = []
    for sp in specs:
        name = sp["features"][0]["name"]
        tf_spec = {name: tf.io.VarLenFeature(tf.int64)}
        per_record = []
        for r in records:
            single = tf_outcome(lambda: tf.io.parse_example([r], tf_spec), {name: "int64"})
            # parse_single_example reads the same way (checked, not stored).
            again = tf_outcome(lambda: tf.io.parse_single_example(r, tf_spec), {name: "int64"})
            assert again["outcome"] == single["outcome"], (again, single)
            per_record.append(single)
        parses.append({"api": "parse_example", "spec": sp, "per_record": per_record})
    dump("features_unknown_field", {"file": "features_unknown_field.tfrecord", "records": what, "parses": parses})

    fls_msg = ld(1, ld(1, b"s") + ld(2, ld(1, feat)))
    ctx_msg = entry
    seqs, what = [], []

    def seq_record(ctx, lists, tail=b""):
        return ld(1, ctx) + ld(2, lists) + tail

    seqs.append(seq_record(ctx_msg, fls_msg))
    what.append({"where": "nowhere"})
    for k in ("varint_2", "bytes_3"):
        u = unknowns[k]
        seqs.append(seq_record(ctx_msg + u, fls_msg))
        what.append({"where": "Features", "field": field(k)})
        seqs.append(seq_record(ctx_msg, fls_msg + u))
        what.append({"where": "FeatureLists", "field": field(k)})
        seqs.append(seq_record(ctx_msg, fls_msg, u))
        what.append({"where": "SequenceExample", "field": field(k)})
        seqs.append(seq_record(ctx_msg, ld(1, ld(1, b"s") + ld(2, ld(1, feat) + u))))
        what.append({"where": "FeatureList", "field": field(k)})
    write("feature_lists_unknown_field", seqs)
    vl = lambda n: {"name": n, "kind": "varlen", "dtype": "int64", "shape": [-1]}  # noqa: E731
    parses = []
    for ctx_names, seq_names in ((["a"], ["s"]), ([], ["s"]), (["a"], [])):
        per_record = []
        for r in seqs:
            per_record.append(
                tf_outcome(
                    lambda: tf.io.parse_sequence_example(
                        [r],
                        context_features={n: tf.io.VarLenFeature(tf.int64) for n in ctx_names},
                        sequence_features={n: tf.io.VarLenFeature(tf.int64) for n in seq_names},
                    ),
                    {"a": "int64", "s": "int64"},
                )
            )
        parses.append(
            {
                "api": "parse_sequence_example",
                "spec": {
                    "context_features": [vl(n) for n in ctx_names],
                    "sequence_features": [vl(n) for n in seq_names],
                },
                "per_record": per_record,
            }
        )
    dump("feature_lists_unknown_field", {"file": "feature_lists_unknown_field.tfrecord", "records": what, "parses": parses})


def main():
    what, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    {"avro": gen_avro, "atds": gen_atds, "tfrecord": gen_tfrecord}[what](out)


if __name__ == "__main__":
    main()
