"""FFRecord and OFRecord corpus cases through the Python API: the samples'
bytes (FFRecord, raw payloads) and records' features (OFRecord) the
manifests hold, and the errors of the damaged cases with their location."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import grist
from corpus import folder_cases, ofrecord_features, ofrecord_values, sha256_hex

RAW = [{"name": "bytes", "kind": "dense", "dtype": "string", "shape": []}]

FFR = folder_cases("ffrecord")
OFR = folder_cases("ofrecord")


def _ffr_files(case) -> list[str]:
    return sorted({case.path(f["file"]) for f in case.expected["files"] if f.get("part_of_dataset", True)})


@pytest.mark.parametrize("case", FFR, ids=repr)
def test_ffrecord_samples_match_the_manifest(case):
    want = [s["sha256"] for s in case.expected["samples"]]
    source = case.path(case.expected["input"])
    got, error = [], None
    try:
        for batch in grist.Loader(source, RAW, batch_size=3, payload="raw"):
            got.extend(sha256_hex(b) for b in batch["bytes"])
    except grist.GristError as e:
        error = e
    if case.expected["valid"]:
        assert error is None, f"{case}: {error}"
        assert got == want, case
        # By number too, in any order, one read.
        if want:
            reader = grist.RecordReader(source, RAW, payload="raw")
            assert len(reader) == len(want)
            order = list(range(len(want)))[::-1]
            rows = reader.read(order)["bytes"]
            assert [sha256_hex(b) for b in rows] == [want[i] for i in order]
    else:
        assert error is not None, f"{case}: no error"
        assert isinstance(error, (grist.DataError, grist.SpecError, grist.StorageError))
        assert got == want[: len(got)], case
        bad = Path(case.path(case.expected["error"]["file"])).name
        assert bad in str(error), f"{case}: {error}"
        if error.location is not None:
            assert Path(error.location["file"]).name == bad


def _ofr_parts(case) -> list[str]:
    return [case.path(p["file"]) for p in case.expected["parts"]]


@pytest.mark.parametrize("case", OFR, ids=repr)
def test_ofrecord_records_match_the_manifest(case):
    records = [r for p in case.expected["parts"] for r in p.get("records") or []]
    parts = _ofr_parts(case)
    if not case.expected["valid"]:
        # Any spec: the damage is in the framing or the protobuf.
        spec = [{"name": "x", "kind": "varlen", "dtype": "int64"}]
        got, error = 0, None
        try:
            for batch in grist.Loader(parts, spec, batch_size=1, format="ofrecord"):
                got += 1
        except grist.GristError as e:
            error = e
        if case.expected.get("lenient") and error is None:
            return
        assert error is not None, f"{case}: no error"
        assert got == case.expected["records_readable_before_error"], f"{case}: {error}"
        bad = Path(case.expected["error"]["file"]).name
        assert bad in str(error), f"{case}: {error}"
        return
    features = ofrecord_features(records)
    if not features:
        assert grist.count(parts, format="ofrecord") == len(records)
        return
    spec = [{"name": n, "kind": "varlen", "dtype": d} for n, d in sorted(features.items())]
    batches = list(grist.Loader(parts, spec, batch_size=4, format="ofrecord"))
    assert sum(b[spec[0]["name"]][2][0] for b in batches) == len(records), case
    row = 0
    for batch in batches:
        n = int(batch[spec[0]["name"]][2][0])
        for r in range(n):
            record = records[row + r]
            for name, dtype in features.items():
                indices, values, shape = batch[name]
                mine = values[indices[:, 0] == r]
                got = [
                    (len(v), sha256_hex(v)) if isinstance(v, bytes) and len(v) > 4096 else v
                    for v in (mine.tolist() if dtype != "string" else list(mine))
                ]
                want = ofrecord_values(
                    (record.get("features") or {}).get(name, {"kind": "none"}), dtype
                )
                if dtype.startswith("float"):
                    assert np.array_equal(
                        np.array(got, dtype=dtype).view(f"u{np.dtype(dtype).itemsize}"),
                        np.array(want, dtype=dtype).view(f"u{np.dtype(dtype).itemsize}"),
                    ) or all(
                        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want)
                    ), (case, row + r, name)
                else:
                    assert got == want, (case, row + r, name)
        row += n
    assert row == len(records)
