"""Object stores: the corpus served by grist-testkit's S3 server (started
by the cargo test harness, see conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import grist
from corpus import assert_batch, parses, root
from datasets import same_batches


def _url(s3_url: str, local: str) -> str:
    return f"{s3_url}/{Path(local).relative_to(root()).as_posix()}"


def test_the_corpus_reads_the_same_over_s3(s3_url):
    checked = 0
    for case, parse in parses("tfrecord"):
        if parse["outcome"] != "ok" or case.name.endswith(("gz", "zlib")) and checked > 3:
            continue
        urls = [_url(s3_url, f) for f in case.files]
        got = list(grist.Loader(urls, parse, batch_size=parse["batch_size"]))
        assert len(got) == len(parse["batches"]), case.name
        for i, (g, w) in enumerate(zip(got, parse["batches"])):
            assert_batch(g, w, f"{case.name} over s3 batch {i}")
        checked += 1
        if checked >= 6:
            break
    assert checked >= 6
    avro = next(c for c, p in parses("avro") if p["outcome"] == "ok")
    url = _url(s3_url, avro.files[0])
    assert grist.count(url) == grist.count(avro.files[0])
    assert grist.infer_spec(url) == grist.infer_spec(avro.files[0])


def test_errors_over_s3_name_the_url(s3_url):
    url = f"{s3_url}/tfrecord/no-such-file.tfrecord"
    try:
        next(grist.Loader(url, [{"name": "x", "kind": "varlen", "dtype": "int64"}]))
    except grist.StorageError as e:
        assert url in str(e) and e.location == {"file": url}
    else:
        raise AssertionError("no error for a missing object")


def test_write_and_read_by_number_over_s3(tmp_path):
    scratch = os.environ.get("GRIST_TEST_S3_SCRATCH")
    if not scratch:
        import pytest

        pytest.skip("GRIST_TEST_S3_SCRATCH is not set (run through cargo test)")
    url = scratch.rstrip("/") + "/py/data.ffr"
    batch = {"id": np.arange(100, dtype=np.int64), "v": np.ones((100, 3), dtype=np.float32)}
    with grist.Writer(url, "ffrecord") as w:
        w.write(batch)
    spec = w.close()["spec"]
    reader = grist.RecordReader(url, spec)
    assert len(reader) == 100
    got = reader.read([99, 3, 50])
    assert got["id"].tolist() == [99, 3, 50]
    back = list(grist.Loader(url, spec, batch_size=100))
    assert same_batches(back, [batch])
    # A conversion to the object store, read back.
    out = scratch.rstrip("/") + "/py/converted"
    report = grist.convert(url, out, "tfrecord", spec)
    assert report["records"] == 100
    assert same_batches(list(grist.Loader(out, f"{out}/spec.json", batch_size=100)), [batch])
