"""The numpy batches: zero-copy, alive after the loader, the GIL released
while decoding, errors carrying their location."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import grist
from corpus import cases, parses


def _dense_numeric_parse():
    """A corpus parse whose first batch has a dense numeric column."""
    for case, parse in parses("tfrecord"):
        if parse["outcome"] != "ok" or not parse.get("batches"):
            continue
        for name, t in (parse["batches"][0].get("outputs") or {}).items():
            if t["kind"] == "dense" and t["dtype"] != "string" and len(t["values"]) > 1:
                return case, parse, name
    raise AssertionError("no corpus parse with a dense numeric column")


def test_dense_arrays_own_the_decoded_buffer_and_outlive_the_loader():
    case, parse, name = _dense_numeric_parse()
    loader = grist.Loader(case.files, parse, batch_size=parse["batch_size"])
    batch = next(loader)
    arr = batch[name]
    # The array does not own a copy: its base object holds the Rust vector.
    assert not arr.flags.owndata and arr.base is not None
    assert arr.flags.c_contiguous and arr.flags.writeable
    ptr = arr.__array_interface__["data"][0]
    view = arr.reshape(-1)
    assert np.shares_memory(view, arr)
    expected = arr.copy()
    loader.close()
    del loader, batch
    gc.collect()
    # Still the same memory, still the same values.
    assert arr.__array_interface__["data"][0] == ptr
    assert np.array_equal(arr, expected)
    # The values of later allocations do not land in it.
    junk = [np.ones(arr.size, dtype=arr.dtype) for _ in range(50)]
    assert np.array_equal(arr, expected)
    del junk


def test_the_gil_is_released_while_a_batch_decodes():
    case, parse, _ = _dense_numeric_parse()
    # A large batch: the same file many times over.
    files = case.files * 3000
    stamps: list[float] = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    loader = grist.Loader(files, parse, batch_size=1 << 22, threads=1)
    t = threading.Thread(target=tick)
    t.start()
    try:
        time.sleep(0.02)
        start = time.perf_counter()
        batch = next(loader)
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert len(next(iter(batch.values()))) > 10_000
    assert end - start > 0.05, "the batch decoded too fast to tell"
    # A call holding the GIL would have stopped the other thread from its
    # first bytecode boundary to its return: no stamp inside the call
    # (past the first switch interval).
    inside = sum(1 for s in stamps if start + 0.01 < s < end)
    assert inside > 100, f"{inside} ticks during {end - start:.3f} s of decoding"


def test_errors_are_grist_exceptions_with_a_location():
    bad = [c for c in cases("tfrecord") if c.outcome == "error"]
    assert bad
    seen = 0
    for case in bad:
        parse = case.parses[0] if case.parses else None
        with pytest.raises(grist.DataError) as info:
            for _ in grist.Loader(case.files, parse, batch_size=4):
                pass
        e = info.value
        assert isinstance(e, grist.GristError)
        assert e.location is not None and e.location["file"] in case.files, (case, e.location)
        assert e.location["file"] in str(e)
        seen += 1
    assert seen


def test_bad_arguments_are_spec_errors():
    case, parse, _ = _dense_numeric_parse()
    with pytest.raises(grist.SpecError):
        grist.Loader(case.files, parse, shard_mode="sideways")
    with pytest.raises(ValueError):
        grist.Loader(case.files, [{"name": "x", "kind": "nonsense"}])
    missing = "/nonexistent/grist/file.tfrecord"
    with pytest.raises(grist.StorageError) as info:
        next(grist.Loader([missing], parse))
    assert isinstance(info.value, OSError)
    assert info.value.location == {"file": missing}
