"""RecordReader (records by number), Writer (numpy and Arrow, atomic),
and output="arrow"."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import grist
from corpus import assert_batch, parses
from datasets import FORMATS, rows, same_batches, source, spec_of


@pytest.mark.parametrize("fmt", ["ffrecord", "ofrecord"])
def test_record_reader_reads_records_by_number(fmt, data):
    path = data[fmt]
    everything = rows(grist.Loader(path, spec_of(path), batch_size=300))
    reader = grist.RecordReader(path, spec_of(path))
    assert len(reader) == 300 == sum(reader.counts)
    assert len(reader.counts) == 5 and reader.format.lower() == fmt
    rng = np.random.default_rng(3)
    for _ in range(5):
        idx = rng.integers(0, 300, size=37)
        got = rows([reader.read(idx)])
        assert got == [everything[i] for i in idx]
    # Repeats, any order, negative numbers, a list, an empty read.
    assert rows([reader.read([299, 0, 0, -1])]) == [everything[i] for i in (299, 0, 0, 299)]
    assert rows([reader.read([])]) == []
    with pytest.raises(IndexError):
        reader.read([300])


def test_record_reader_refuses_what_is_not_read_by_number(data):
    path = data["tfrecord"]
    # TFRecord files are read by number with their index files only.
    with pytest.raises(grist.SpecError) as info:
        grist.RecordReader(path, spec_of(path))
    assert "tfrecord" in str(info.value)


def test_record_reader_arrow_output(data):
    path = data["ffrecord"]
    reader = grist.RecordReader(path, spec_of(path), output="arrow")
    numpy_reader = grist.RecordReader(path, spec_of(path))
    got = reader.read([7, 3, 250])
    assert isinstance(got, pa.RecordBatch) and got.num_rows == 3
    want = numpy_reader.read([7, 3, 250])
    assert got.column("l").to_numpy().tolist() == want["l"].tolist()
    assert got.column("y").to_pylist() == list(want["y"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_arrow_output_matches_numpy_output(fmt, data):
    path = data[fmt]
    arrow = list(grist.Loader(path, spec_of(path), batch_size=64, output="arrow"))
    plain = list(grist.Loader(path, spec_of(path), batch_size=64))
    assert len(arrow) == len(plain)
    for a, p in zip(arrow, plain):
        assert isinstance(a, pa.RecordBatch)
        assert a.schema.names == list(p)
        for name, values in p.items():
            col = a.column(name)
            if values.dtype == object:
                got = [v.encode() if isinstance(v, str) else v for v in col.to_pylist()]
                assert got == list(values), name
            else:
                assert np.array_equal(col.to_numpy(zero_copy_only=False), values, equal_nan=values.dtype.kind == "f"), name


def test_arrow_output_is_zero_copy_for_dense_numeric_columns(data):
    # The record batch's value buffer is the decoded vector: its memory
    # stays the same through pyarrow and numpy views.
    path = data["avro"]
    batch = next(grist.Loader(path, spec_of(path), batch_size=64, output="arrow"))
    col = batch.column("l")
    view = col.to_numpy(zero_copy_only=True)
    assert view.__array_interface__["data"][0] == col.buffers()[1].address


@pytest.mark.parametrize("fmt", FORMATS)
def test_writer_round_trips_numpy_batches(fmt, tmp_path):
    batch = {
        "id": np.arange(5, dtype=np.int64),
        "x": np.linspace(0, 1, 10, dtype=np.float32).reshape(5, 2),
        "name": np.array([b"a", b"bc", b"", "d\u00e9", b"\xff"], dtype=object),
    }
    path = tmp_path / f"out.{fmt}"
    with grist.Writer(path, fmt) as w:
        w.write(batch)
        w.write(batch)
        assert w.records == 10
        # Nothing under the final name before close.
        assert not path.exists()
    report = w.close()
    assert report["records"] == 10 and path.exists()
    back = list(grist.Loader(path, report["spec"], batch_size=5))
    want = dict(batch, name=np.array([b"a", b"bc", b"", "d\u00e9".encode(), b"\xff"], dtype=object))
    assert same_batches(back, [want, want])


def test_writer_round_trips_the_corpus_sparse_varlen_and_ragged(tmp_path):
    """The loader's batches of every plain tf.Example parse of the corpus,
    written back to TFRecord with the parse's spec and read again: the
    reference batches."""
    written, seen = 0, set()
    for case, parse in parses("tfrecord"):
        if parse["outcome"] != "ok" or parse.get("api") != "tf.io.parse_example":
            continue
        kinds = {f["kind"] for f in parse["features"]}
        batches = list(grist.Loader(case.files, parse, batch_size=parse["batch_size"]))
        path = tmp_path / f"{case.name}-{parse['id']}.tfrecord"
        with grist.Writer(path, "tfrecord", parse) as w:
            for b in batches:
                w.write(b)
        back = list(grist.Loader(path, parse, batch_size=parse["batch_size"]))
        for i, (g, want) in enumerate(zip(back, parse["batches"])):
            assert_batch(g, want, f"{case.name}/{parse['id']} batch {i} (written back)")
        assert len(back) == len(parse["batches"])
        written += 1
        seen |= kinds
    assert written >= 5
    assert seen >= {"dense", "varlen", "sparse", "ragged", "fixed_len_sequence"}, seen


def test_writer_takes_arrow_batches_tables_and_streams(data, tmp_path):
    path = data["avro"]
    batches = list(grist.Loader(path, spec_of(path), batch_size=100, output="arrow"))
    table = pa.Table.from_batches(batches)
    out = tmp_path / "t.avro"
    with grist.Writer(out, "avro") as w:
        w.write(batches[0])  # __arrow_c_array__
        w.write(table)  # __arrow_c_stream__
        w.write(pa.RecordBatchReader.from_batches(table.schema, batches))
    report = w.close()
    assert report["records"] == 100 + 300 + 300
    back = list(grist.Loader(out, report["spec"], batch_size=100))
    first = list(grist.Loader(path, spec_of(path), batch_size=100))
    assert same_batches(back, first[:1] + first + first)


def test_writer_from_a_plain_arrow_table(tmp_path):
    table = pa.table({"a": pa.array([1, 2, 3], pa.int32()), "s": ["x", "y", "z"]})
    out = tmp_path / "p.ffr"
    with grist.Writer(out, "ffrecord") as w:
        w.write(table)
    back = next(grist.Loader(out, w.close()["spec"]))
    assert back["a"].tolist() == [1, 2, 3] and list(back["s"]) == [b"x", b"y", b"z"]


@pytest.mark.parametrize("fmt", ["tfrecord", "avro", "ffrecord", "ofrecord"])
def test_writer_from_a_polars_dataframe(fmt, tmp_path):
    """Any Arrow producer converts: polars hands its frame over as an Arrow
    C stream, strings as string_view and lists as large_list."""
    import polars as pl

    df = pl.DataFrame(
        {
            "a": pl.Series([1, -2, 3], dtype=pl.Int32),
            "x": [0.5, 1.5, -2.5],
            "s": ["x", "yy", ""],
            "b": [True, False, True],
            "l": [[1, 2], [3], []],
        }
    )
    out = tmp_path / f"p.{fmt}"
    with grist.Writer(out, fmt, lossy=True) as w:
        w.write(df)
        w.write(df.slice(1, 2))
    report = w.close()
    assert report["records"] == 5
    (back,) = list(grist.Loader(out, report["spec"], batch_size=5))
    assert back["a"].tolist() == [1, -2, 3, -2, 3] and back["a"].dtype == np.int32
    assert back["x"].tolist() == [0.5, 1.5, -2.5, 1.5, -2.5]
    assert list(back["s"]) == [b"x", b"yy", b"", b"yy", b""]
    assert back["b"].tolist() == [True, False, True, False, True]
    indices, values, shape = back["l"]
    assert values.tolist() == [1, 2, 3, 3] and shape.tolist() == [5, 2]
    assert indices[:, 0].tolist() == [0, 0, 1, 3]


def test_writer_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "x.tfrecord"
    with pytest.raises(RuntimeError):
        with grist.Writer(out, "tfrecord") as w:
            w.write({"a": np.arange(3)})
            raise RuntimeError("stop")
    assert not out.exists() and list(tmp_path.iterdir()) == []
    # A batch that does not fit the spec: refused, naming the column.
    with pytest.raises(grist.SpecError) as info:
        with grist.Writer(out, "tfrecord", [{"name": "a", "kind": "dense", "dtype": "int64", "shape": [2]}]) as w:
            w.write({"b": np.arange(3)})
    assert "b" in str(info.value) or "a" in str(info.value)
    assert not out.exists()
    # What the format cannot hold is refused before anything is written.
    with pytest.raises(grist.SpecError):
        grist.Writer(out, "tfrecord", [{"name": "d", "kind": "dense", "dtype": "float64", "shape": []}])
    assert not out.exists()
