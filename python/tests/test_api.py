"""read_batches, infer_spec, count, convert, resume through state_dict,
shuffle, shards and epochs, for every format."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import numpy as np
import pytest

import grist
from corpus import assert_batch, cases, parses
from datasets import FORMATS, rows, same_batches, source, spec_of


def test_count_matches_the_corpus():
    checked = 0
    for section in ("tfrecord", "avro"):
        for case in cases(section):
            if case.outcome != "ok":
                continue
            want = (case.expected.get("tfrecord") or case.expected.get("avro"))["record_count"]
            assert grist.count(case.files) == want, case.name
            checked += 1
    assert checked > 10


def test_read_batches_yield_the_parses_batches():
    case, parse = next((c, p) for c, p in parses("tfrecord") if p["outcome"] == "ok")
    a = list(grist.read_batches(case.files, parse, batch_size=parse["batch_size"]))
    b = list(grist.Loader(case.files, parse, batch_size=parse["batch_size"]))
    assert len(a) == len(parse["batches"]) and same_batches(a, b)
    for i, (got, want) in enumerate(zip(a, parse["batches"])):
        assert_batch(got, want, f"{case.name} batch {i}")


def test_infer_spec_is_a_spec_the_loader_takes():
    spec = grist.infer_spec(source())
    names = [f["name"] for f in spec["features"]]
    loader = grist.Loader(source(), spec, batch_size=4)
    assert list(next(loader)) == names
    # The loader resolves the same spec by itself.
    assert grist.Loader(source(), batch_size=4).spec == spec
    # As JSON text and as a file.
    assert list(next(grist.Loader(source(), json.dumps(spec)))) == names


@pytest.mark.parametrize("fmt", FORMATS)
def test_convert_writes_every_record_and_reads_back(fmt, data, tmp_path):
    path = data[fmt]
    report = json.loads((path / "manifest.json").read_text())
    assert grist.count(path, format=fmt) == 300
    assert sum(p["records"] for p in report["parts"]) == 300
    back = list(grist.read_batches(path, spec_of(path), batch_size=64))
    src = list(grist.read_batches([source()] * 30, batch_size=64))
    # tf.Example and FFRecord's (tf.Example payload) float64 column is
    # float32, as lossy allowed.
    with np.errstate(over="ignore"):
        src = [{k: v.astype(b[k].dtype) for k, v in s.items()} for s, b in zip(src, back)]
    assert same_batches(back, src)
    # A rerun is up to date; verify reads every output back.
    again = grist.convert([source()] * 30, path, fmt, records_per_file=70, lossy=True, verify=True)
    assert again["up_to_date"] and again["records"] == 300


def test_convert_refuses_what_the_target_cannot_hold(tmp_path):
    # float64 in tf.Example is narrowed only when lossy.
    with pytest.raises(grist.SpecError) as info:
        grist.convert(source(), tmp_path / "out", "tfrecord")
    assert "d" in str(info.value)
    assert not (tmp_path / "out" / "part-00000.tfrecord").exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_from_state_dict_is_exact(fmt, shuffle, data):
    path = data[fmt]
    kwargs = dict(batch_size=7, shuffle=shuffle, seed=5, epochs=2, shuffle_buffer=50)
    full = list(grist.Loader(path, spec_of(path), **kwargs))
    assert len(full) == 2 * -(-300 // 7)
    for k in (0, 3, 44, 50):
        loader = grist.Loader(path, spec_of(path), **kwargs)
        head = [next(loader) for _ in range(k)]
        state = loader.state_dict()
        loader.close()
        # JSON-serializable, as a checkpoint holds it.
        state = json.loads(json.dumps(state))
        resumed = grist.Loader(path, spec_of(path), **kwargs)
        resumed.load_state_dict(state)
        assert resumed.epoch == (1 if k >= 43 else 0)
        rest = list(resumed)
        assert same_batches(head + rest, full), (fmt, shuffle, k)


def test_a_state_of_other_arguments_is_refused(data):
    path = data["tfrecord"]
    a = grist.Loader(path, spec_of(path), batch_size=7)
    next(a)
    b = grist.Loader(path, spec_of(path), batch_size=8)
    with pytest.raises(grist.SpecError):
        b.load_state_dict(a.state_dict())


@pytest.mark.parametrize("fmt", FORMATS)
def test_shuffle_is_a_permutation_per_epoch_and_seeded(fmt, data):
    path = data[fmt]
    plain = rows(grist.Loader(path, spec_of(path), batch_size=32))
    one = rows(grist.Loader(path, spec_of(path), batch_size=32, shuffle=True, seed=1))
    again = rows(grist.Loader(path, spec_of(path), batch_size=32, shuffle=True, seed=1))
    other = rows(grist.Loader(path, spec_of(path), batch_size=32, shuffle=True, seed=2))
    assert one == again and one != plain and one != other
    assert sorted(one, key=repr) == sorted(plain, key=repr)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", ["files", "records"])
def test_shards_read_every_record_once(fmt, mode, data):
    path = data[fmt]
    plain = rows(grist.Loader(path, spec_of(path), batch_size=16))
    shares = [
        rows(grist.Loader(path, spec_of(path), batch_size=16, shard=(r, 2), shard_mode=mode))
        for r in range(2)
    ]
    assert all(shares)
    assert sorted(shares[0] + shares[1], key=repr) == sorted(plain, key=repr)


def test_epochs(data):
    path = data["ffrecord"]
    two = rows(grist.Loader(path, spec_of(path), batch_size=50, epochs=2))
    assert len(two) == 600 and two[:300] == two[300:]
    endless = grist.Loader(path, spec_of(path), batch_size=50, epochs=None)
    got = [next(endless) for _ in range(20)]
    assert sum(len(b["i"]) for b in got) == 1000
    assert endless.epoch == 3
    stats = endless.stats()
    assert stats["records"] == 1000 and stats["batches"] == 20


def test_closed_loader_refuses(data):
    path = data["avro"]
    with grist.Loader(path, spec_of(path)) as loader:
        next(loader)
    with pytest.raises(grist.GristError):
        next(loader)


@pytest.mark.parametrize("fmt", ["ffrecord", "tfrecord"])
def test_start_epoch_reads_that_epochs_order(fmt, data):
    path = data[fmt]
    kwargs = dict(batch_size=32, shuffle=True, seed=9, shuffle_buffer=64)
    three = rows(grist.Loader(path, spec_of(path), epochs=3, **kwargs))
    later = grist.Loader(path, spec_of(path), epochs=2, start_epoch=1, **kwargs)
    assert later.epoch == 1
    assert rows(later) == three[300:]
    assert rows(grist.Loader(path, spec_of(path), epochs=1, start_epoch=2, **kwargs)) == three[600:]


def test_equal_batches_give_every_rank_as_many_batches(data):
    path = data["ffrecord"]
    # 300 records, 7 per batch, 2 ranks: 150 records each either way, but
    # by file the shares differ (5 files of 70, 70, 70, 70, 20).
    counts = [
        len(list(grist.Loader(path, spec_of(path), batch_size=7, shard=(r, 2), shard_mode="files", equal_batches=True)))
        for r in range(2)
    ]
    assert counts[0] == counts[1]


def test_list_files_part_name_and_write_spec(data, tmp_path):
    path = data["tfrecord"]
    files = grist.list_files(path)
    assert [Path(f).name for f, _ in files] == [grist.part_name("tfrecord", i) for i in range(5)]
    assert all(size == Path(f).stat().st_size for f, size in files)
    assert grist.part_name("tfrecord", 3, compression="GZIP") == "part-00003.tfrecord.gz"
    spec = grist.infer_spec(source())
    written = grist.write_spec(tmp_path / "out", "tfrecord", spec, lossy=True)
    assert json.loads((tmp_path / "out" / "spec.json").read_text()) == written
    # tf.Example holds the float64 column as float32.
    assert {f["name"]: f["dtype"] for f in written["features"]}["d"] == "float32"


def test_writer_spec_is_known_after_the_first_batch(tmp_path):
    w = grist.Writer(tmp_path / "a.avro", "avro")
    assert w.spec is None
    w.write({"x": np.arange(3, dtype=np.int32)})
    assert [f["name"] for f in w.spec["features"]] == ["x"]
    assert w.close()["spec"] == w.spec


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_objects_inherited_by_a_forked_child_drop_without_harm(data, tmp_path):
    """A torch DataLoader worker is forked: the loader, reader and writer
    it inherits have no threads there; dropping them must neither abort
    the child nor touch the parent's files."""
    path = data["ffrecord"]
    loader = grist.Loader(path, spec_of(path), batch_size=7, threads=2)
    next(loader)
    reader = grist.RecordReader(path, spec_of(path))
    writer = grist.Writer(tmp_path / "w.ffr", "ffrecord")
    writer.write({"x": np.arange(3)})
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            del loader, reader, writer
            gc.collect()
            # New objects work in the child.
            ok = len(list(grist.Loader(path, spec_of(path), batch_size=100))) == 3
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's objects still work.
    assert len(list(loader)) == 43 - 1
    assert reader.read([0])["i"].shape == (1,)
    assert writer.close()["records"] == 3


def test_reader_schema_as_dict_text_or_file(tmp_path):
    case, parse = next(
        (c, p)
        for c, p in parses("avro")
        if p["outcome"] == "ok" and isinstance(p.get("reader_schema"), dict) and p.get("batches")
    )
    schema = parse["reader_schema"]
    bare = {k: v for k, v in parse.items() if k != "reader_schema"}
    path = tmp_path / "reader.avsc"
    path.write_text(json.dumps(schema))
    for given in (schema, json.dumps(schema), str(path), path):
        got = list(grist.Loader(case.files, bare, batch_size=parse["batch_size"], reader_schema=given))
        assert len(got) == len(parse["batches"])
        for i, (g, w) in enumerate(zip(got, parse["batches"])):
            assert_batch(g, w, f"{case.name} batch {i} ({type(given).__name__})")


def test_infer_spec_and_loader_from_a_reader_schema(tmp_path):
    # Two versions of a schema: `id` int then long, `extra` added later.
    v1, v2 = tmp_path / "v1.avro", tmp_path / "v2.avro"
    with grist.Writer(v1, "avro") as w:
        w.write({"id": np.arange(3, dtype=np.int32), "x": np.array([0.5, 1.5, 2.5], dtype=np.float32)})
    with grist.Writer(v2, "avro") as w:
        w.write(
            {
                "id": np.arange(3, 6, dtype=np.int64),
                "x": np.array([3.5, 4.5, 5.5], dtype=np.float32),
                "extra": np.array([7, 8, 9], dtype=np.float32),
            }
        )
    reader = {
        "type": "record",
        "name": "Record",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "x", "type": "double"},
            {"name": "extra", "type": "float", "default": -1.0},
        ],
    }
    files = [v1, v2]
    # By the writer schemas, the versions disagree on `id` and `extra`.
    assert [f["name"] for f in grist.infer_spec(files)["features"]] == ["x"]
    spec = grist.infer_spec(files, reader_schema=reader)
    assert [(f["name"], f["dtype"]) for f in spec["features"]] == [
        ("id", "int64"),
        ("x", "float64"),
        ("extra", "float32"),
    ]
    assert spec["reader_schema"] == reader
    # No spec: inferred from the reader schema; the older file's rows take
    # `extra`'s default.
    (batch,) = list(grist.Loader(files, reader_schema=json.dumps(reader), batch_size=6, epochs=1))
    assert batch["id"].dtype == np.int64 and batch["id"].tolist() == list(range(6))
    assert batch["x"].dtype == np.float64 and batch["x"].tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    assert batch["extra"].tolist() == [-1.0, -1.0, -1.0, 7.0, 8.0, 9.0]
    # The spec alone (it carries the schema) reads the same.
    (again,) = list(grist.Loader(files, spec, batch_size=6, epochs=1))
    assert {k: v.tolist() for k, v in again.items()} == {k: v.tolist() for k, v in batch.items()}
    # Converted without a spec: inferred from the reader schema; the
    # outputs read back without it.
    report = grist.convert(files, tmp_path / "out", "ofrecord", reader_schema=reader)
    assert "reader_schema" not in report["spec"]
    (back,) = list(grist.Loader(tmp_path / "out", report["spec_path"], batch_size=6, epochs=1))
    assert {k: v.tolist() for k, v in back.items()} == {k: v.tolist() for k, v in batch.items()}
    # A reader schema a file does not resolve against: that file, that field.
    bad = json.loads(json.dumps(reader))
    bad["fields"][0]["type"] = "string"
    with pytest.raises(grist.GristError, match=r"v1\.avro.*id|id.*v1\.avro"):
        grist.infer_spec(files, reader_schema=bad)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shuffle", [False, True])
def test_mmap_gives_the_batches_reading_gives(data, fmt, shuffle):
    kwargs = dict(batch_size=32, shuffle=shuffle, seed=5, threads=2, epochs=2)
    read = list(grist.Loader(data[fmt], spec_of(data[fmt]), **kwargs))
    mapped = grist.Loader(data[fmt], spec_of(data[fmt]), mmap=True, **kwargs)
    got = []
    for i, b in enumerate(mapped):
        got.append(b)
        if i == 0 and os.path.exists("/proc/self/maps"):
            # The files are mapped while the loader reads them.
            with open("/proc/self/maps") as f:
                maps = f.read()
            assert any(str(p) in maps for p in Path(data[fmt]).iterdir())
        if i == 3:
            # A state taken from a mapped loader resumes in a reading one.
            rest = grist.Loader(data[fmt], spec_of(data[fmt]), **kwargs)
            rest.load_state_dict(mapped.state_dict())
            assert same_batches(list(rest), read[i + 1 :])
    assert len(read) == len(got) and same_batches(got, read)


def _mapped_now(path):
    with open("/proc/self/maps") as f:
        return str(path) in f.read()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_mmap_loaders_share_the_maps_until_released(tmp_path):
    # One loader per epoch (as grist.torch makes): the files stay mapped
    # from one to the next, a file rewritten between them is read anew,
    # and release_maps unmaps them.
    grist.release_maps()
    path = tmp_path / "data.tfrecord"
    with grist.Writer(path, "tfrecord") as w:
        w.write({"x": np.arange(10, dtype=np.int64)})
    spec = w.spec
    epochs = [list(grist.Loader(path, spec, batch_size=10, mmap=True, epochs=1)) for _ in range(2)]
    assert [b["x"].tolist() for e in epochs for b in e] == [list(range(10))] * 2
    del epochs
    assert _mapped_now(path), "kept after the loaders ended"
    if hasattr(os, "fork"):
        # A forked child (a DataLoader worker) reads mapped without the
        # parent's kept maps: it keeps none of its own.
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                (b,) = list(grist.Loader(path, spec, batch_size=10, mmap=True, epochs=1))
                ok = b["x"].tolist() == list(range(10)) and grist.release_maps() == 0
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert _mapped_now(path), "the parent's maps are its own"
    with grist.Writer(path, "tfrecord", spec) as w:  # replaced by rename: a new file
        w.write({"x": np.arange(100, 107, dtype=np.int64)})
    (batch,) = list(grist.Loader(path, spec, batch_size=10, mmap=True, epochs=1))
    assert batch["x"].tolist() == list(range(100, 107))
    del batch
    assert grist.release_maps() >= 1
    assert not _mapped_now(path)
    assert grist.release_maps() == 0
