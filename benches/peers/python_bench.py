#!/usr/bin/env python3
"""Measure grist from Python, and Ray Data's own TFRecord reader.

Readers (--reader):

  grist         grist.Loader(files, spec, batch_size=B, threads=T): iterate
                the dicts of numpy arrays (what a numpy/JAX loop sees).
  grist-torch   grist.torch.IterableDataset through
                DataLoader(ds, batch_size=None, num_workers=0): torch tensors.
  grist-ray     ray.data.read_datasource(grist.ray.Datasource(files, spec,
                batch_size=B, threads=T)).iter_batches(batch_size=None,
                batch_format="pyarrow"): every row as Arrow, through Ray.
  ray-tfrecords ray.data.read_tfrecords(files).iter_batches(batch_size=None,
                batch_format="pyarrow"): Ray Data's reader (tf.train.Example
                parsed per record in Python; needs tensorflow in this venv).

The grist readers need the grist package (python/, extension built in
release mode) on PYTHONPATH; ray-tfrecords runs without grist. Each epoch
is one pass over the files; the Ray readers start Ray once (num_cpus from
--ray-cpus) and read one row untimed first, so the timed epochs do not
count Ray's start-up or the workers' imports. Records per CPU-second are given for the
in-process readers only (Ray's work happens in its worker processes).

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402

READERS = ("grist", "grist-torch", "grist-ray", "ray-tfrecords")


def arrow_rows(batch):
    return batch.num_rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--reader", choices=READERS, required=True)
    ap.add_argument("--spec", help="grist spec JSON (required for the grist readers)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--threads", default="2", help="grist parse threads: N or autotune (default 2)")
    ap.add_argument("--ray-cpus", type=int, default=2, help="num_cpus for ray.init (default 2)")
    ap.add_argument("--decode-ahead", action="store_true",
                    help="reader grist: Loader(decode_ahead=True)")
    ap.add_argument("--mmap", action="store_true", help="readers grist, grist-torch: Loader(mmap=True)")
    ap.add_argument("--work-ms", type=float, default=0.0,
                    help="sleep this long per batch, as a loop waiting for a GPU step would (default 0)")
    ap.add_argument("--steady", action="store_true",
                    help="one endless iterator (reader grist only: a Loader of epochs=None) timed for --min-seconds, as `grist bench` "
                         "measures, instead of a new iterator per epoch")
    ap.add_argument("--epochs", type=int, default=1, help="minimum number of timed passes (default 1)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep doing whole epochs until this much time was timed (default 0)")
    ap.add_argument("--warmup-steps", type=int, default=0, help="steps not timed at the start (default 0)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    threads = None if args.threads == "autotune" else int(args.threads)
    if (args.steady or args.decode_ahead) and args.reader != "grist":
        ap.error("--steady and --decode-ahead are for --reader grist")
    if args.mmap and args.reader not in ("grist", "grist-torch"):
        ap.error("--mmap is for --reader grist and grist-torch")
    if args.reader.startswith("grist") and not args.spec:
        ap.error("--spec is required for the grist readers")

    extra = {"reader": args.reader}
    rows = _common.batch_rows
    if args.reader == "grist":
        import grist

        def make():
            return grist.Loader(args.files, args.spec, batch_size=args.batch_size, threads=threads,
                                epochs=None if args.steady else 1, decode_ahead=args.decode_ahead,
                                mmap=args.mmap)

        extra["grist_module"] = os.path.dirname(grist.__file__)
    elif args.reader == "grist-torch":
        import torch
        from torch.utils.data import DataLoader

        import grist.torch

        ds = grist.torch.IterableDataset(
            args.files, args.spec, batch_size=args.batch_size, threads=threads, mmap=args.mmap
        )

        def make():
            return DataLoader(ds, batch_size=None, num_workers=0)

        extra["torch"] = torch.__version__
    else:
        import ray

        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        rows = arrow_rows
        if args.reader == "grist-ray":
            import grist.ray

            def dataset():
                src = grist.ray.Datasource(
                    args.files, args.spec, batch_size=args.batch_size, threads=threads
                )
                return ray.data.read_datasource(src)
        else:

            def dataset():
                return ray.data.read_tfrecords(args.files)

        def make():
            return dataset().iter_batches(batch_size=None, batch_format="pyarrow")

        # Untimed: Ray's workers start and import their modules (TensorFlow
        # for read_tfrecords) on a read of one row.
        for _ in dataset().limit(1).iter_batches(batch_size=None, batch_format="pyarrow"):
            pass
        extra["ray"] = ray.__version__
        extra["ray_cpus"] = args.ray_cpus

    if args.work_ms:
        count = rows

        def rows(batch):
            time.sleep(args.work_ms / 1e3)
            return count(batch)

        extra["work_ms"] = args.work_ms
    extra["decode_ahead"] = args.decode_ahead
    extra["mmap"] = args.mmap
    if args.steady:
        run = _common.run_steady(make, args.warmup_steps, args.min_seconds, rows=rows)
    else:
        run = _common.run_epochs(make, args.epochs, args.warmup_steps, args.min_seconds, rows=rows)
    if args.reader in ("grist-ray", "ray-tfrecords"):
        # The driver's CPU time says nothing about the workers' work.
        run["cpu_seconds"] = 0.0
    res = _common.result(args.reader, run, args.files, args.threads, args.batch_size, **extra)
    _common.report(res, args.json)


if __name__ == "__main__":
    main()
