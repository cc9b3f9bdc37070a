#!/usr/bin/env python3
"""Read the files grist's conversions wrote back with the reference tools,
and compare every value with the original prod19 data.

Each CASE is a folder of grist outputs (`part-00000.<ext>`, ... and the
`spec.json` grist wrote beside them) named `<origin>-to-<anything>`, where
`<origin>` is `tfrecord` (converted from the original TFRecord file) or
`avro` (from the original Avro file, with its int32, bool and float64
fields). `side_by_side_convert.sh readback` makes them.

Readers, by the files in the folder:

  *.tfrecord, *.tfrecord.gz, *.tfrecord.zz
      tf.data.TFRecordDataset (compression by suffix) + tf.io.parse_example,
      the parse spec made from spec.json (int32/bool columns parse as
      int64: TF's parse_example has no other integer dtype).
  *.avro
      fastavro.reader (every codec; snappy needs cramjam, zstandard needs
      zstandard), and tensorflow-io's ATDSDataset for the codecs it reads
      (null, deflate, snappy; bzip2, xz and zstandard abort it).
  *.ffr
      a pure-Python FFRecord reader following shared/formats/FFRECORD.md
      (header, metadata CRC-32, per-sample CRC-32, offsets to the file end);
      tf.Example payloads parsed by tf.io.parse_example, OFRecord payloads
      (folder name containing `payload-ofrecord`) by the OFRecord protobuf.
  part-NNNNN (no suffix)
      a pure-Python OFRecord reader following shared/formats/OFRECORD.md
      (i64 LE length + payload, parts in order), payloads decoded with the
      OFRecord protobuf schema (built with google.protobuf's descriptor_pb2,
      TF's protobuf runtime).

The originals are read with the same tools: the original TFRecord file with
tf.data + parse_example and its parse spec, the original Avro file with
fastavro. A float64 value may be narrowed to float32 only in a folder whose
name contains `lossy`.

Prints one line per (case, reader) and exits 1 if any value differs.
"""

import argparse
import glob
import json
import os
import struct
import sys
import zlib

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

BATCH = 1024


def one(v):
    """A spec's OneOrMany: the single item."""
    if isinstance(v, list):
        if len(v) != 1:
            raise SystemExit(f"only rank-1 sparse features are handled here: {v}")
        return v[0]
    return v


def load_spec(path):
    with open(path) as f:
        s = json.load(f)
    return s["features"] if isinstance(s, dict) else s


# ---------------------------------------------------------------- columns
#
# A column: ("dense", array [N, *shape]) or ("sparse", splits [N+1],
# indices [nnz], values [nnz]) for rank-1 sparse features.


def dense_from_rows(rows, dtype, shape):
    a = np.asarray(rows, dtype=dtype)
    return ("dense", a.reshape((len(rows),) + tuple(shape)))


def sparse_from_rows(idx_rows, val_rows, dtype):
    splits = np.zeros(len(idx_rows) + 1, dtype=np.int64)
    splits[1:] = np.cumsum([len(r) for r in idx_rows])
    idx = np.fromiter((i for r in idx_rows for i in r), dtype=np.int64, count=int(splits[-1]))
    val = np.fromiter((v for r in val_rows for v in r), dtype=dtype, count=int(splits[-1]))
    return ("sparse", splits, idx, val)


def concat(parts):
    """Joins the per-batch columns of one feature."""
    if parts[0][0] == "dense":
        return ("dense", np.concatenate([p[1] for p in parts]))
    splits, idx, val, base = [np.zeros(1, dtype=np.int64)], [], [], 0
    for _, s, i, v in parts:
        splits.append(s[1:] + base)
        base += int(s[-1])
        idx.append(i)
        val.append(v)
    return ("sparse", np.concatenate(splits), np.concatenate(idx), np.concatenate(val))


def join_batches(batches):
    names = list(batches[0])
    return {n: concat([b[n] for b in batches]) for n in names}


# ---------------------------------------------------------------- TensorFlow

_tf = None


def tf():
    global _tf
    if _tf is None:
        import tensorflow

        tensorflow.config.set_visible_devices([], "GPU")
        _tf = tensorflow
    return _tf


def tf_parse_spec(feats):
    """The tf.io parse spec of a spec in tf.Example form."""
    t = tf()
    out = {}
    for f in feats:
        dtype = {"int32": "int64", "bool": "int64", "float64": "float32"}.get(f["dtype"], f["dtype"])
        dtype = t.as_dtype(dtype)
        if f["kind"] == "dense":
            out[f["name"]] = t.io.FixedLenFeature(list(f.get("shape") or []), dtype)
        elif f["kind"] == "sparse":
            out[f["name"]] = t.io.SparseFeature(
                index_key=one(f["index_key"]),
                value_key=f["value_key"],
                dtype=dtype,
                size=int(one(f["size"])),
                already_sorted=bool(f.get("already_sorted", False)),
            )
        else:
            raise SystemExit(f"{f['name']}: kind {f['kind']} is not handled here")
    return out


def tf_columns(parsed, rows):
    cols = {}
    for name, v in parsed.items():
        if isinstance(v, tf().sparse.SparseTensor):
            ind = v.indices.numpy()
            splits = np.zeros(rows + 1, dtype=np.int64)
            np.add.at(splits, ind[:, 0] + 1, 1)
            cols[name] = ("sparse", np.cumsum(splits), ind[:, 1].astype(np.int64), v.values.numpy())
        else:
            cols[name] = ("dense", v.numpy())
    return cols


def tf_read_serialized(serialized_batches, feats):
    spec = tf_parse_spec(feats)
    out = []
    for ser in serialized_batches:
        parsed = tf().io.parse_example(ser, spec)
        out.append(tf_columns(parsed, int(ser.shape[0])))
    return join_batches(out)


def read_tfrecord(files, feats):
    comp = {".gz": "GZIP", ".zz": "ZLIB"}.get(os.path.splitext(files[0])[1], "")
    ds = tf().data.TFRecordDataset(files, compression_type=comp).batch(BATCH)
    return tf_read_serialized(iter(ds), feats), f"tf.data TFRecordDataset({comp or 'plain'}) + parse_example"


# ---------------------------------------------------------------- fastavro

NP = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64, "bool": np.bool_}


def read_avro_fastavro(files, feats):
    import fastavro

    rows = {f["name"]: [] for f in feats}
    codecs = set()
    for path in files:
        with open(path, "rb") as fh:
            r = fastavro.reader(fh)
            codecs.add(r.codec)
            check_avro_types(path, r.writer_schema, feats)
            for rec in r:
                for f in feats:
                    rows[f["name"]].append(rec[f["name"]])
    cols = {}
    for f in feats:
        n, dt = f["name"], NP[f["dtype"]]
        if f["kind"] == "dense":
            cols[n] = dense_from_rows(rows[n], dt, f.get("shape") or [])
        elif f["kind"] == "sparse":
            cols[n] = sparse_from_rows([r["indices0"] for r in rows[n]], [r["values"] for r in rows[n]], dt)
        else:
            raise SystemExit(f"{n}: kind {f['kind']} is not handled here")
    return cols, f"fastavro {fastavro.__version__} (codec {','.join(sorted(codecs))})"


# The codecs tensorflow-io 0.37.1's ATDSDataset reads; on the others
# (bzip2, xz, zstandard) its avro-c++ throws "Unknown codec in data file"
# through a C++ boundary that terminates the process.
ATDS_CODECS = ("null", "deflate", "snappy")


def avro_codec(path):
    import fastavro

    with open(path, "rb") as fh:
        return fastavro.reader(fh).codec


AVRO_TYPE = {"int32": "int", "int64": "long", "float32": "float", "float64": "double", "bool": "boolean"}


def check_avro_types(path, schema, feats):
    """The writer schema stores each feature with the Avro type of its
    dtype (int32 as int, bool as boolean, ...): the values are not only
    equal but kept in their type."""
    fields = {f["name"]: f["type"] for f in schema["fields"]}

    def leaf(t):
        if isinstance(t, dict) and t.get("type") == "array":
            return leaf(t["items"])
        if isinstance(t, dict) and t.get("type") == "record":
            return leaf({f["name"]: f["type"] for f in t["fields"]}["values"])
        return t["type"] if isinstance(t, dict) else t

    for f in feats:
        got = leaf(fields[f["name"]])
        if got != AVRO_TYPE[f["dtype"]]:
            raise ValueError(f"{path}: {f['name']} is stored as {got}, not {AVRO_TYPE[f['dtype']]}")


def read_avro_atds(files, feats):
    t = tf()
    from tensorflow_io.python.experimental.atds import features as af
    from tensorflow_io.python.experimental.atds.dataset import ATDSDataset

    spec = {}
    for f in feats:
        cls = {"dense": af.DenseFeature, "sparse": af.SparseFeature, "varlen": af.VarlenFeature}[f["kind"]]
        spec[f["name"]] = cls([int(d) for d in f.get("shape") or []], t.as_dtype(f["dtype"]))
    ds = ATDSDataset(files, batch_size=BATCH, features=spec, drop_remainder=False, num_parallel_calls=1)
    out = []
    for b in ds:
        first = next(iter(b.values()))
        rows = int(first.dense_shape[0]) if isinstance(first, t.sparse.SparseTensor) else int(first.shape[0])
        out.append(tf_columns(b, rows))
    return join_batches(out), "tensorflow-io ATDSDataset"


# ---------------------------------------------------------------- FFRecord / OFRecord

_ofrecord = None


def ofrecord_class():
    """OneFlow's OFRecord message (proto2, shared/formats/OFRECORD.md §1),
    built at run time with TF's protobuf runtime."""
    global _ofrecord
    if _ofrecord is not None:
        return _ofrecord
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="ofrecord_readback.proto", package="oneflow", syntax="proto2")
    F = descriptor_pb2.FieldDescriptorProto
    for name, typ, packed in [
        ("BytesList", F.TYPE_BYTES, False),
        ("FloatList", F.TYPE_FLOAT, True),
        ("DoubleList", F.TYPE_DOUBLE, True),
        ("Int32List", F.TYPE_INT32, True),
        ("Int64List", F.TYPE_INT64, True),
    ]:
        m = fdp.message_type.add(name=name)
        fld = m.field.add(name="value", number=1, label=F.LABEL_REPEATED, type=typ)
        if packed:
            fld.options.packed = True
    feat = fdp.message_type.add(name="Feature")
    feat.oneof_decl.add(name="kind")
    for i, (fname, tname) in enumerate(
        [("bytes_list", "BytesList"), ("float_list", "FloatList"), ("double_list", "DoubleList"),
         ("int32_list", "Int32List"), ("int64_list", "Int64List")], start=1):
        feat.field.add(name=fname, number=i, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                       type_name=".oneflow." + tname, oneof_index=0)
    rec = fdp.message_type.add(name="OFRecord")
    entry = rec.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE, type_name=".oneflow.Feature")
    rec.field.add(name="feature", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                  type_name=".oneflow.OFRecord.FeatureEntry")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("oneflow.OFRecord")
    _ofrecord = message_factory.GetMessageClass(desc)
    return _ofrecord


def ofrecord_columns(payloads, feats):
    cls = ofrecord_class()
    rows = {f["name"]: [] for f in feats}
    keys = {}
    for f in feats:
        if f["kind"] == "sparse":
            keys[f["name"]] = (one(f["index_key"]), f["value_key"])
    for p in payloads:
        m = cls.FromString(p)
        for f in feats:
            n = f["name"]
            if f["kind"] == "sparse":
                ik, vk = keys[n]
                rows[n].append((list_values(m.feature[ik]), list_values(m.feature[vk])))
            else:
                rows[n].append(list_values(m.feature[n]))
    cols = {}
    for f in feats:
        n = f["name"]
        if f["kind"] == "sparse":
            cols[n] = sparse_from_rows([r[0] for r in rows[n]], [r[1] for r in rows[n]], rows_dtype(rows[n], 1))
        else:
            cols[n] = dense_from_rows(rows[n], rows_dtype(rows[n], None), f.get("shape") or [])
            if f["dtype"] == "bool":
                # OFRecord has no bool list: an int32_list of 0/1
                # (docs/CONVERSION.md), read back as bool.
                a = cols[n][1]
                if a.dtype != np.int32 or not np.isin(a, (0, 1)).all():
                    raise ValueError(f"{n}: a bool feature stored as {a.dtype}, not an int32_list of 0/1")
                cols[n] = ("dense", a.astype(np.bool_))
    return cols


def list_values(feature):
    kind = feature.WhichOneof("kind")
    if kind is None:
        raise ValueError("feature missing")
    vals = getattr(feature, kind).value
    return np.asarray(vals, dtype={"float_list": np.float32, "double_list": np.float64, "int32_list": np.int32,
                                   "int64_list": np.int64, "bytes_list": object}[kind])


def rows_dtype(rows, part):
    r = rows[0] if part is None else rows[0][part]
    return r.dtype


def read_ffrecord_samples(path):
    """The samples of one FFRecord file, every checksum checked."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 12:
        raise ValueError(f"{path}: {len(data)} bytes, shorter than a header")
    meta_crc, n = struct.unpack_from("<Iq", data, 0)
    if n < 0 or 12 + 12 * n > len(data):
        raise ValueError(f"{path}: bad sample count {n}")
    crcs = struct.unpack_from(f"<{n}I", data, 12)
    offsets = list(struct.unpack_from(f"<{n}q", data, 12 + 4 * n)) + [len(data)]
    if meta_crc != 0 and zlib.crc32(data[4:12 + 12 * n]) != meta_crc:
        raise ValueError(f"{path}: metadata checksum mismatch")
    out = []
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        if not 0 <= a <= b <= len(data):
            raise ValueError(f"{path}: sample {i}: bad offsets {a}..{b}")
        s = data[a:b]
        if zlib.crc32(s) != crcs[i]:
            raise ValueError(f"{path}: sample {i}: checksum mismatch")
        out.append(s)
    return out


def read_ofrecord_payloads(path):
    with open(path, "rb") as fh:
        data = fh.read()
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 8:
            raise ValueError(f"{path}: {len(data) - pos} bytes left for a length prefix")
        (length,) = struct.unpack_from("<q", data, pos)
        pos += 8
        if length < 0 or length > len(data) - pos:
            raise ValueError(f"{path}: record {len(out)}: length {length} exceeds the bytes left")
        out.append(data[pos:pos + length])
        pos += length
    return out


def read_ffrecord(files, feats, payload):
    samples = [s for f in files for s in read_ffrecord_samples(f)]
    if payload == "ofrecord":
        return ofrecord_columns(samples, feats), "FFRecord rules (CRC-32 checked) + OFRecord protobuf"
    t = tf()
    batches = (t.constant(samples[i:i + BATCH]) for i in range(0, len(samples), BATCH))
    return tf_read_serialized(batches, feats), "FFRecord rules (CRC-32 checked) + tf.io.parse_example"


def read_ofrecord(files, feats):
    payloads = [p for f in files for p in read_ofrecord_payloads(f)]
    return ofrecord_columns(payloads, feats), "OFRecord rules (i64 LE framing) + OFRecord protobuf"


# ---------------------------------------------------------------- compare


def kind_of(dtype):
    if np.issubdtype(dtype, np.floating):
        return "float"
    if dtype == np.bool_:
        return "int"  # bool columns compare as 0/1
    return "int"


def same_values(want, got, lossy, what, strict):
    if strict and want.dtype != got.dtype:
        return f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if kind_of(want.dtype) != kind_of(got.dtype):
        return f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if want.shape != got.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    if kind_of(want.dtype) == "int":
        ok = np.array_equal(want.astype(np.int64), got.astype(np.int64))
    else:
        if want.dtype == np.float64 and got.dtype == np.float32:
            if not lossy:
                return f"{what}: float64 narrowed to float32 without lossy"
            want = want.astype(np.float32)
        elif want.dtype == np.float32 and got.dtype == np.float64:
            got_n = got.astype(np.float32)
            if not np.array_equal(got_n.astype(np.float64), got):
                return f"{what}: float64 values that are not float32 values"
            got = got_n
        ok = np.array_equal(want.view(np.uint32 if want.dtype == np.float32 else np.uint64),
                            got.view(np.uint32 if got.dtype == np.float32 else np.uint64))
    if not ok:
        bad = np.flatnonzero((want != got).reshape(-1))
        return f"{what}: {len(bad)} values differ (first at flat index {bad[0]})"
    return None


def compare(want, got, lossy, strict):
    """The problems found comparing columns `got` with `want`. `strict`:
    the dtypes must be equal too (every reader but parse_example, which
    has no int32 or bool)."""
    problems = []
    if set(want) != set(got):
        problems.append(f"features: {sorted(set(want) ^ set(got))}")
    for n in sorted(set(want) & set(got)):
        w, g = want[n], got[n]
        if w[0] != g[0]:
            problems.append(f"{n}: {g[0]}, expected {w[0]}")
            continue
        if w[0] == "dense":
            p = same_values(w[1], g[1], lossy, n, strict)
        else:
            p = (None if np.array_equal(w[1], g[1]) else f"{n}: row lengths differ") or \
                same_values(w[2], g[2], lossy, f"{n} indices", strict) or \
                same_values(w[3], g[3], lossy, f"{n} values", strict)
        if p:
            problems.append(p)
    return problems


def records(cols):
    c = next(iter(cols.values()))
    return len(c[1]) if c[0] == "dense" else len(c[1]) - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", metavar="CASE", help="a folder of grist outputs, <origin>-to-...")
    ap.add_argument("--data", required=True, help="the gen_prod19.py folder of the originals")
    args = ap.parse_args()

    originals = {}

    def original(origin):
        if origin not in originals:
            if origin == "tfrecord":
                feats = load_spec(os.path.join(args.data, "prod19.spec.json"))
                cols, _ = read_tfrecord([os.path.join(args.data, "prod19.tfrecord")], feats)
            elif origin == "avro":
                feats = load_spec(os.path.join(args.data, "prod19.atds.json"))
                cols, _ = read_avro_fastavro([os.path.join(args.data, "prod19-null.avro")], feats)
            else:
                raise SystemExit(f"unknown origin {origin!r}")
            originals[origin] = cols
        return originals[origin]

    failed = 0
    for case in args.cases:
        name = os.path.basename(os.path.normpath(case))
        origin = name.split("-to-")[0]
        lossy = "lossy" in name
        feats = load_spec(os.path.join(case, "spec.json"))
        files = sorted(glob.glob(os.path.join(case, "part-*")))
        readers = []
        if any(".tfrecord" in f for f in files):
            readers.append(lambda: read_tfrecord(files, feats))
        elif files[0].endswith(".avro"):
            readers.append(lambda: read_avro_fastavro(files, feats))
            codec = avro_codec(files[0])
            if codec in ATDS_CODECS:
                readers.append(lambda: read_avro_atds(files, feats))
            else:
                print(f"{name:<40} SKIPPED  tensorflow-io ATDSDataset: codec {codec} (its avro-c++ aborts the "
                      f"process: 'Unknown codec in data file')")
        elif files[0].endswith(".ffr"):
            payload = "ofrecord" if "payload-ofrecord" in name else "example"
            readers.append(lambda: read_ffrecord(files, feats, payload))
        else:
            readers.append(lambda: read_ofrecord(files, feats))
        want = original(origin)
        for read in readers:
            try:
                got, how = read()
            except Exception as e:  # a reader that refuses the file is a result too
                msg = str(e).strip().splitlines()
                print(f"{name:<40} REFUSED  {type(e).__name__}: {msg[-1] if msg else ''}"[:300])
                failed += 1
                continue
            problems = compare(want, got, lossy, strict="parse_example" not in how)
            status = "MATCH" if not problems else "DIFFER"
            failed += bool(problems)
            print(f"{name:<40} {status:<8} {records(got):>7} records, {len(got)} features  {how}"
                  + ("" if not problems else "\n    " + "\n    ".join(problems[:10])))
            sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
