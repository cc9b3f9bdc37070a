#!/usr/bin/env bash
# Side by side, in one run: grist vs TensorFlow 2.16 on prod19 as TFRecord.
#
#   benches/peers/side_by_side_tfrecord.sh DATA_DIR [ROUNDS] [SECONDS]
#
# Both readers are pinned to CPU 0 (`taskset -c 0`, so "per core" means
# one core) and alternate, round by round, over the same file, so that
# machine noise hits both alike. Each run reports records/s and records per
# CPU-second; the summary prints the median of each and the ratios.
# Needs: the peers venv (/work/peers/venv or $PY), a release build of
# grist (cargo build --release), DATA_DIR from gen_prod19.py.
set -euo pipefail
DATA=${1:?usage: side_by_side_tfrecord.sh DATA_DIR [ROUNDS] [SECONDS]}
ROUNDS=${2:-3}
SECS=${3:-10}
PY=${PY:-/work/peers/venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
GRIST=${GRIST:-$HERE/../../target/release/grist}
OUT=$(mktemp)
for round in $(seq "$ROUNDS"); do
  for batch in 64 256 1024; do
    # TensorFlow: TFRecordDataset -> batch -> parse_example, one thread.
    taskset -c 0 "$PY" "$HERE/tf_bench.py" --spec "$DATA/prod19.spec.json" --batch-size "$batch" \
      --threads 1 --warmup-steps 10 --min-seconds "$SECS" --json "$DATA/prod19.tfrecord" 2>/dev/null \
      | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps({"peer":"tensorflow","batch":d["batch_size"],"rps":d["records_per_s"],"rpcpu":d.get("records_per_cpu_s")}))' >> "$OUT"
    # grist: read + framing + CRC + parse, one thread; CPU time from time(1).
    /usr/bin/time -f '%U %S' -o /tmp/grist-time.$$ taskset -c 0 "$GRIST" bench \
      --spec "$DATA/prod19.spec.json" --batch-size "$batch" --threads 1 --min-seconds "$SECS" --json \
      "$DATA/prod19.tfrecord" \
      | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); u,s=open(sys.argv[1]).read().split(); print(json.dumps({"peer":"grist","batch":d["batch_size"],"rps":d["records_per_s"],"rpcpu":d["records"]/(float(u)+float(s))}))' /tmp/grist-time.$$ >> "$OUT"
  done
done
rm -f /tmp/grist-time.$$
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| batch | TF records/s | grist records/s | ratio | TF records/CPU-s | grist records/CPU-s | ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for b in (64, 256, 1024):
    tf = [r for r in rows if r["peer"] == "tensorflow" and r["batch"] == b]
    gr = [r for r in rows if r["peer"] == "grist" and r["batch"] == b]
    m = lambda xs, k: statistics.median([x[k] for x in xs if x[k]])
    print(f"| {b} | {m(tf,'rps'):,.0f} | {m(gr,'rps'):,.0f} | {m(gr,'rps')/m(tf,'rps'):.1f}x "
          f"| {m(tf,'rpcpu'):,.0f} | {m(gr,'rpcpu'):,.0f} | {m(gr,'rpcpu')/m(tf,'rpcpu'):.1f}x |")
print(f"runs: {len(rows)} ({sys.argv[1]})")
PY
