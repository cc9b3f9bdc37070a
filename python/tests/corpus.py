"""The shared golden corpus (../shared/corpus beside the repository, or
$GRIST_CORPUS): its cases and expected tensors, as the Rust tests read them
through grist-testkit. Expected values always come from the corpus files."""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def root() -> Path:
    """The corpus root."""
    return Path(os.environ.get("GRIST_CORPUS", REPO.parent / "shared" / "corpus"))


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Case:
    """One case of the manifest (a TFRecord or Avro section entry)."""

    def __init__(self, entry: dict) -> None:
        base = root()
        self.name: str = entry["case"]
        self.outcome: str = entry["expected"]
        self.files: list[str] = [str(base / f) for f in entry["files"]]
        self.expected: dict = _with_reader_schemas(read_json(base / entry["expected_json"]))

    @property
    def parses(self) -> list[dict]:
        return self.expected.get("parses") or []

    def __repr__(self) -> str:
        return self.name


def _with_reader_schemas(expected: dict) -> dict:
    """An Avro parse names its reader schema in words ("writer schema
    (see avro.schema)"): replaced by the schema it names (as grist-testkit
    does), so that each parse is a spec grist reads."""
    writer = (expected.get("avro") or {}).get("schema")
    for parse in expected.get("parses") or []:
        rs = parse.get("reader_schema")
        if isinstance(rs, str) and rs.startswith("writer schema") and writer is not None:
            parse["reader_schema"] = writer
    return expected


def cases(section: str) -> list[Case]:
    manifest = read_json(root() / "manifest.json")
    out = [Case(c) for c in manifest["sections"][section]]
    assert out, f"no {section} cases"
    return out


def parses(section: str) -> Iterator[tuple[Case, dict]]:
    for case in cases(section):
        for parse in case.parses:
            yield case, parse


# -- expected tensors ---------------------------------------------------

_DTYPES = {
    "bool": np.bool_,
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "string": object,
}


def _scalar(v: Any, dtype: str) -> Any:
    if dtype == "string":
        if isinstance(v, dict):
            return base64.b64decode(v["base64"])
        return v.encode("utf-8")
    if dtype in ("float32", "float64") and isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
    return v


def expected_values(values: list, dtype: str) -> np.ndarray:
    """Flat expected values as an array of `dtype` (floats parsed as
    float64, then cast: exact for float32, as the README says)."""
    conv = [_scalar(v, dtype) for v in values]
    if dtype == "string":
        a = np.empty(len(conv), dtype=object)
        a[:] = conv
        return a
    if dtype == "float32":
        return np.array(conv, dtype=np.float64).astype(np.float32)
    return np.array(conv, dtype=_DTYPES[dtype])


def assert_values(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal values, bit for bit for floats (NaN equal to NaN, -0.0 not
    equal to 0.0)."""
    assert isinstance(got, np.ndarray), f"{what}: {type(got)} is not an array"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if got.dtype.kind == "f":
        same = (got == want) & (np.signbit(got) == np.signbit(want))
        same |= np.isnan(got) & np.isnan(want)
        assert same.all(), f"{what}: {got} != {want}"
    elif got.dtype == object:
        assert list(got.ravel()) == list(want.ravel()), f"{what}: {got} != {want}"
    else:
        assert np.array_equal(got, want), f"{what}: {got} != {want}"


def assert_tensor(got: Any, want: dict, what: str) -> None:
    """A batch value against an expected tensor of the corpus."""
    kind, dtype = want["kind"], want["dtype"]
    if kind == "dense":
        expected = expected_values(want["values"], dtype).reshape(want["shape"])
        assert_values(got, expected, what)
    elif kind == "sparse":
        assert isinstance(got, tuple) and len(got) == 3, f"{what}: not (indices, values, shape)"
        indices, values, shape = got
        rank = len(want["dense_shape"])
        want_idx = np.array(want["indices"], dtype=np.int64).reshape(-1, rank)
        assert_values(indices, want_idx, what + " indices")
        assert_values(values, expected_values(want["values"], dtype), what + " values")
        assert_values(shape, np.array(want["dense_shape"], dtype=np.int64), what + " dense_shape")
    elif kind == "ragged":
        assert isinstance(got, tuple) and len(got) == 2, f"{what}: not (values, row_splits)"
        values, splits = got
        nested = want["nested_row_splits"]
        if len(nested) == 1:
            splits = [splits]
        assert isinstance(splits, list) and len(splits) == len(nested), f"{what}: splits"
        for i, (g, w) in enumerate(zip(splits, nested)):
            assert_values(g, np.array(w, dtype=np.int64), f"{what} row_splits[{i}]")
        flat = expected_values(want["flat_values"], dtype).reshape(want["flat_values_shape"])
        assert_values(values, flat, what + " flat_values")
    else:
        raise AssertionError(f"{what}: unknown kind {kind}")


SECTIONS = ("outputs", "context", "feature_lists", "feature_list_lengths")


def assert_batch(got: dict, want: dict, what: str) -> None:
    """A numpy batch against an expected batch of a parse (its sections'
    tensors; sequence-example columns keyed "section/name")."""
    expected = {}
    for section in SECTIONS:
        for name, tensor in (want.get(section) or {}).items():
            key = name if section == "outputs" else f"{section}/{name}"
            expected[key] = tensor
    assert set(got) == set(expected), f"{what}: columns {sorted(got)}, want {sorted(expected)}"
    for key, tensor in expected.items():
        assert_tensor(got[key], tensor, f"{what} / {key}")


# -- the folders without a manifest section (FFRecord, OFRecord) ----------


class FolderCase:
    """A case of ffrecord/ or ofrecord/: `<case>.expected.json` and its
    files."""

    def __init__(self, folder: str, path: Path) -> None:
        self.folder = folder
        self.name = path.name[: -len(".expected.json")]
        self.dir = path.parent
        self.expected: dict = read_json(path)

    def path(self, relative: str) -> str:
        return str(self.dir / relative)

    def __repr__(self) -> str:
        return f"{self.folder}/{self.name}"


def folder_cases(folder: str) -> list[FolderCase]:
    out = [FolderCase(folder, p) for p in sorted((root() / folder).glob("*.expected.json"))]
    assert out, f"no {folder} cases"
    return out


def sha256_hex(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


_OFR_DTYPES = {
    "bytes_list": "string",
    "float_list": "float32",
    "double_list": "float64",
    "int32_list": "int32",
    "int64_list": "int64",
}


def ofrecord_features(records: list[dict]) -> dict[str, str]:
    """The features of OFRecord manifest records with one list kind in
    every record that sets one: name -> grist dtype."""
    kinds: dict[str, set] = {}
    for r in records:
        for name, f in (r.get("features") or {}).items():
            if f["kind"] != "none":
                kinds.setdefault(name, set()).add(f["kind"])
    return {n: _OFR_DTYPES[k.pop()] for n, k in kinds.items() if len(k) == 1}


def ofrecord_values(feature: dict, dtype: str) -> list:
    """A manifest feature's values as grist returns them (bytes as bytes,
    floats from their IEEE bits, authoritative); a large bytes value as
    its (len, sha256) pair."""
    import struct

    if feature["kind"] == "none":
        return []
    if dtype == "string":
        out = []
        for v in feature["values"]:
            if isinstance(v, dict):
                out.append((v["len"], v["sha256"]))
            else:
                out.append(base64.b64decode(v))
        return out
    if dtype in ("float32", "float64"):
        fmt, size = ("<I", "<f") if dtype == "float32" else ("<Q", "<d")
        return [
            struct.unpack(size, struct.pack(fmt, int(b, 16)))[0] for b in feature["bits"]
        ]
    return list(feature["values"])
