#!/usr/bin/env bash
# Autotune against fixed 1 and 2 parse threads, batch 64/256/1024, on the
# six prod19 inputs, alternating; prints median records/s and autotune ÷
# the better fixed count.
#
#   benches/loader/autotune.sh [ROUNDS] [SECONDS]     (EXTRA="--mmap" etc.)
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-2}; SECS=${2:-2}; EXTRA=${EXTRA:-}
OUT=$(mktemp)
one() {
  for b in 64 256 1024; do
    for t in 1 2 autotune; do
      # shellcheck disable=SC2086
      bench_line "$1 $b $t" --spec "$2" --batch-size $b --threads $t \
        --min-seconds "$SECS" $EXTRA "$3" >> "$OUT"
    done
  done
}
each_input "$ROUNDS" one
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list); th = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, b, t, r, _, m = line.split(); d[(n, int(b), t)].append(float(r)); th[(n, int(b), t)].append(float(m))
for n in dict.fromkeys(k[0] for k in d):
    for b in (64, 256, 1024):
        m = {t: statistics.median(d[(n, b, t)]) for t in ("1", "2", "autotune")}
        best = max(m["1"], m["2"])
        print(f"{n} b={b}: t1 {m['1']:,.0f} t2 {m['2']:,.0f} auto {m['autotune']:,.0f} "
              f"(threads {statistics.mean(th[(n, b, 'autotune')]):.2f}) auto/best {m['autotune'] / best:.2f}")
PY
