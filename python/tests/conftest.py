"""pytest configuration for grist's Python tests.

`cargo test -p grist-python` (crates/python/tests/pytest.rs) runs these
tests in target/python-venv with the extension built by maturin, and
passes, through the environment:

* GRIST_CORPUS: the shared golden corpus (default: ../shared/corpus
  beside the repository).
* GRIST_TEST_S3_URL: ``s3://<bucket>/`` under which the corpus is served
  by grist-testkit's in-process S3 server (its files at the same relative
  paths), and GRIST_TEST_S3_SCRATCH: a writable bucket of the same
  server; together with AWS_ENDPOINT, AWS_ACCESS_KEY_ID,
  AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ALLOW_HTTP, which grist's
  storage reads. Without them the object-store tests skip (pytest lists
  the skips and their reason).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def s3_url() -> str:
    url = os.environ.get("GRIST_TEST_S3_URL")
    if not url:
        pytest.skip("GRIST_TEST_S3_URL is not set: no S3 server (run through cargo test)")
    return url.rstrip("/")


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """`datasets.make`'s dataset in each format (300 records, parts of
    70), made once and only read by the tests."""
    from datasets import FORMATS, make

    base = tmp_path_factory.mktemp("data")
    return {fmt: make(base, fmt) for fmt in FORMATS}
