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
FixedLenSequenceFeature and with an unknown field inside a Features
message; outcomes in NAME.tf.json.

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
    import fastavro
    import tensorflow as tf
    from tensorflow_io.python.experimental.atds import features as atds_features
    from tensorflow_io.python.experimental.atds.dataset import ATDSDataset

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
    path = os.path.join(out, "atds_varlen.avro")
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records, codec="null")
    spec = [
        {"name": "v1", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "v2", "kind": "varlen", "dtype": "int64", "shape": [-1, -1]},
        {"name": "v3", "kind": "varlen", "dtype": "float32", "shape": [-1, -1, -1]},
        {"name": "s2", "kind": "varlen", "dtype": "string", "shape": [-1, -1]},
    ]
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
    with open(os.path.join(out, "atds_varlen.atds.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    what, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    {"avro": gen_avro, "atds": gen_atds}[what](out)


if __name__ == "__main__":
    main()
