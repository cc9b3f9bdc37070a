#!/usr/bin/env bash
# Side by side, in one run: grist from Python against ATDS, tf.data +
# parse_example, the Rust loader itself (`grist bench`), and grist.ray
# against Ray Data's read_tfrecords, on prod19 (issue 19's speed goals).
#
#   benches/peers/side_by_side_python.sh [DATA_DIR] [ROUNDS] [SECONDS] [RAY_TFRECORD]
#
# RAY_TFRECORD (default DATA_DIR/prod19.tfrecord) is the file of the Ray
# comparison: Ray Data's read_tfrecords builds a table per record in
# Python (~100s of records/s here), so a smaller file of the same data
# (gen_prod19.py --records 5000: its first 5,000 records) keeps the run
# short. read_tfrecords does one timed epoch per round, grist.ray as
# many as fit in SECONDS.
#
# Batch 1024, 2 parse threads (ATDS num_parallel_calls=2, tf.data 2
# threads), no pinning: both cores, as a training job would use them. The
# readers alternate round by round over the same files, so that machine
# noise hits all alike; the summary prints medians and ratios.
#
# The -mmap rows are grist's Loader(mmap=True) (opt-in: the files are
# memory-mapped, not read).
#
# Two modes: per epoch (a new loader / dataset iterator each pass over the
# 50k-record files, as a training loop's `for epoch in ...` does: each
# pass pays the reader's start-up) and steady (`-steady` rows: one
# endless iterator, `repeat()` for the TensorFlow readers, `epochs=None`
# for grist, which is what `grist bench` measures).
#
# Needs:
#   PYG   python with grist's package importable: the venv of
#         python/requirements-test.txt (default /work/pybase/bin/python)
#         and the extension built in release mode and copied beside
#         python/grist (see docs/PYTHON-TORCH-RAY.md, "Benchmarks");
#   PY    the peers venv (tensorflow-cpu 2.16.2, tensorflow-io 0.37.1);
#   RAYPY a venv with Ray Data and TensorFlow (read_tfrecords parses
#         tf.train.Example with it): `pip install "ray[data]==2.60.0"
#         tensorflow-cpu==2.16.2 "numpy<2" "pyarrow<22"` (TF 2.16 needs
#         numpy 1.x, pyarrow 22+ needs numpy 2); default
#         /work/raypeer/bin/python;
#   GRIST a release build of the CLI (cargo build --release -p grist-cli);
#   DATA_DIR from gen_prod19.py (default /work/peers/data).
set -euo pipefail
DATA=${1:-/work/peers/data}
ROUNDS=${2:-3}
SECS=${3:-8}
RAYTFR=${4:-$DATA/prod19.tfrecord}
HERE=$(cd "$(dirname "$0")" && pwd)
PYG=${PYG:-/work/pybase/bin/python}
PY=${PY:-/work/peers/venv/bin/python}
RAYPY=${RAYPY:-/work/raypeer/bin/python}
GRIST=${GRIST:-$HERE/../../target/release/grist}
export PYTHONPATH=$HERE/../../python${PYTHONPATH:+:$PYTHONPATH}
AVRO=$DATA/prod19-null.avro
TFR=$DATA/prod19.tfrecord
OUT=$(mktemp)
# Prints "TAG records_per_s records_per_cpu_s" from the JSON on stdin.
j() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$1', d['records_per_s'], d.get('records_per_cpu_s'))" >> "$OUT"; }
for r in $(seq "$ROUNDS"); do
  cat "$AVRO" "$TFR" "$RAYTFR" > /dev/null   # in the page cache for everyone
  "$PY" "$HERE/atds_bench.py" --spec "$DATA/prod19.atds.json" --batch-size 1024 --num-parallel-calls 2 \
    --min-seconds "$SECS" --warmup-steps 10 --json "$AVRO" 2>/dev/null | j atds
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.atds.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --json "$AVRO" | j py-avro
  "$GRIST" bench --spec "$DATA/prod19.atds.json" --batch-size 1024 --threads 2 --min-seconds "$SECS" \
    --json "$AVRO" | j cli-avro
  "$GRIST" bench --spec "$DATA/prod19.atds.json" --batch-size 1024 --threads 2 --min-seconds "$SECS" \
    --loader-per-pass --json "$AVRO" | j cli-avro-per-pass
  "$PY" "$HERE/atds_bench.py" --spec "$DATA/prod19.atds.json" --batch-size 1024 --num-parallel-calls 2 \
    --min-seconds "$SECS" --warmup-steps 10 --steady --json "$AVRO" 2>/dev/null | j atds-steady
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.atds.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --steady --json "$AVRO" | j py-avro-steady
  "$PY" "$HERE/tf_bench.py" --spec "$DATA/prod19.spec.json" --batch-size 1024 --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --json "$TFR" 2>/dev/null | j tfdata
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --json "$TFR" | j py-tfrecord
  "$PYG" "$HERE/python_bench.py" --reader grist-torch --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --json "$TFR" | j torch-tfrecord
  "$GRIST" bench --spec "$DATA/prod19.spec.json" --batch-size 1024 --threads 2 --min-seconds "$SECS" \
    --json "$TFR" | j cli-tfrecord
  "$GRIST" bench --spec "$DATA/prod19.spec.json" --batch-size 1024 --threads 2 --min-seconds "$SECS" \
    --loader-per-pass --json "$TFR" | j cli-tfrecord-per-pass
  "$PY" "$HERE/tf_bench.py" --spec "$DATA/prod19.spec.json" --batch-size 1024 --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --steady --json "$TFR" 2>/dev/null | j tfdata-steady
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --steady --json "$TFR" | j py-tfrecord-steady
  # Loader(mmap=True): the files mapped instead of read (opt-in).
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --mmap --json "$TFR" | j py-tfrecord-mmap
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --steady --mmap --json "$TFR" | j py-tfrecord-mmap-steady
  "$PYG" "$HERE/python_bench.py" --reader grist-torch --spec "$DATA/prod19.spec.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --mmap --json "$TFR" | j torch-tfrecord-mmap
  "$PYG" "$HERE/python_bench.py" --reader grist --spec "$DATA/prod19.atds.json" --threads 2 \
    --min-seconds "$SECS" --warmup-steps 10 --mmap --json "$AVRO" | j py-avro-mmap
  "$PYG" "$HERE/python_bench.py" --reader grist-ray --spec "$DATA/prod19.spec.json" --threads 2 --min-seconds "$SECS" \
    --json "$RAYTFR" 2>/dev/null | j grist-ray
  "$RAYPY" "$HERE/python_bench.py" --reader ray-tfrecords --json "$RAYTFR" 2>/dev/null | j ray-tfrecords
  # grist.ray on the full file too: the small file's epochs are short
  # enough for Ray's per-execution overhead to show.
  "$PYG" "$HERE/python_bench.py" --reader grist-ray --spec "$DATA/prod19.spec.json" --threads 2 --min-seconds "$SECS" \
    --json "$TFR" 2>/dev/null | j grist-ray-full
  echo "round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$OUT" "$RAYTFR" <<'PY'
import collections, statistics, sys
rps = collections.defaultdict(list); cpu = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, r, c = line.split()
    rps[k].append(float(r))
    if c not in ("None", "0.0"):
        cpu[k].append(float(c))
m = {k: statistics.median(v) for k, v in rps.items()}
mc = {k: statistics.median(v) for k, v in cpu.items()}
print("| reader | records/s (median) | runs | records/CPU-s |")
print("|---|---:|---|---:|")
for k in rps:
    c = f"{mc[k]:,.0f}" if k in mc else "n/a"
    print(f"| {k} | {m[k]:,.0f} | {', '.join(f'{x:,.0f}' for x in rps[k])} | {c} |")
def ratio(a, b, d=m):
    return f"{d[a] / d[b]:.2f}x" if a in d and b in d and d[b] else "n/a"
print()
print(f"grist (Python, Avro) / ATDS:                  {ratio('py-avro', 'atds')} (per CPU-s {ratio('py-avro', 'atds', mc)})   goal >= 10x")
print(f"grist (Python, TFRecord) / tf.data:           {ratio('py-tfrecord', 'tfdata')} (per CPU-s {ratio('py-tfrecord', 'tfdata', mc)})   goal >= 5x")
print(f"grist (Python) / grist bench, Avro:           {ratio('py-avro', 'cli-avro')}   goal >= 0.90")
print(f"grist (Python) / grist bench, TFRecord:       {ratio('py-tfrecord', 'cli-tfrecord')}   goal >= 0.90")
print(f"grist (Python) / grist bench --loader-per-pass (both a loader per epoch): "
      f"Avro {ratio('py-avro', 'cli-avro-per-pass')}, TFRecord {ratio('py-tfrecord', 'cli-tfrecord-per-pass')}   goal >= 0.90")
print("steady state (one endless iterator each, as grist bench runs; no start-up per epoch):")
print(f"  grist (Python, Avro) / ATDS:                {ratio('py-avro-steady', 'atds-steady')} (per CPU-s {ratio('py-avro-steady', 'atds-steady', mc)})   goal >= 10x")
print(f"  grist (Python, TFRecord) / tf.data:         {ratio('py-tfrecord-steady', 'tfdata-steady')} (per CPU-s {ratio('py-tfrecord-steady', 'tfdata-steady', mc)})   goal >= 5x")
print(f"  grist (Python) / grist bench, Avro:         {ratio('py-avro-steady', 'cli-avro')} (per CPU-s {ratio('py-avro-steady', 'cli-avro', mc)})   goal >= 0.90")
print(f"  grist (Python) / grist bench, TFRecord:     {ratio('py-tfrecord-steady', 'cli-tfrecord')} (per CPU-s {ratio('py-tfrecord-steady', 'cli-tfrecord', mc)})   goal >= 0.90")
print(f"grist.torch / grist bench, TFRecord:          {ratio('torch-tfrecord', 'cli-tfrecord')}")
print("Loader(mmap=True), opt-in (files nothing modifies while read):")
print(f"  grist (Python, TFRecord, mmap) / tf.data:   {ratio('py-tfrecord-mmap', 'tfdata')} (per CPU-s {ratio('py-tfrecord-mmap', 'tfdata', mc)}); "
      f"steady {ratio('py-tfrecord-mmap-steady', 'tfdata-steady')} (per CPU-s {ratio('py-tfrecord-mmap-steady', 'tfdata-steady', mc)})   goal >= 5x")
print(f"  grist.torch (TFRecord, mmap) / tf.data:     {ratio('torch-tfrecord-mmap', 'tfdata')} (per CPU-s {ratio('torch-tfrecord-mmap', 'tfdata', mc)})")
print(f"  grist (Python, Avro, mmap) / ATDS:          {ratio('py-avro-mmap', 'atds')} (per CPU-s {ratio('py-avro-mmap', 'atds', mc)})")
print(f"grist.ray / Ray read_tfrecords:               {ratio('grist-ray', 'ray-tfrecords')}   goal >= 5x")
print(f"runs: {sys.argv[1]} (Ray file: {sys.argv[2]})")
PY
