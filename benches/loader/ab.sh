#!/usr/bin/env bash
# Two grist binaries side by side on one `grist bench` configuration,
# alternating; prints the median records/s and records per CPU-second of
# each, B ÷ A of the medians, and the median of B ÷ A taken round by round
# (each round runs A then B, so a slow spell of the machine hits both).
#
#   benches/loader/ab.sh ROUNDS BIN_A BIN_B -- BENCH ARGS (without --json)
set -euo pipefail
ROUNDS=$1; A=$2; B=$3; shift 4
OUT=$(mktemp)
for _ in $(seq "$ROUNDS"); do
  for bin in "$A" "$B"; do
    "$bin" bench --json "$@" | python3 -c "import json,sys; d = json.loads(sys.stdin.read()); print('$bin', d['records_per_s'], d['records_per_cpu_s'])" >> "$OUT"
  done
done
python3 - "$OUT" "$A" "$B" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
c = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, r, cpu = line.split(); d[b].append(float(r)); c[b].append(float(cpu))
A, B = sys.argv[2], sys.argv[3]
a, b = statistics.median(d[A]), statistics.median(d[B])
ca, cb = statistics.median(c[A]), statistics.median(c[B])
pair = statistics.median(y / x for x, y in zip(d[A], d[B]))
cpair = statistics.median(y / x for x, y in zip(c[A], c[B]))
print(f"A {a:,.0f}  B {b:,.0f}  B/A {b / a:.3f} (paired {pair:.3f})  "
      f"per CPU-s: A {ca:,.0f}  B {cb:,.0f}  B/A {cb / ca:.3f} (paired {cpair:.3f})")
PY
