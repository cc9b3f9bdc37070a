"""Datasets of every format for the tests, converted with grist.convert
from a corpus file (the records of the corpus, repeated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import grist
from corpus import root

FORMATS = ("tfrecord", "avro", "ffrecord", "ofrecord")

#: A corpus file with a column of each dtype.
SOURCE = "avro/avro_atds_primitives.avro"


def source() -> str:
    return str(root() / SOURCE)


def make(base: Path, fmt: str, repeat: int = 30, per_file: int = 70) -> Path:
    """`SOURCE` read `repeat` times over, written as `fmt` parts of
    `per_file` records under `base/fmt`."""
    out = base / fmt
    grist.convert([source()] * repeat, out, fmt, records_per_file=per_file, lossy=True)
    return out


def spec_of(path: Path) -> Path:
    """The spec file `make` writes beside a dataset."""
    return path / "spec.json"


def rows(batches) -> list[tuple]:
    """The rows of numpy batches of scalar columns, as tuples (for
    comparing orders and sets of records)."""
    out = []
    for b in batches:
        cols = [b[k] for k in sorted(b)]
        n = len(cols[0])
        for i in range(n):
            out.append(tuple(_cell(c[i]) for c in cols))
    return out


def _cell(v):
    """A comparable cell: NaN (not equal to itself) as a marker."""
    v = v.item() if isinstance(v, np.generic) else v
    return "NaN" if isinstance(v, float) and v != v else v


def same_value(x, y) -> bool:
    """Equal arrays (dtype, shape, values; NaN equal to NaN), or equal
    tuples/lists of them."""
    if isinstance(x, (tuple, list)):
        return (
            type(x) is type(y)
            and len(x) == len(y)
            and all(same_value(a, b) for a, b in zip(x, y))
        )
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.kind == "f":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool((x == y).all())


def same_batches(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        list(x) == list(y) and all(same_value(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )
