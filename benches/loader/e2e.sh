#!/usr/bin/env bash
# End to end on 2 cores, batch 1024, alternating: ATDS (num_parallel_calls autotune) vs grist (autotune / 2 threads, --mmap)
# on prod19-null.avro, and tf.data (AUTOTUNE) vs grist on prod19.tfrecord.
#
#   benches/loader/e2e.sh [ROUNDS] [SECONDS]     (PY: the peers' venv python)
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-2}; SECS=${2:-10}
D=$DATA; PY=${PY:-/work/peers/venv/bin/python}; G=$GRIST; B=$HERE/../peers
OUT=$(mktemp)
j() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$1', d['records_per_s'], d.get('records_per_cpu_s'))" >> $OUT; }
for r in $(seq $ROUNDS); do
  warm $D/prod19-null.avro $D/prod19.tfrecord
  $PY $B/atds_bench.py --spec $D/prod19.atds.json --batch-size 1024 --num-parallel-calls autotune --min-seconds $SECS --warmup-steps 20 --json $D/prod19-null.avro 2>/dev/null | j atds
  $G bench --spec $D/prod19.atds.json --batch-size 1024 --threads autotune --min-seconds $SECS --json $D/prod19-null.avro | j grist-avro-auto
  $G bench --spec $D/prod19.atds.json --batch-size 1024 --threads 2 --mmap --min-seconds $SECS --json $D/prod19-null.avro | j grist-avro-2-mmap
  $PY $B/tf_bench.py --spec $D/prod19.spec.json --batch-size 1024 --threads autotune --min-seconds $SECS --warmup-steps 20 --json $D/prod19.tfrecord 2>/dev/null | j tfdata
  $G bench --spec $D/prod19.spec.json --batch-size 1024 --threads autotune --min-seconds $SECS --json $D/prod19.tfrecord | j grist-tf-auto
  $G bench --spec $D/prod19.spec.json --batch-size 1024 --threads autotune --mmap --min-seconds $SECS --json $D/prod19.tfrecord | j grist-tf-auto-mmap
  echo "round $r done $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - $OUT <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list); c = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, r, cpu = line.split(); d[k].append(float(r)); c[k].append(float(cpu) if cpu != 'None' else 0)
for k in d: print(f"{k}: median {statistics.median(d[k]):,.0f} rec/s (runs {[round(x) for x in d[k]]}), rec/CPU-s median {statistics.median(c[k]):,.0f}")
m = {k: statistics.median(v) for k, v in d.items()}
print("avro: auto/atds %.1fx, 2-mmap/atds %.1fx | tfrecord: auto/tf.data %.1fx, auto-mmap/tf.data %.1fx" % (m['grist-avro-auto']/m['atds'], m['grist-avro-2-mmap']/m['atds'], m['grist-tf-auto']/m['tfdata'], m['grist-tf-auto-mmap']/m['tfdata']))
PY
