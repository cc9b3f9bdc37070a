"""Shared helpers for the peer benchmark scripts (timing loop, result JSON).

Side-by-side peer scripts for humans; nothing in CI depends on them.
"""

import datetime
import json
import os
import platform
import statistics
import sys
import time


def file_bytes(files):
    return sum(os.path.getsize(f) for f in files)


def load_features(path):
    with open(path) as f:
        doc = json.load(f)
    feats = doc["features"] if isinstance(doc, dict) else doc
    if not feats:
        raise SystemExit(f"{path}: no features")
    return feats


def batch_rows(batch):
    """Number of records in a batch: a dict of tf.Tensor / tf.SparseTensor /
    RaggedTensor / numpy arrays, or a single tensor."""
    if isinstance(batch, dict):
        # Prefer a dense tensor; a sparse tensor's dense_shape[0] also works.
        for v in batch.values():
            shape = getattr(v, "shape", None)
            if shape is not None and len(shape) > 0 and shape[0] is not None:
                return int(shape[0])
        for v in batch.values():
            ds = getattr(v, "dense_shape", None)
            if ds is not None:
                return int(ds[0])
        raise ValueError("cannot tell the batch size")
    return int(batch.shape[0])


class _Steps:
    """Step timing shared by `run_epochs` and `run_steady`: the first
    `warmup_steps` steps are not timed; the first timed step starts when
    the one before it ended."""

    def __init__(self, warmup_steps, rows):
        self.warmup_steps = warmup_steps
        self.rows = rows
        self.step_ms = []
        self.records = self.records_total = self.batches = self.steps_seen = 0
        self.t_start = None
        self.cpu_start = 0.0

    def elapsed(self):
        return time.perf_counter() - self.t_start if self.t_start is not None else 0.0

    def take(self, it, min_seconds=None):
        """Iterates `it` to its end, or until `min_seconds` were timed."""
        t_prev = time.perf_counter()
        for batch in it:
            now = time.perf_counter()
            n = self.rows(batch)
            self.records_total += n
            self.steps_seen += 1
            if self.steps_seen > self.warmup_steps:
                if self.t_start is None:
                    self.t_start = t_prev
                    self.cpu_start = time.process_time()
                self.step_ms.append((now - t_prev) * 1e3)
                self.records += n
                self.batches += 1
            t_prev = time.perf_counter()
            if min_seconds is not None and self.elapsed() >= min_seconds:
                return

    def result(self, epochs):
        timed = self.t_start is not None
        return {
            "cpu_seconds": time.process_time() - self.cpu_start if timed else 0.0,
            "records": self.records,
            "batches": self.batches,
            "seconds": self.elapsed(),
            "step_ms": self.step_ms,
            "epochs": epochs,
            "records_total": self.records_total,
        }


def run_epochs(make_iter, epochs, warmup_steps, min_seconds, rows=batch_rows, max_epochs=1000):
    """Iterate `make_iter()` (one epoch each) at least `epochs` times and until
    `min_seconds` of timed iteration have passed.

    The first `warmup_steps` steps (of the first epoch) are not timed. Returns
    a dict with records, batches, seconds, step_ms (list), epochs, and
    records_total (including warm-up).
    """
    steps = _Steps(warmup_steps, rows)
    epoch = 0
    while True:
        steps.take(iter(make_iter()))
        epoch += 1
        if epoch >= epochs and (steps.elapsed() >= min_seconds or epoch >= max_epochs):
            break
    return steps.result(epoch)


def run_steady(make_iter, warmup_steps, min_seconds, rows=batch_rows):
    """Iterate one endless iterator (`make_iter()`: a repeated dataset, a
    loader of endless epochs) for `min_seconds` after `warmup_steps`
    untimed steps: the steady state `grist bench` measures, without a
    loader's or dataset's start-up per epoch. Returns what `run_epochs`
    does, with epochs None (epoch boundaries are not seen).
    """
    steps = _Steps(warmup_steps, rows)
    steps.take(iter(make_iter()), min_seconds)
    return steps.result(None)


def result(peer, run, files, threads, batch_size, **extra):
    epochs = run["epochs"]
    total_bytes = file_bytes(files)
    per_epoch_records = run["records_total"] / epochs if epochs else 0
    bytes_per_record = total_bytes / per_epoch_records if per_epoch_records else 0.0
    secs = run["seconds"]
    out = {
        "peer": peer,
        "records": run["records"],
        "batches": run["batches"],
        "seconds": round(secs, 4),
        "records_per_s": round(run["records"] / secs, 1) if secs else None,
        "bytes_per_s": round(run["records"] * bytes_per_record / secs, 1) if secs else None,
        "median_step_ms": round(statistics.median(run["step_ms"]), 4) if run["step_ms"] else None,
        "threads": threads,
        "batch_size": batch_size,
        "epochs": epochs,
        # CPU time of the whole process (all threads) over the timed part:
        # less sensitive to other load on the machine than wall time.
        "cpu_seconds": round(run["cpu_seconds"], 3),
        "records_per_cpu_s": round(run["records"] / run["cpu_seconds"], 1) if run["cpu_seconds"] else None,
        "records_per_epoch": int(per_epoch_records),
        "file_bytes": total_bytes,
        "files": [os.path.basename(f) for f in files],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_cpus": os.cpu_count(),
        # e.g. [0] when run under `taskset -c 0`: a true one-core measurement.
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    out.update(extra)
    return out


def report(res, as_json):
    if as_json:
        print(json.dumps(res), flush=True)
        return
    mbps = (res["bytes_per_s"] or 0) / 1e6
    print(
        f"{res['peer']}: {res['records']} records in {res['batches']} batches of {res['batch_size']}, "
        f"{res['seconds']:.2f} s ({res['epochs']} epochs), threads={res['threads']}\n"
        f"  {res['records_per_s']:,.0f} records/s, {mbps:.1f} MB/s (file bytes), "
        f"median step {res['median_step_ms']:.3f} ms",
        flush=True,
    )


def die(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)
