"""grist.torch: the iterable dataset under DataLoader workers and ranks,
StatefulDataLoader resume, and the map-style dataset under torch samplers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import grist  # noqa: E402
import grist.torch as gt  # noqa: E402
from torch.utils.data import (  # noqa: E402
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
)

from torch_ray_data import (  # noqa: E402
    FORMATS,
    RANDOM_ACCESS,
    check_rows,
    varlen_rows,
    write_dataset,
)


@pytest.fixture(scope="module", params=FORMATS)
def dataset(request, tmp_path_factory):
    return write_dataset(str(tmp_path_factory.mktemp(request.param)), request.param)


@pytest.fixture(scope="module", params=RANDOM_ACCESS)
def indexed(request, tmp_path_factory):
    return write_dataset(str(tmp_path_factory.mktemp(request.param)), request.param)


def ids_of(batches):
    return np.concatenate([b["id"].numpy() for b in batches]) if batches else np.zeros(0)


def check_batches(written, batches):
    for b in batches:
        n = b["id"].shape[0]
        check_rows(written, b["id"].numpy(), b["x"].numpy(), varlen_rows(b["tok"], n))


def read_ranks(written, world, workers, epoch=0, **kw):
    """Every rank's batches, the ranks run one after another in this
    process (rank and world passed explicitly)."""
    out = []
    for rank in range(world):
        ds = gt.IterableDataset(
            written.files, written.spec, batch_size=8, shuffle=True, seed=11,
            rank=rank, world_size=world, **kw,
        )
        ds.set_epoch(epoch)
        dl = DataLoader(ds, batch_size=None, num_workers=workers)
        out.append(list(dl))
    return out


def test_two_workers_two_ranks_read_every_record_once_per_epoch(dataset):
    orders = []
    for epoch in (0, 1):
        per_rank = read_ranks(dataset, world=2, workers=2, epoch=epoch)
        ids = np.concatenate([ids_of(b) for b in per_rank])
        assert sorted(ids.tolist()) == sorted(dataset.ids.tolist()), f"epoch {epoch}"
        for batches in per_rank:
            assert batches, "a rank read nothing"
            check_batches(dataset, batches)
        orders.append(ids)
    # set_epoch changes the shuffle order, and epochs are still partitions.
    assert not np.array_equal(orders[0], orders[1])


def test_set_epoch_reads_the_loaders_own_epoch(dataset):
    # Epoch 2 through the dataset is epoch 2 of one uninterrupted loader.
    loader = grist.Loader(
        dataset.files, dataset.spec, batch_size=8, shuffle=True, seed=11, epochs=3
    )
    by_epoch = {}
    for b in loader:
        by_epoch.setdefault(loader.epoch, []).append(b["id"])
    ds = gt.IterableDataset(dataset.files, dataset.spec, batch_size=8, shuffle=True, seed=11)
    ds.set_epoch(2)
    got = ids_of(list(DataLoader(ds, batch_size=None, num_workers=0)))
    np.testing.assert_array_equal(got, np.concatenate(by_epoch[max(by_epoch)]))


def test_ranks_from_environment(dataset, monkeypatch):
    seen = []
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        ds = gt.IterableDataset(dataset.files, dataset.spec, batch_size=16)
        assert (ds.rank, ds.world_size) == (rank, 2)
        seen.append(ids_of(list(DataLoader(ds, batch_size=None, num_workers=2))))
    assert sorted(np.concatenate(seen).tolist()) == sorted(dataset.ids.tolist())
    assert all(len(s) for s in seen)


def test_rank_and_world_checks_its_arguments(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert gt.rank_and_world() == (0, 1)
    assert gt.rank_and_world(1, 3) == (1, 3)
    with pytest.raises(ValueError):
        gt.rank_and_world(2, 2)
    with pytest.raises(ValueError):
        gt.rank_and_world(0, None)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK"):
        gt.rank_and_world()


def test_dataset_refuses_shard_and_output(dataset):
    with pytest.raises(TypeError, match="shard"):
        gt.IterableDataset(dataset.files, dataset.spec, shard=(0, 2))
    with pytest.raises(TypeError, match="output"):
        gt.IterableDataset(dataset.files, dataset.spec, output="arrow")


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_exactly(dataset, workers):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")

    def make():
        ds = gt.IterableDataset(
            dataset.files, dataset.spec, batch_size=6, shuffle=True, seed=5, shuffle_buffer=20
        )
        ds.set_epoch(2)
        return sdl.StatefulDataLoader(ds, batch_size=None, num_workers=workers)

    dl = make()
    it = iter(dl)
    head = [next(it) for _ in range(5)]
    state = dl.state_dict()
    rest = list(it)
    assert rest, "nothing left to resume"

    dl2 = make()
    dl2.load_state_dict(state)
    again = list(dl2)
    assert len(again) == len(rest)
    for a, b in zip(rest, again):
        np.testing.assert_array_equal(a["id"].numpy(), b["id"].numpy())
        np.testing.assert_array_equal(a["x"].numpy(), b["x"].numpy())
    ids = np.concatenate([ids_of(head), ids_of(again)])
    assert sorted(ids.tolist()) == sorted(dataset.ids.tolist())


def test_state_dict_without_stateful_dataloader(dataset):
    ds = gt.IterableDataset(dataset.files, dataset.spec, batch_size=10, shuffle=True, seed=1)
    it = iter(ds)
    next(it), next(it)
    state = ds.state_dict()
    rest = [b["id"].numpy() for b in it]
    ds2 = gt.IterableDataset(dataset.files, dataset.spec, batch_size=10, shuffle=True, seed=1)
    ds2.load_state_dict(state)
    again = [b["id"].numpy() for b in ds2]
    assert len(rest) == len(again)
    for a, b in zip(rest, again):
        np.testing.assert_array_equal(a, b)


def test_state_of_another_shard_is_refused(dataset):
    ds = gt.IterableDataset(dataset.files, dataset.spec, batch_size=10, rank=0, world_size=2)
    it = iter(ds)
    next(it)
    state = it.state_dict()
    other = iter(
        gt.IterableDataset(dataset.files, dataset.spec, batch_size=10, rank=1, world_size=2)
    )
    with pytest.raises(ValueError, match="shard 0 of 2"):
        other.load_state_dict(state)


def test_tensors_share_memory_with_the_numpy_batch(dataset):
    batch = next(iter(grist.Loader(dataset.files, dataset.spec, batch_size=16)))
    t = gt.to_torch(batch)
    for name in ("id", "x"):
        assert isinstance(t[name], torch.Tensor)
        assert t[name].data_ptr() == batch[name].__array_interface__["data"][0], name
        assert np.shares_memory(t[name].numpy(), batch[name])
    indices, values, dense_shape = t["tok"]
    assert values.data_ptr() == batch["tok"][1].__array_interface__["data"][0]
    assert indices.dtype == torch.int64 and dense_shape.tolist() == batch["tok"][2].tolist()


def test_sparse_coo_form(dataset):
    batch = next(iter(grist.Loader(dataset.files, dataset.spec, batch_size=16)))
    coo = gt.to_torch(batch, sparse="coo")["tok"]
    assert coo.is_sparse
    dense = coo.to_dense().numpy()
    rows = varlen_rows(batch["tok"], 16)
    for r, values in enumerate(rows):
        np.testing.assert_array_equal(dense[r, : len(values)], values)
    with pytest.raises(ValueError):
        gt.to_torch(batch, sparse="csr")


def test_map_style_distributed_sampler_covers_every_index_once(indexed):
    ds = gt.Dataset(indexed.files, indexed.spec)
    assert len(ds) == len(indexed.ids)
    got = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        order = list(sampler)
        dl = DataLoader(ds, batch_size=7, sampler=sampler, collate_fn=gt.collate, num_workers=2)
        batches = list(dl)
        # Rows come back in the sampler's order: record k holds written row k.
        ids = ids_of(batches)
        np.testing.assert_array_equal(ids, indexed.ids[order])
        check_batches(indexed, batches)
        got.append(order)
    # DistributedSampler pads by repeating the first indices; without the
    # padding every index is read exactly once.
    flat = list(itertools.chain(*got))
    pad = len(flat) - len(ds)
    assert sorted(set(flat)) == list(range(len(ds)))
    assert len(flat) - len(set(flat)) == pad


def test_map_style_one_read_per_batch(indexed):
    ds = gt.Dataset(indexed.files, indexed.spec)
    reader = ds._open()
    calls = []

    class Counting:
        def read(self, indices):
            calls.append(len(indices))
            return reader.read(indices)

    ds._reader = Counting()
    sampler = BatchSampler(RandomSampler(ds, generator=torch.Generator().manual_seed(0)), 16, False)
    dl = DataLoader(ds, batch_sampler=sampler, collate_fn=ds.collate)
    batches = list(dl)
    assert calls == [len(b) for b in sampler]
    assert len(calls) == len(batches)
    assert sorted(ids_of(batches).tolist()) == sorted(indexed.ids.tolist())


def test_map_style_getitem_is_one_record(indexed):
    ds = gt.Dataset(indexed.files, indexed.spec)
    for k in (0, len(ds) // 2, -1):
        rec = ds[k]
        row = k % len(ds)
        assert int(rec["id"]) == int(indexed.ids[row])
        np.testing.assert_array_equal(rec["x"].numpy(), indexed.x[row])
        _, values, _ = rec["tok"]
        np.testing.assert_array_equal(values.numpy(), indexed.tok[row])
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_collate_refuses_lists_of_samples(indexed):
    ds = gt.Dataset(indexed.files, indexed.spec)
    with pytest.raises(TypeError, match="collate_fn"):
        gt.collate([ds[0], ds[1]])
