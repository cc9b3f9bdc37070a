"""grist: fast ML training-record readers for Python.

Reads TFRecord (tf.Example / SequenceExample), Avro, FFRecord and OFRecord
files (local, or in object stores: ``s3://``, ``gs://``, ``az://``,
``http(s)://``) into batches of numpy arrays or Arrow record batches, with
the decoding in Rust and the GIL released while it runs; writes and
converts between the four formats.

The batch layout (``output="numpy"``), one dict entry per feature in spec
order:

* dense numeric: an ``np.ndarray`` of shape ``[batch, *shape]``, zero-copy
  (the array owns the decoded buffer);
* dense string: an ``np.ndarray`` of dtype object holding ``bytes``;
* varlen and sparse: ``(indices int64 [nnz, rank], values [nnz],
  dense_shape int64 [rank])``, TensorFlow's SparseTensor parts;
* ragged: ``(values, row_splits)``; ``row_splits`` an int64 array for one
  ragged dimension, a list of them (outermost first) otherwise.

``tf.SequenceExample`` columns are keyed ``context/x``,
``feature_lists/x`` and ``feature_list_lengths/x``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator, Optional, Sequence, Union

from . import _grist
from ._grist import DataError, GristError, SpecError, StorageError

__version__ = _grist.__version__

__all__ = [
    "Loader",
    "read_batches",
    "infer_spec",
    "count",
    "release_maps",
    "convert",
    "RecordReader",
    "Writer",
    "list_files",
    "part_name",
    "write_spec",
    "GristError",
    "SpecError",
    "DataError",
    "StorageError",
]

PathsLike = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def _paths(paths: Any) -> list[str]:
    """``paths`` (one path or URL, or a sequence of them) as a list of str."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out = [os.fsdecode(p) if isinstance(p, bytes) else os.fspath(p) for p in paths]
    if not out:
        raise SpecError("no paths given")
    return out


def _spec(spec: Any) -> tuple[Optional[str], Optional[str]]:
    """``spec`` as (JSON text, path): None, a path, JSON text, or parsed JSON."""
    if spec is None:
        return None, None
    if isinstance(spec, os.PathLike):
        return None, os.fspath(spec)
    if isinstance(spec, str):
        text = spec.lstrip()
        if text.startswith("[") or text.startswith("{"):
            return spec, None
        return None, spec
    if isinstance(spec, (list, dict)):
        return json.dumps(spec), None
    raise SpecError(
        f"spec: None, a path, JSON text, or a list/dict of features; got {type(spec).__name__}"
    )


def _json_arg(value: Any, name: str) -> Optional[str]:
    """A JSON argument (an Avro schema): a dict/list, JSON text, or a file path."""
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, os.PathLike) or (
        isinstance(value, str) and not value.lstrip().startswith(("{", "[", '"'))
    ):
        with open(os.fspath(value), encoding="utf-8") as f:
            return f.read()
    if isinstance(value, str):
        return value
    raise SpecError(f"{name}: a dict, JSON text or a file path; got {type(value).__name__}")


def _arrow(batch: Any) -> Any:
    import pyarrow

    return pyarrow.record_batch(batch)


def _spec_json(self) -> Any:
    """The resolved spec of a loader or reader, parsed once from its JSON."""
    if self._spec is None:
        self._spec = json.loads(self._inner.spec_json)
    return self._spec


class Loader:
    """Iterates the batches of a dataset.

    Args:
        paths: a file, folder, glob or object-store URL, or a list of them.
        spec: None (inferred: Avro from the writer schema, the others by
            sampling records), the path of a spec JSON file, JSON text, or
            the parsed JSON (a list of feature dicts or the spec-file object).
        format: "tfrecord", "avro", "ffrecord" or "ofrecord"; None tells by
            name, then content.
        batch_size: records per batch.
        shuffle, seed, shuffle_buffer: shuffling (exact for files read by
            record number, through a buffer of ``shuffle_buffer`` records
            otherwise).
        threads: decoding threads; None tunes them per batch.
        shard: ``(rank, world)``: read this rank's share only.
        shard_mode: "auto", "files" or "records".
        epochs: passes over the data; None: endless.
        drop_remainder: leave out the last, partial batch.
        reader_schema: an Avro reader schema (dict, JSON text or ``.avsc`` path);
            without ``spec``, the spec is inferred from it.
        random_access: "auto", "off" or "required" (read records by number).
        output: "numpy" (dicts of arrays) or "arrow" (``pyarrow.RecordBatch``).
        equal_batches: with ``shard``, every rank yields the same number of
            batches (DDP ranks must not wait at an all-reduce for a rank
            that has finished).
        start_epoch: the first epoch read (its file and shuffle order, as
            the loader's own epoch of that number; ``epoch`` starts there
            and ``epochs`` counts from it).
        payload: FFRecord only: what the samples hold, "example" (serialized
            tf.Example, the default), "ofrecord", or "raw" (the bytes of one
            dense tensor; a string feature of shape [] gets each sample's bytes).
        decode_ahead: decode the next batch on a thread of its own while
            Python works on this one. For loops that wait per batch (a GPU
            step, I/O): the batch is ready when they come back. A loop that
            only computes gains nothing with two cores and pays for the
            batches handed between threads; off by default.
        mmap: memory-map local files instead of reading them (no copy out
            of the page cache: the reading thread leaves the cores to the
            decoding ones). Only for files that nothing modifies or
            truncates while the loader or any batch from it is alive: a
            file that shrinks under its map kills the process (SIGBUS), as
            with ``numpy.memmap``. Compressed TFRecord files and object
            stores are read as without it. The maps stay with the process
            after the loader ends, for the next loader over the same files
            (the next epoch), until :func:`release_maps`. Off by default.

    The GIL is released while batches are read and decoded.
    """

    def __init__(
        self,
        paths: PathsLike,
        spec: Any = None,
        *,
        format: Optional[str] = None,
        batch_size: int = 1024,
        shuffle: bool = False,
        seed: int = 0,
        shuffle_buffer: Optional[int] = None,
        threads: Optional[int] = None,
        shard: Optional[tuple[int, int]] = None,
        shard_mode: str = "auto",
        epochs: Optional[int] = 1,
        drop_remainder: bool = False,
        reader_schema: Any = None,
        random_access: str = "auto",
        output: str = "numpy",
        payload: Optional[str] = None,
        equal_batches: bool = False,
        start_epoch: int = 0,
        decode_ahead: bool = False,
        mmap: bool = False,
    ) -> None:
        spec_json, spec_path = _spec(spec)
        if shard is not None:
            shard = (int(shard[0]), int(shard[1]))
        start_epoch = int(start_epoch)
        if start_epoch < 0:
            raise SpecError(f"start_epoch {start_epoch}: must be at least 0")
        if epochs is not None and start_epoch:
            # The loader counts epochs from 0: it reads epochs
            # start_epoch .. start_epoch + epochs - 1.
            epochs = int(epochs) + start_epoch
        self._output = output
        self._inner = _grist._Loader(
            _paths(paths),
            spec_json,
            spec_path,
            format,
            None if batch_size is None else int(batch_size),
            bool(shuffle),
            int(seed),
            None if shuffle_buffer is None else int(shuffle_buffer),
            None if threads is None else int(threads),
            shard,
            shard_mode,
            None if epochs is None else int(epochs),
            bool(drop_remainder),
            _json_arg(reader_schema, "reader_schema"),
            random_access,
            output,
            payload,
            bool(equal_batches),
            bool(decode_ahead),
            bool(mmap),
        )
        self._spec: Optional[Any] = None
        if start_epoch:
            # A fresh state at that epoch: its order, as the Rust loader's
            # own epoch `start_epoch` would be.
            state = self.state_dict()
            state["epoch"] = start_epoch
            self.load_state_dict(state)

    def __iter__(self) -> "Loader":
        return self

    def __next__(self) -> Any:
        batch = self._inner.next_batch()
        if batch is None:
            raise StopIteration
        if self._output == "arrow":
            return _arrow(batch)
        return batch

    def state_dict(self) -> dict:
        """Where the loader is: a small JSON-serializable dict. A loader built
        with the same arguments and given it by ``load_state_dict`` yields
        exactly the batches this one would have yielded next."""
        return json.loads(self._inner.state_json())

    def load_state_dict(self, state: dict) -> None:
        """Resumes from a ``state_dict()``; refused (SpecError) when it was
        saved by a loader built with other arguments."""
        self._inner.restore_json(json.dumps(state))

    @property
    def format(self) -> str:
        """The format's name: "TFRecord", "Avro", "FFRecord" or "OFRecord"."""
        return self._inner.format

    spec = property(
        _spec_json, doc="The resolved spec, in its JSON form (as a spec file holds it)."
    )

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to (from 0)."""
        return self._inner.epoch

    @property
    def batch_size(self) -> int:
        """Records per batch."""
        return self._inner.batch_size

    @property
    def random_access(self) -> bool:
        """Whether records are read by number (rather than as a stream)."""
        return self._inner.random_access

    def stats(self) -> dict:
        """What the loader measured: records, batches, bytes, elapsed_s,
        records_per_s, bytes_per_s, decode_s, read_s, io_wait_s,
        mean_threads, ..."""
        return self._inner.stats()

    def close(self) -> None:
        """Stops the loader's threads; iterating afterwards raises SpecError."""
        self._inner.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_batches(
    paths: PathsLike,
    spec: Any = None,
    *,
    batch_size: int = 1024,
    output: str = "numpy",
    **loader_kwargs: Any,
) -> Iterator[Any]:
    """The batches of one pass over ``paths`` in order (a ``Loader`` with
    ``epochs=1`` and no shuffle unless ``loader_kwargs`` say otherwise)."""
    loader_kwargs.setdefault("epochs", 1)
    loader = Loader(paths, spec, batch_size=batch_size, output=output, **loader_kwargs)
    with loader:
        yield from loader


def infer_spec(
    paths: PathsLike,
    *,
    records: int = 100,
    format: Optional[str] = None,
    reader_schema: Any = None,
) -> Any:
    """The spec of ``paths`` as grist infers it (Avro: the writer schema;
    the others: sampling the first ``records`` records), in the JSON form a
    spec file holds (and ``spec=`` takes).

    ``reader_schema`` (Avro: a dict, JSON text or ``.avsc`` path): infer
    the spec of the files read through it (schema evolution): the
    features are the reader's fields, every file's writer schema must
    resolve against it, and the spec carries it as ``"reader_schema"``."""
    return json.loads(
        _grist.infer_spec_json(
            _paths(paths), int(records), format, _json_arg(reader_schema, "reader_schema")
        )
    )


def count(paths: PathsLike, *, format: Optional[str] = None) -> int:
    """The number of records of ``paths`` (every check of the format made)."""
    return _grist.count(_paths(paths), format)


def release_maps() -> int:
    """Unmaps the files that ``Loader(mmap=True)`` keeps mapped.

    Loaders with ``mmap=True`` share the process's maps of the last 256
    files, so that the next loader over the same files (the next epoch)
    neither maps nor faults them in again; a file whose size, modification
    time or inode changed is mapped afresh. Call this to give the maps
    back (each is unmapped once no batch from it is alive), for example
    before deleting the files. Returns how many maps were kept.
    """
    return _grist.release_maps()


def convert(
    inputs: PathsLike,
    output: Union[str, "os.PathLike[str]"],
    to: str,
    spec: Any = None,
    *,
    compression: Optional[str] = None,
    codec: Optional[str] = None,
    records_per_file: Optional[int] = None,
    files: Optional[int] = None,
    threads: Optional[int] = None,
    shard: Optional[tuple[int, int]] = None,
    lossy: bool = False,
    force: bool = False,
    verify: bool = False,
    reader_schema: Any = None,
) -> dict:
    """Converts ``inputs`` into ``part-00000.<ext>``, ... files of format
    ``to`` in the folder (or object-store prefix) ``output``, with
    ``spec.json`` and ``manifest.json`` beside them.

    Records keep their order. Without ``spec`` it is inferred. What the
    target cannot hold is refused before any output exists (``lossy=True``
    allows narrowing, e.g. float64 to tf.Example's float32). A rerun with
    the same arguments resumes; ``force`` replaces another conversion's
    outputs; ``shard=(index, count)`` converts one share (merge with the
    CLI's ``grist merge``); ``verify`` reads every output back with every
    check of the format. ``reader_schema`` (Avro sources: a dict, JSON
    text or ``.avsc`` path) reads the sources through it, replacing the
    spec's; without ``spec``, the spec is inferred from it.

    Returns the report: records, bytes, files ([{path, records, bytes}]),
    skipped_parts, skipped_records, encoded_records, up_to_date, spec,
    spec_path, manifest_path, notes.
    """
    spec_json, spec_path = _spec(spec)
    args = {
        "compression": compression,
        "codec": codec,
        "records_per_file": None if records_per_file is None else int(records_per_file),
        "files": None if files is None else int(files),
        "threads": None if threads is None else int(threads),
        "shard": None if shard is None else (int(shard[0]), int(shard[1])),
        "lossy": bool(lossy),
        "force": bool(force),
        "verify": bool(verify),
        "reader_schema": _json_arg(reader_schema, "reader_schema"),
    }
    report = _grist.convert(_paths(inputs), os.fspath(output), to, spec_json, spec_path, args)
    return json.loads(report)


class RecordReader:
    """Map-style access to a dataset's records by number, for the formats
    read by record number: FFRecord, TFRecord with index files (DALI's
    ``.idx``, written by ``grist index``), OFRecord.

    Records are numbered across the files in dataset order. ``read`` takes
    any sequence of record numbers (an ``np.ndarray`` too) and returns one
    batch, rows in the order given, from one coalesced read (neighbouring
    records are fetched together). The GIL is released while it reads and
    decodes.

    Args:
        paths: files, folders, globs or object-store URLs.
        spec: as for ``Loader``.
        format: as for ``Loader``.
        output: "numpy" or "arrow".
        payload: as for ``Loader`` (FFRecord).
    """

    def __init__(
        self,
        paths: PathsLike,
        spec: Any = None,
        *,
        format: Optional[str] = None,
        output: str = "numpy",
        payload: Optional[str] = None,
    ) -> None:
        spec_json, spec_path = _spec(spec)
        self._output = output
        self._inner = _grist._RecordReader(
            _paths(paths), spec_json, spec_path, format, output, payload
        )
        self._len = len(self._inner)
        self._spec: Optional[Any] = None

    def __len__(self) -> int:
        return self._len

    @property
    def counts(self) -> list[int]:
        """Records per file."""
        return self._inner.counts

    @property
    def files(self) -> list[str]:
        """The files, in dataset order."""
        return self._inner.files

    @property
    def format(self) -> str:
        """The format's name."""
        return self._inner.format

    spec = property(_spec_json, doc="The resolved spec, in its JSON form.")

    def read(self, indices: Any) -> Any:
        """Records ``indices`` (negative numbers count from the end) as one
        batch; IndexError for a number out of range."""
        n = self._len
        wanted = []
        for i in (indices.tolist() if hasattr(indices, "tolist") else indices):
            i = int(i)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"record {i} out of range: the dataset has {n} records")
            wanted.append(i)
        batch = self._inner.read(wanted)
        if self._output == "arrow":
            return _arrow(batch)
        return batch


class Writer:
    """Writes one file of a grist format, atomically: nothing appears under
    its name until ``close()``; leaving a ``with`` block by an exception
    (or ``abort()``) leaves nothing.

    ``write`` takes a batch in the loader's numpy layout (a dict of arrays;
    sparse/varlen as ``(indices, values, dense_shape)``, ragged as
    ``(values, row_splits)``), or any Arrow data exposing
    ``__arrow_c_stream__`` / ``__arrow_c_array__`` (pyarrow RecordBatch,
    Table, RecordBatchReader, polars DataFrame). Without ``spec``, the
    spec comes from the first batch: dense features from numpy arrays
    (dtype, shape past the batch dimension), or the Arrow schema (its
    ``grist.*`` metadata when it came from grist).

    Args:
        path: the file's path or object-store URL.
        format: "tfrecord", "avro", "ffrecord" or "ofrecord".
        spec: as for ``Loader``.
        compression: TFRecord's "GZIP"/"ZLIB", ...
        codec: Avro's "deflate", "snappy", "zstandard", ...
        lossy: allow narrowing what the format cannot hold exactly.
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        format: str,
        spec: Any = None,
        *,
        compression: Optional[str] = None,
        codec: Optional[str] = None,
        lossy: bool = False,
    ) -> None:
        spec_json, spec_path = _spec(spec)
        self._inner = _grist._Writer(
            os.fspath(path), format, spec_json, spec_path, compression, codec, bool(lossy)
        )
        self._report: Optional[dict] = None

    def write(self, batch: Any) -> None:
        """Appends the rows of ``batch``."""
        if isinstance(batch, dict):
            self._inner.write_numpy(batch)
        else:
            self._inner.write_arrow(batch)

    @property
    def records(self) -> int:
        """Records written so far."""
        return self._inner.records

    @property
    def spec(self) -> Optional[Any]:
        """The spec (JSON form) that reads the file back: known once given,
        or after the first batch when taken from it; else None."""
        text = self._inner.spec_json
        return None if text is None else json.loads(text)

    def close(self) -> dict:
        """Commits the file; returns ``{"records", "path", "spec"}`` (the
        spec that reads the file back). Closing twice returns the report
        again."""
        if self._report is None:
            records, spec = self._inner.close()
            self._report = {"records": records, "path": self._inner.path, "spec": json.loads(spec)}
        return self._report

    def abort(self) -> None:
        """Drops the file being written."""
        self._inner.abort()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def list_files(
    paths: PathsLike, *, format: Optional[str] = None, payload: Optional[str] = None
) -> list[tuple[str, int]]:
    """The files ``paths`` stand for, as the loader reads them (folders
    listed by the format's rules, globs and object-store prefixes
    expanded), in dataset order, each with its size in bytes."""
    return [(p, n) for p, n in _grist.list_files(_paths(paths), format, payload)]


def part_name(
    format: str, part: int, *, compression: Optional[str] = None, codec: Optional[str] = None
) -> str:
    """The name ``convert`` gives output part ``part`` of ``format``
    (``part-00003.tfrecord.gz``, ...)."""
    return _grist.part_name(format, int(part), compression, codec)


def write_spec(
    folder: Union[str, "os.PathLike[str]"],
    format: str,
    spec: Any,
    *,
    compression: Optional[str] = None,
    codec: Optional[str] = None,
    lossy: bool = False,
) -> Any:
    """Writes ``spec`` in ``format``'s own form as ``folder/spec.json`` (what
    ``convert`` writes beside its parts, so that the folder reads back
    without ``spec=``); returns it (JSON form)."""
    spec_json, spec_path = _spec(spec)
    if spec_json is None:
        if spec_path is None:
            raise SpecError("write_spec: a spec is needed")
        with open(spec_path, encoding="utf-8") as f:
            spec_json = f.read()
    text = _grist.write_spec(os.fspath(folder), format, spec_json, compression, codec, bool(lossy))
    return json.loads(text)
