"""PyTorch datasets over grist's readers.

Two ways to feed a training loop:

- :class:`IterableDataset` streams batches from a :class:`grist.Loader`.
  Use it with ``DataLoader(ds, batch_size=None, num_workers=N)``: the
  loader batches, shuffles and parses in Rust, and the work is split
  between DataLoader workers and data-parallel ranks (shard
  ``(rank * num_workers + worker, world_size * num_workers)``). It keeps
  a ``state_dict`` that torchdata's ``StatefulDataLoader`` saves and
  restores, so a job resumes at exactly the next batch.
- :class:`Dataset` is map-style over a :class:`grist.RecordReader`, for
  formats read by record number (FFRecord, indexed TFRecord, OFRecord).
  torch's samplers (``RandomSampler``, ``DistributedSampler``,
  ``BatchSampler``) choose the indices; ``__getitems__`` reads a whole
  batch of them in one coalesced read. Pass ``collate_fn=grist.torch.collate``.

Batches are dicts in spec order. Dense numeric features become tensors
that share memory with the numpy arrays grist returns (``torch.from_numpy``,
no copy); strings stay numpy arrays of ``bytes``; varlen and sparse
features are ``(indices, values, dense_shape)`` tuples of tensors (or
``torch.sparse_coo_tensor`` with ``sparse="coo"``); ragged features are
``(values, row_splits)``.
"""

from __future__ import annotations

import os
import warnings
import weakref
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.utils.data as _tud

import grist

__all__ = ["IterableDataset", "Dataset", "collate", "to_torch", "rank_and_world"]

# grist's arrays may be read-only views of Rust buffers; torch warns on
# every such `from_numpy`. The tensors are for reading, as the arrays are,
# so the warning says nothing here (scoped to calls made from this module).
warnings.filterwarnings(
    "ignore",
    message="The given NumPy array is not writable",
    category=UserWarning,
    module=r"grist\.torch",
)

_SPARSE_FORMS = ("tuple", "coo")


def _check_sparse(sparse: str) -> None:
    if sparse not in _SPARSE_FORMS:
        raise ValueError(f"sparse must be one of {_SPARSE_FORMS}, not {sparse!r}")


def _tensor(a: Any) -> Any:
    """A tensor sharing memory with numeric array `a`; anything else as is
    (numpy arrays of bytes have no tensor form)."""
    if isinstance(a, np.ndarray) and a.dtype != object:
        return torch.from_numpy(a)
    return a


def _convert(name: str, value: Any, sparse: str) -> Any:
    if isinstance(value, np.ndarray):
        return _tensor(value)
    if isinstance(value, tuple) and len(value) == 3:
        indices, values, dense_shape = (_tensor(v) for v in value)
        if sparse == "coo" and isinstance(values, torch.Tensor):
            # grist's indices are in bounds by construction; checking them
            # again would cost a pass over the batch.
            return torch.sparse_coo_tensor(
                indices.t(),
                values,
                tuple(int(d) for d in dense_shape),
                check_invariants=False,
            )
        return (indices, values, dense_shape)
    if isinstance(value, tuple) and len(value) == 2:
        values, splits = value
        if isinstance(splits, list):
            splits = [_tensor(s) for s in splits]
        else:
            splits = _tensor(splits)
        return (_tensor(values), splits)
    raise TypeError(
        f"feature {name!r}: cannot convert {type(value).__name__} to torch "
        "(expected a numpy array or a sparse/ragged tuple)"
    )


def to_torch(batch: Dict[str, Any], *, sparse: str = "tuple") -> Dict[str, Any]:
    """Converts a numpy batch of grist (``output="numpy"``) to torch.

    Numeric arrays become tensors sharing their memory (no copy). With
    ``sparse="coo"``, ``(indices, values, dense_shape)`` tuples become
    ``torch.sparse_coo_tensor`` (which copies the indices).
    """
    _check_sparse(sparse)
    if not isinstance(batch, dict):
        raise TypeError(
            f"expected a dict batch (output='numpy'), got {type(batch).__name__}"
        )
    return {name: _convert(name, value, sparse) for name, value in batch.items()}


def collate(batch: Any) -> Dict[str, Any]:
    """``collate_fn`` for :class:`Dataset`: the batch ``__getitems__`` read
    (one dict of columns) converted to tensors without copying.

    A list of single samples (a DataLoader without ``batch_size``, or a
    dataset without ``__getitems__``) is refused: batch through the sampler.
    """
    if isinstance(batch, dict):
        return to_torch(batch)
    raise TypeError(
        "grist.torch.collate takes the dict of columns that Dataset.__getitems__ "
        f"returns, not {type(batch).__name__}; use DataLoader(ds, batch_size=B, "
        "collate_fn=grist.torch.collate)"
    )


def rank_and_world(
    rank: Optional[int] = None, world_size: Optional[int] = None
) -> Tuple[int, int]:
    """This process's data-parallel rank and the number of ranks.

    In order: the arguments, ``torch.distributed`` when it is initialized,
    the ``RANK`` / ``WORLD_SIZE`` environment variables (as torchrun sets
    them), else ``(0, 1)``.
    """
    if rank is not None or world_size is not None:
        if rank is None or world_size is None:
            raise ValueError("pass both rank and world_size, or neither")
        r, w = int(rank), int(world_size)
    else:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
        elif "RANK" in os.environ or "WORLD_SIZE" in os.environ:
            try:
                r = int(os.environ.get("RANK", "0"))
                w = int(os.environ.get("WORLD_SIZE", "1"))
            except ValueError as e:
                raise ValueError(
                    f"RANK={os.environ.get('RANK')!r} / WORLD_SIZE="
                    f"{os.environ.get('WORLD_SIZE')!r}: not integers"
                ) from e
        else:
            r, w = 0, 1
    if w < 1 or not 0 <= r < w:
        raise ValueError(f"rank {r} of world size {w}: need 0 <= rank < world_size")
    return r, w


class _Iterator:
    """One pass of an :class:`IterableDataset` in one process: a
    :class:`grist.Loader` built on the first batch, and its position."""

    def __init__(self, ds: "IterableDataset", shard: Tuple[int, int], threads, epoch: int):
        self._ds = ds
        self._shard = shard
        self._threads = threads
        self._epoch = epoch
        self._loader = None
        # A loader state to restore before the first batch.
        self._pending: Optional[dict] = None

    def __iter__(self) -> "_Iterator":
        return self

    def __next__(self) -> Dict[str, Any]:
        if self._loader is None:
            self._loader = self._ds._make_loader(self._shard, self._threads, self._epoch)
            if self._pending is not None:
                self._loader.load_state_dict(self._pending)
                self._pending = None
        batch = next(self._loader)
        return to_torch(batch, sparse=self._ds.sparse)

    def state_dict(self) -> Dict[str, Any]:
        """Where this pass is: restoring it (into the same shard) continues
        with exactly the next batch."""
        loader = self._loader.state_dict() if self._loader is not None else self._pending
        return {"epoch": self._epoch, "shard": list(self._shard), "loader": loader}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        shard = tuple(state["shard"])
        if shard != tuple(self._shard):
            raise ValueError(
                f"grist.torch state of shard {shard[0]} of {shard[1]} cannot resume "
                f"shard {self._shard[0]} of {self._shard[1]}: the number of ranks or "
                "DataLoader workers changed"
            )
        if self._loader is not None:
            self._loader.close()
            self._loader = None
        self._epoch = int(state["epoch"])
        self._pending = state["loader"]


class IterableDataset(_tud.IterableDataset):
    """Batches of a :class:`grist.Loader` as torch tensors.

    Use with ``DataLoader(ds, batch_size=None, num_workers=N)`` (the loader
    already batches). Each DataLoader worker of each rank reads shard
    ``(rank * N + worker, world_size * N)``; with the same seed the shards
    of an epoch hold every record exactly once. ``rank`` / ``world_size``
    default to ``torch.distributed`` when initialized, else the ``RANK`` /
    ``WORLD_SIZE`` environment variables, else one rank
    (:func:`rank_and_world`, resolved when the dataset is created).

    ``set_epoch(e)`` before each epoch gives epoch ``e``'s shuffle order on
    every rank, as ``DistributedSampler.set_epoch`` does. ``state_dict()``
    / ``load_state_dict()`` save and restore the position; torchdata's
    ``StatefulDataLoader`` calls them in each worker.

    ``threads`` (parse threads per loader) defaults, inside a DataLoader
    worker, to the CPU count divided by the number of workers (at least 1),
    so that the workers do not oversubscribe the cores; in the main
    process to grist's autotune. Other keyword arguments go to
    :class:`grist.Loader` (``format``, ``shuffle_buffer``, ``shard_mode``,
    ``drop_remainder``, ``reader_schema``, ...).
    """

    def __init__(
        self,
        paths,
        spec=None,
        *,
        batch_size: int = 1024,
        shuffle: bool = False,
        seed: int = 0,
        epochs: Optional[int] = 1,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        threads: Optional[int] = None,
        sparse: str = "tuple",
        **loader_kwargs,
    ):
        super().__init__()
        for key in ("shard", "output", "start_epoch"):
            if key in loader_kwargs:
                raise TypeError(
                    f"IterableDataset sets the loader's {key!r} itself "
                    "(shards from rank/world_size and DataLoader workers, the epoch "
                    "from set_epoch, numpy output)"
                )
        _check_sparse(sparse)
        self.paths = paths
        self.spec = spec
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epochs = epochs
        self.threads = threads
        self.sparse = sparse
        self.loader_kwargs = loader_kwargs
        self.rank, self.world_size = rank_and_world(rank, world_size)
        self.epoch = 0
        # The state load_state_dict was given, for the next __iter__.
        self._resume: Optional[dict] = None
        # The pass in progress in this process (for state_dict without a
        # StatefulDataLoader, num_workers=0). A weak reference: the iterator
        # refers to the dataset, and a cycle would leave its loader to the
        # cyclic GC, which may run in a forked DataLoader worker.
        self._live: Optional[weakref.ref] = None

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next ``iter()`` reads (its shuffle order)."""
        self.epoch = int(epoch)

    def shard(self) -> Tuple[Tuple[int, int], int]:
        """This process's shard ``(index, count)`` and the number of
        DataLoader workers per rank (1 outside a worker)."""
        info = _tud.get_worker_info()
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        return (self.rank * workers + worker, self.world_size * workers), workers

    def __iter__(self) -> _Iterator:
        shard, workers = self.shard()
        threads = self.threads
        if threads is None and _tud.get_worker_info() is not None:
            threads = max(1, (os.cpu_count() or 1) // workers)
        it = _Iterator(self, shard, threads, self.epoch)
        if self._resume is not None:
            it.load_state_dict(self._resume)
            self._resume = None
        self._live = weakref.ref(it)
        return it

    def _make_loader(self, shard: Tuple[int, int], threads, epoch: int):
        return grist.Loader(
            self.paths,
            self.spec,
            batch_size=self.batch_size,
            shuffle=self.shuffle,
            seed=self.seed,
            threads=threads,
            shard=shard,
            epochs=self.epochs,
            start_epoch=epoch,
            output="numpy",
            **self.loader_kwargs,
        )

    def state_dict(self) -> Dict[str, Any]:
        """The epoch and, when a pass is in progress in this process, its
        position."""
        it = self._live() if self._live is not None else None
        live = it.state_dict() if it is not None else self._resume
        return {"epoch": self.epoch, "position": live}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores :meth:`state_dict`: the next ``iter()`` continues from
        the saved position."""
        self.epoch = int(state["epoch"])
        self._resume = state.get("position")
        self._live = None

    def __getstate__(self):
        # DataLoader workers get a copy; a pass in progress stays here.
        d = dict(self.__dict__)
        d["_live"] = None
        return d


# Readers a forked process inherited (see Dataset._open).
_FORKED_READERS: list = []


def _row(value: Any, i: int) -> Any:
    """Row `i` of one column of a numpy batch, in the batch's forms minus
    the batch dimension."""
    if isinstance(value, np.ndarray):
        # `a[i, ...]` is a (0-d for scalars) view, which torch takes as is.
        return value[i, ...]
    if isinstance(value, tuple) and len(value) == 3:
        indices, values, dense_shape = value
        mine = indices[:, 0] == i
        return (indices[mine, 1:], values[mine], dense_shape[1:])
    if isinstance(value, tuple) and len(value) == 2:
        values, splits = value
        if isinstance(splits, list):
            # Several ragged dimensions: the outermost splits pick the row's
            # inner rows; inner splits are rebased on them.
            lo, hi = int(splits[0][i]), int(splits[0][i + 1])
            inner = []
            for s in splits[1:]:
                part = s[lo : hi + 1]
                inner.append(part - part[0])
                lo, hi = int(part[0]), int(part[-1])
            out_values = values[lo:hi]
            return (out_values, inner) if len(inner) > 1 else (
                (out_values, inner[0]) if inner else out_values
            )
        return values[int(splits[i]) : int(splits[i + 1])]
    return value


class Dataset(_tud.Dataset):
    """Map-style dataset over a :class:`grist.RecordReader` (FFRecord,
    indexed TFRecord, OFRecord): records by global number.

    ``__getitems__(indices)`` reads all the indices of a batch in one
    coalesced read and returns the numpy batch (rows in the order given);
    pass ``collate_fn=grist.torch.collate`` (or ``ds.collate``) to turn it
    into tensors, so that torch's samplers drive it::

        ds = grist.torch.Dataset("train.ffr")
        sampler = DistributedSampler(ds, shuffle=True, seed=0)
        dl = DataLoader(ds, batch_size=256, sampler=sampler,
                        collate_fn=grist.torch.collate, num_workers=2)

    ``ds[i]`` is one record: dense features without the batch dimension,
    sparse ones as ``(indices, values, dense_shape)`` without it, ragged
    ones as their values (one ragged dimension). The reader is opened
    lazily in each process (DataLoader workers open their own).
    """

    def __init__(self, paths, spec=None, *, format=None, sparse: str = "tuple"):
        _check_sparse(sparse)
        self.paths = paths
        self.spec = spec
        self.format = format
        self.sparse = sparse
        self._reader = None
        self._pid = None
        self._len = len(self._open())
        # Not kept open: DataLoader workers (forked) open their own, and the
        # parent reopens on first use.
        self._reader = None

    def _open(self):
        if self._reader is not None and self._pid != os.getpid():
            # A reader inherited through fork (a DataLoader worker): its
            # threads stayed in the parent, so dropping it here would join
            # threads that do not exist. It is kept, unused, for the life of
            # this process.
            _FORKED_READERS.append(self._reader)
            self._reader = None
        if self._reader is None:
            self._reader = grist.RecordReader(
                self.paths, self.spec, format=self.format, output="numpy"
            )
            self._pid = os.getpid()
        return self._reader

    def __len__(self) -> int:
        return self._len

    def __getitems__(self, indices: Sequence[int]) -> Dict[str, Any]:
        return self._open().read(np.asarray(indices, dtype=np.int64))

    def __getitem__(self, index: int) -> Dict[str, Any]:
        i = int(index)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"record {index} of a dataset of {self._len}")
        batch = self._open().read(np.asarray([i], dtype=np.int64))
        return to_torch({k: _row(v, 0) for k, v in batch.items()}, sparse="tuple")

    def collate(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        """:func:`collate` with this dataset's ``sparse`` form."""
        if not isinstance(batch, dict):
            return collate(batch)
        return to_torch(batch, sparse=self.sparse)

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_reader"] = None
        d["_pid"] = None
        return d

