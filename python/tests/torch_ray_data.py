"""Datasets for test_torch.py and test_ray.py, written with grist.Writer.

Every record has a unique ``id``; the expected values of a test are the
arrays written here (drawn from a seeded generator), never typed by hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

import grist

FORMATS = ("tfrecord", "avro", "ffrecord", "ofrecord")
# Formats read by record number (map-style Dataset, record-range splits).
RANDOM_ACCESS = ("ffrecord", "ofrecord")

SPEC = [
    {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
    {"name": "x", "kind": "dense", "dtype": "float32", "shape": [2]},
    {"name": "tok", "kind": "varlen", "dtype": "int64"},
]


@dataclass
class Written:
    """What was written: the files in dataset order and every record's
    values, by row in file order."""

    format: str
    files: List[str]
    # The spec that reads the files back (Writer.close()'s report).
    spec: object
    ids: np.ndarray
    x: np.ndarray
    tok: List[np.ndarray]

    def row_of(self) -> Dict[int, int]:
        return {int(i): r for r, i in enumerate(self.ids)}


def varlen_tuple(rows: List[np.ndarray]):
    """The batch form of a varlen feature: (indices [nnz, 2], values,
    dense_shape [2])."""
    lengths = [len(r) for r in rows]
    indices = np.array(
        [(b, j) for b, n in enumerate(lengths) for j in range(n)], dtype=np.int64
    ).reshape(-1, 2)
    values = (
        np.concatenate(rows).astype(np.int64) if rows and sum(lengths) else np.zeros(0, np.int64)
    )
    shape = np.array([len(rows), max(lengths, default=0)], dtype=np.int64)
    return indices, values, shape


def varlen_rows(value, batch_rows: int) -> List[np.ndarray]:
    """The rows of a varlen feature's (indices, values, dense_shape) tuple,
    numpy or torch."""
    indices, values, _ = (np.asarray(v) for v in value)
    return [values[indices[:, 0] == b] for b in range(batch_rows)]


def part_file(folder: str, fmt: str, part: int) -> str:
    ext = {"tfrecord": ".tfrecord", "avro": ".avro", "ffrecord": ".ffr", "ofrecord": ""}[fmt]
    return os.path.join(folder, f"part-{part:05d}{ext}")


def write_dataset(folder: str, fmt: str, sizes=(37, 50, 41), seed: int = 7) -> Written:
    """Writes len(sizes) files of `fmt` into `folder` with grist.Writer."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    total = int(sum(sizes))
    ids = rng.permutation(total).astype(np.int64) + 1000
    x = rng.standard_normal((total, 2)).astype(np.float32)
    tok = [rng.integers(0, 1 << 40, size=int(n)) for n in rng.integers(0, 5, size=total)]
    files = []
    spec = None
    start = 0
    for part, n in enumerate(sizes):
        path = part_file(folder, fmt, part)
        sl = slice(start, start + n)
        w = grist.Writer(path, fmt, SPEC)
        w.write({"id": ids[sl], "x": x[sl], "tok": varlen_tuple(tok[sl])})
        spec = w.close()["spec"]
        files.append(path)
        start += n
    return Written(fmt, files, spec, ids, x, tok)


def check_rows(written: Written, ids, x, tok_rows) -> None:
    """Asserts that each row read (id, x, tok) holds what was written under
    that id."""
    row_of = written.row_of()
    for i, xi, ti in zip(np.asarray(ids), np.asarray(x), tok_rows):
        r = row_of[int(i)]
        np.testing.assert_array_equal(xi, written.x[r], err_msg=f"x of id {int(i)}")
        np.testing.assert_array_equal(ti, written.tok[r], err_msg=f"tok of id {int(i)}")
