"""grist.Loader over the golden corpus: the batches the reference readers
returned, for every TFRecord and Avro parse."""

from __future__ import annotations

import pytest

import grist
from corpus import assert_batch, parses

PARSES = list(parses("tfrecord")) + list(parses("avro"))


def _id(p):
    case, parse = p
    return f"{case.name}/{parse['id']}"


@pytest.mark.parametrize("case_parse", PARSES, ids=[_id(p) for p in PARSES])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_parse_matches_the_corpus(case_parse, threads):
    case, parse = case_parse
    what = _id(case_parse)
    want = parse.get("batches") or []
    got, error = [], None
    try:
        loader = grist.Loader(
            case.files, parse, batch_size=parse.get("batch_size") or 1, threads=threads
        )
        for batch in loader:
            got.append(batch)
    except grist.GristError as e:
        error = e
    if parse["outcome"] == "ok":
        assert error is None, f"{what}: {error}"
        assert len(got) == len(want), what
    else:
        assert error is not None, f"{what}: no error"
        before = (parse.get("error") or {}).get("batches_before_error")
        assert len(got) == (len(want) if before is None else before), f"{what}: {error}"
        loc = error.location
        if loc is not None and loc.get("file"):
            assert loc["file"] in case.files, f"{what}: {loc}"
            assert loc["file"] in str(error), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert_batch(g, w, f"{what} batch {i}")
