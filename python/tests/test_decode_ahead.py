"""`Loader(decode_ahead=True)`: a thread makes the next batch while Python
works on the last. Everything a caller sees must be what the loader
without it gives: the batches, the state after each batch handed over,
the epoch and the measurements, errors at the same place, close and
restore in the middle, and a clear refusal in a forked child."""

from __future__ import annotations

import json
import os
import signal

import pyarrow as pa
import pytest

import grist
from datasets import FORMATS, same_batches, spec_of


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shuffle", [False, True])
def test_same_batches_and_states_as_without(fmt, shuffle, data):
    path = data[fmt]
    kwargs = dict(batch_size=16, shuffle=shuffle, seed=3, epochs=2, shuffle_buffer=40, threads=2)
    plain = grist.Loader(path, spec_of(path), **kwargs)
    ahead = grist.Loader(path, spec_of(path), decode_ahead=True, **kwargs)
    assert ahead.state_dict() == plain.state_dict()
    n = 0
    for a, b in zip(ahead, plain):
        assert same_batches([a], [b]), (fmt, n)
        # The state, epoch and counts are those after the batch handed
        # over, not after the one the thread made since.
        assert ahead.state_dict() == plain.state_dict(), (fmt, n)
        assert ahead.epoch == plain.epoch
        assert ahead.stats()["records"] == plain.stats()["records"]
        assert ahead.stats()["batches"] == n + 1
        n += 1
    assert n == 2 * -(-300 // 16)
    with pytest.raises(StopIteration):
        next(ahead)
    with pytest.raises(StopIteration):
        next(plain)


def test_arrow_output(data):
    path = data["avro"]
    plain = [pa.record_batch(b) for b in grist.Loader(path, spec_of(path), batch_size=64, output="arrow")]
    ahead = [
        pa.record_batch(b)
        for b in grist.Loader(path, spec_of(path), batch_size=64, output="arrow", decode_ahead=True)
    ]
    assert len(ahead) == len(plain) == 5
    # Bit for bit (the data holds NaNs, which `equals` finds unequal).
    assert [a.serialize().to_pybytes() for a in ahead] == [b.serialize().to_pybytes() for b in plain]


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
def test_restore_in_the_middle_drops_the_batch_made_ahead(fmt, data):
    path = data[fmt]
    kwargs = dict(batch_size=10, shuffle=True, seed=8, shuffle_buffer=30)
    full = list(grist.Loader(path, spec_of(path), **kwargs))
    loader = grist.Loader(path, spec_of(path), decode_ahead=True, **kwargs)
    head = [next(loader) for _ in range(7)]
    state = json.loads(json.dumps(loader.state_dict()))
    # On: the thread has made (or is making) batch 8; going back to 2
    # must forget it.
    more = [next(loader) for _ in range(3)]
    assert same_batches(head + more, full[:10])
    again = grist.Loader(path, spec_of(path), **kwargs)
    two = [next(again) for _ in range(2)]
    loader.load_state_dict(again.state_dict())
    assert same_batches(two + list(loader), full)
    # A refused state leaves the loader where it was: the batch the
    # thread had made ahead is not lost.
    refusing = grist.Loader(path, spec_of(path), decode_ahead=True, **kwargs)
    four = [next(refusing) for _ in range(4)]
    other_args = grist.Loader(path, spec_of(path), batch_size=11)
    with pytest.raises(grist.SpecError):
        refusing.load_state_dict(other_args.state_dict())
    assert same_batches(four + list(refusing), full)
    # And a state saved by the loader with decode_ahead restores in one
    # without it.
    other = grist.Loader(path, spec_of(path), **kwargs)
    other.load_state_dict(state)
    assert same_batches(head + list(other), full)


def test_an_error_comes_after_the_same_batches(tmp_path, data):
    path = data["tfrecord"]
    files = sorted(p for p in path.iterdir() if p.suffix == ".tfrecord")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in files:
        (broken / f.name).write_bytes(f.read_bytes())
    last = broken / files[-1].name
    last.write_bytes(last.read_bytes()[:-5])

    def run(ahead):
        loader = grist.Loader(broken, spec_of(path), batch_size=20, decode_ahead=ahead)
        got = []
        with pytest.raises(grist.DataError) as e:
            for b in loader:
                got.append(b)
        return got, str(e.value), e.value.location

    plain, message, location = run(False)
    ahead, message2, location2 = run(True)
    assert len(plain) > 5 and same_batches(ahead, plain)
    assert message2 == message and location2 == location
    assert files[-1].name in message


def test_close_while_a_batch_is_made_ahead(data):
    path = data["avro"]
    loader = grist.Loader(path, spec_of(path), batch_size=10, decode_ahead=True)
    next(loader)
    loader.close()
    with pytest.raises(grist.GristError):
        next(loader)
    with pytest.raises(grist.GristError):
        loader.state_dict()


def test_dropped_mid_epoch_stops_its_thread(data):
    import threading

    path = data["ofrecord"]
    before = threading.active_count()
    for _ in range(20):
        loader = grist.Loader(path, spec_of(path), batch_size=10, decode_ahead=True)
        next(loader)
        del loader
    # Rust threads are not Python threads: check the OS's count instead.
    tasks = len(os.listdir(f"/proc/{os.getpid()}/task")) if os.path.isdir("/proc") else 0
    assert threading.active_count() == before
    # Each loader has a prefetch thread, a parse thread and the thread
    # ahead: 20 left running would be 60 more.
    assert tasks < 40, tasks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_is_refused_not_hung(data):
    path = data["ffrecord"]
    loader = grist.Loader(path, spec_of(path), batch_size=7, decode_ahead=True)
    first = next(loader)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            # A hang (the thread ahead is the parent's) ends the child.
            signal.alarm(30)
            try:
                next(loader)
                code = 2
            except grist.GristError as e:
                code = 0 if "another process" in str(e) else 3
            del loader
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent goes on where it was.
    rest = list(loader)
    assert len(rest) == 43 - 1
    assert same_batches([first] + rest, list(grist.Loader(path, spec_of(path), batch_size=7)))


def test_through_grist_torch(data):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    import grist.torch as gt

    path = data["tfrecord"]

    def batches(**kw):
        ds = gt.IterableDataset(path, spec_of(path), batch_size=32, shuffle=True, seed=4, **kw)
        ds.set_epoch(1)
        return list(DataLoader(ds, batch_size=None, num_workers=0))

    plain, ahead = batches(), batches(decode_ahead=True)
    assert len(plain) == len(ahead) == -(-300 // 32)
    for a, b in zip(ahead, plain):
        assert list(a) == list(b)
        # Bit for bit: the data holds NaNs.
        tensors = [k for k in a if isinstance(a[k], torch.Tensor)]
        assert tensors and all(a[k].numpy().tobytes() == b[k].numpy().tobytes() for k in tensors)
