"""Ray Data over grist: a Datasource and a Datasink for the four formats.

::

    import ray, grist.ray
    ds = ray.data.read_datasource(grist.ray.Datasource("s3://bucket/train/"))
    ds.write_datasink(grist.ray.Datasink("/data/train-avro", "avro"))

:class:`Datasource` makes one read task per group of files, and, for
formats read by record number (FFRecord, indexed TFRecord, OFRecord)
when there are fewer files than the requested parallelism, one per
contiguous range of records. Each task runs a :class:`grist.Loader`
(``output="arrow"``) and yields its batches as ``pyarrow.Table`` blocks;
the grist spec travels in the Arrow field metadata.

:class:`Datasink` writes each write task's blocks to one file with
:class:`grist.Writer`, named after the task's index as ``grist convert``
names its parts (``part-00000.tfrecord``, ...). A file appears under its
name only once complete; a task that fails leaves nothing under its name.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasink as _RayDatasink
from ray.data.datasource import Datasource as _RayDatasource
from ray.data.datasource import ReadTask

import grist

try:
    from ray.data._internal.arrow_block import (
        _BATCH_SIZE_PRESERVING_STUB_COL_NAME as _ROW_COUNT_STUB,
    )
except ImportError:  # its value in Ray 2.60
    _ROW_COUNT_STUB = "__bsp_stub"

__all__ = ["Datasource", "Datasink", "balanced_range"]

_SPLITS = ("auto", "files", "records")


def balanced_range(n: int, parts: int, i: int) -> Tuple[int, int]:
    """Part `i` of `n` items split into `parts` contiguous ranges, the
    first ``n % parts`` one longer: the grist loader's record shards."""
    base, extra = divmod(n, parts)
    start = i * base + min(i, extra)
    return start, start + base + (1 if i < extra else 0)


def _is_url(p: str) -> bool:
    return "://" in p


def _as_list(paths) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _read_task(
    paths: List[str], spec, format: str, shard, loader_kwargs: Dict[str, Any], columns=None
):
    """One read task: the Loader's Arrow batches as tables (with only
    `columns` when given: a projection of no column reads the first
    feature for the row counts)."""
    import pyarrow as pa

    kwargs = dict(loader_kwargs)
    if shard is not None:
        kwargs["shard"] = shard
        kwargs["shard_mode"] = "records"
        # Each task reads its range by number, not the framing of all.
        kwargs.setdefault("random_access", "required")
    loader = grist.Loader(paths, spec, format=format, output="arrow", epochs=1, **kwargs)
    try:
        for rb in loader:
            table = pa.Table.from_batches([rb])
            if columns is not None:
                table = table.select(columns)
                if not columns:
                    # A table of no column has no rows once Ray concatenates
                    # it: Ray's own column of nulls keeps the count (as its
                    # Parquet reader does).
                    table = table.append_column(_ROW_COUNT_STUB, pa.nulls(rb.num_rows))
            yield table
    finally:
        loader.close()


class Datasource(_RayDatasource):
    """Reads files of any grist format into a Ray Dataset.

    ``paths``, ``spec`` and ``format`` as for :class:`grist.Loader`. The
    files are listed, the format detected and the spec resolved once, on
    the driver (a spec inferred by sampling is then the same for every
    task).

    ``split``: ``"files"`` (each task reads whole files, contiguous groups
    in dataset order), ``"records"`` (each task reads a contiguous range of
    records; formats read by number only), or ``"auto"`` (by record range
    when the format is read by number and there are fewer files than the
    requested parallelism, else by file). Record ranges are not made
    smaller than ``min_records_per_task``.

    Other keyword arguments go to each task's :class:`grist.Loader`
    (``batch_size``, ``threads``, ``reader_schema``, ...); ``shuffle``,
    ``shard``, ``epochs`` and the like are not taken (Ray shuffles, splits
    and repeats datasets itself).
    """

    def __init__(
        self,
        paths,
        spec=None,
        *,
        format: Optional[str] = None,
        batch_size: int = 4096,
        split: str = "auto",
        min_records_per_task: int = 1024,
        **loader_kwargs,
    ):
        super().__init__()
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {_SPLITS}, not {split!r}")
        refused = ("shuffle", "shard", "shard_mode", "epochs", "start_epoch", "equal_batches")
        for key in refused + ("output",):
            if key in loader_kwargs:
                raise TypeError(f"grist.ray.Datasource does not take {key!r}")
        payload = loader_kwargs.get("payload")
        self._files = grist.list_files(_as_list(paths), format=format, payload=payload)
        if not self._files:
            raise ValueError(f"{paths!r}: no data files")
        names = [f for f, _ in self._files]
        # Format and spec are decided here so that every task agrees.
        probe = grist.Loader(names, spec, format=format, output="arrow", **loader_kwargs)
        try:
            self._format = probe.format
            self._spec = probe.spec
            random_access = probe.random_access
        finally:
            probe.close()
        # Record counts without reading the records, where the format can
        # read by number (FFRecord, OFRecord, TFRecord with .idx files;
        # OFRecord streams by default, yet reads by number when asked).
        self._counts: Optional[List[int]] = None
        try:
            extra = {"payload": payload} if payload is not None else {}
            reader = grist.RecordReader(names, self._spec, format=self._format, **extra)
            self._counts = [int(c) for c in reader.counts]
        except grist.GristError:
            if random_access:
                raise
        if split == "records" and self._counts is None:
            raise ValueError(
                f"split='records' needs a format read by record number; {self._format} "
                f"files {names[0]!r}... are read as a stream"
            )
        self._split = split
        self._batch_size = batch_size
        self._min_records = max(1, int(min_records_per_task))
        self._loader_kwargs = loader_kwargs
        # Ray's projection pushdown (select_columns and the like) sets it.
        self._projection_map = None

    @property
    def format(self) -> str:
        """The format read."""
        return self._format

    @property
    def spec(self) -> list:
        """The spec every task reads with."""
        return self._spec

    @property
    def files(self) -> List[Tuple[str, int]]:
        """The files read, with their sizes in bytes."""
        return list(self._files)

    def get_name(self) -> str:
        return "Grist"

    def supports_projection_pushdown(self) -> bool:
        # Features not selected are not decoded at all.
        return True

    def _task_spec(self):
        """The spec the tasks read with, and the columns to keep (None:
        all), after Ray's projection."""
        if self._projection_map is None:
            return self._spec, None
        wanted = list(self._projection_map)
        features = self._spec["features"] if isinstance(self._spec, dict) else self._spec
        kept = [f for f in features if f["name"] in self._projection_map]
        missing = set(wanted) - {f["name"] for f in kept}
        if missing:
            raise ValueError(f"columns {sorted(missing)} are not features of the spec")
        if not kept:
            kept = features[:1]
        if isinstance(self._spec, dict):
            spec = dict(self._spec, features=kept)
        else:
            spec = kept
        return spec, [f["name"] for f in features if f["name"] in self._projection_map]

    def estimate_inmemory_data_size(self) -> Optional[int]:
        # File bytes: decoded columns are about as large for the formats
        # grist reads (compressed files expand further).
        return sum(n for _, n in self._files)

    def _by_records(self, parallelism: int) -> bool:
        if self._split == "records":
            return True
        return (
            self._split == "auto"
            and self._counts is not None
            and len(self._files) < parallelism
        )

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: Optional[int] = None,
        data_context=None,
    ) -> List[ReadTask]:
        parallelism = max(1, int(parallelism))
        kwargs = dict(self._loader_kwargs, batch_size=self._batch_size)
        spec, columns = self._task_spec()
        names = [f for f, _ in self._files]
        total_bytes = sum(n for _, n in self._files)
        tasks = []
        if self._by_records(parallelism):
            total = sum(self._counts)
            n = max(1, min(parallelism, total // self._min_records))
            for i in range(n):
                lo, hi = balanced_range(total, n, i)
                meta = BlockMetadata(
                    num_rows=hi - lo,
                    size_bytes=int(total_bytes * (hi - lo) / total) if total else 0,
                    input_files=names,
                    exec_stats=None,
                )
                fn = functools.partial(
                    _read_task, names, spec, self._format, (i, n), kwargs, columns
                )
                tasks.append(ReadTask(fn, meta, per_task_row_limit=per_task_row_limit))
            return tasks
        n = min(parallelism, len(self._files))
        for i in range(n):
            lo, hi = balanced_range(len(self._files), n, i)
            group = self._files[lo:hi]
            rows = sum(self._counts[lo:hi]) if self._counts is not None else None
            meta = BlockMetadata(
                num_rows=rows,
                size_bytes=sum(s for _, s in group),
                input_files=[f for f, _ in group],
                exec_stats=None,
            )
            fn = functools.partial(
                _read_task, [f for f, _ in group], spec, self._format, None, kwargs, columns
            )
            tasks.append(ReadTask(fn, meta, per_task_row_limit=per_task_row_limit))
        return tasks


def _join(folder: str, name: str) -> str:
    if _is_url(folder):
        return folder.rstrip("/") + "/" + name
    return os.path.join(folder, name)


class Datasink(_RayDatasink):
    """Writes a Ray Dataset to files of `format` with :class:`grist.Writer`.

    Each write task writes its blocks to ``path/part-NNNNN.<ext>``, NNNNN
    being the task's index (``grist convert``'s part names); a task with
    no rows writes no file. Files are atomic: nothing is under a part's
    name until it is complete, and a failed task leaves nothing. When the
    write completes, ``spec.json`` (the spec the files read back with) is
    written beside the parts.

    ``spec`` describes the columns (as for :class:`grist.Writer`); by
    default it comes from the blocks' Arrow schema (grist's own metadata
    when the data was read by grist). ``compression`` (TFRecord), ``codec``
    (Avro) and ``lossy`` as for :class:`grist.Writer`. A local ``path``
    that already holds data files is refused unless ``overwrite=True``,
    which deletes them first. ``min_rows_per_file`` asks Ray to give each
    write task at least that many rows.
    """

    def __init__(
        self,
        path,
        format: str,
        spec=None,
        *,
        compression: Optional[str] = None,
        codec: Optional[str] = None,
        lossy: bool = False,
        overwrite: bool = False,
        min_rows_per_file: Optional[int] = None,
    ):
        self.path = os.fspath(path)
        self.format = format
        self.spec = spec
        self.compression = compression
        self.codec = codec
        self.lossy = lossy
        self.overwrite = overwrite
        self._min_rows = min_rows_per_file
        # Fails now, not in a task, for an unknown format or compression.
        grist.part_name(format, 0, compression=compression, codec=codec)

    def get_name(self) -> str:
        return "Grist"

    @property
    def min_rows_per_write(self) -> Optional[int]:
        return self._min_rows

    def on_write_start(self, schema=None) -> None:
        if _is_url(self.path):
            return
        os.makedirs(self.path, exist_ok=True)
        existing = self._data_files()
        spec_file = os.path.join(self.path, "spec.json")
        if os.path.exists(spec_file):
            existing.append(spec_file)
        if existing and not self.overwrite:
            raise FileExistsError(
                f"{self.path}: already holds {os.path.basename(existing[0])}"
                f"{' and more' if len(existing) > 1 else ''} (pass overwrite=True to replace)"
            )
        for f in existing:
            os.remove(f)

    def write(self, blocks: Iterable[Any], ctx) -> Dict[str, Any]:
        target = _join(
            self.path,
            grist.part_name(
                self.format, ctx.task_idx, compression=self.compression, codec=self.codec
            ),
        )
        records = 0
        writer = None
        try:
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows == 0:
                    continue
                if writer is None:
                    writer = grist.Writer(
                        target,
                        self.format,
                        self.spec,
                        compression=self.compression,
                        codec=self.codec,
                        lossy=self.lossy,
                    )
                writer.write(table)
                records += table.num_rows
        except BaseException:
            if writer is not None:
                # Nothing is left under the part's name.
                writer.abort()
            raise
        if writer is None:
            return {"path": None, "records": 0, "spec": None}
        report = writer.close()
        return {"path": target, "records": records, "spec": report.get("spec")}

    def on_write_complete(self, write_result) -> None:
        # spec.json: the spec the parts read back with, as the writers
        # report it (the same for every part).
        specs = [r["spec"] for r in write_result.write_returns if r and r.get("spec")]
        if specs:
            grist.write_spec(
                self.path,
                self.format,
                specs[0],
                compression=self.compression,
                codec=self.codec,
                lossy=self.lossy,
            )

    def _data_files(self) -> List[str]:
        try:
            return [f for f, _ in grist.list_files([self.path], format=self.format)]
        except grist.SpecError:
            # A folder holding no data file of the format.
            return []

    @property
    def parts(self) -> Sequence[str]:
        """The data files under ``path``, in order."""
        return self._data_files()
