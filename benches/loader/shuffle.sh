#!/usr/bin/env bash
# Shuffle off against on (buffer 10,000 records; exact permutations for
# FFRecord and OFRecord), autotune, batch 1024, on the six prod19 inputs,
# alternating; prints median records/s and records per CPU-second.
#
#   benches/loader/shuffle.sh [ROUNDS] [SECONDS]      (EXTRA="--mmap")
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-3}; SECS=${2:-3}; EXTRA=${EXTRA:-}
OUT=$(mktemp)
one() {
  for sb in 0 10000; do
    # shellcheck disable=SC2086
    bench_line "$1 $sb" --spec "$2" --batch-size 1024 --threads autotune \
      --shuffle-buffer $sb --min-seconds "$SECS" $EXTRA "$3" >> "$OUT"
  done
}
each_input "$ROUNDS" one
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list); c = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, sb, r, cpu, _ = line.split(); d[(n, sb)].append(float(r)); c[(n, sb)].append(float(cpu))
for n in dict.fromkeys(k[0] for k in d):
    off, on = statistics.median(d[(n, '0')]), statistics.median(d[(n, '10000')])
    coff, con = statistics.median(c[(n, '0')]), statistics.median(c[(n, '10000')])
    print(f"{n}: off {off:,.0f} on {on:,.0f} records/s ({(on / off - 1) * 100:+.0f}%), "
          f"per CPU-s {coff:,.0f} -> {con:,.0f} ({(con / coff - 1) * 100:+.0f}%)")
PY
