#!/usr/bin/env bash
# What two cores give this work: per round, one single-thread loader alone,
# two single-thread loaders started together (a pair: independent
# processes, nothing shared), then one loader with two parse threads;
# batch 1024, on the six prod19 inputs (EXTRA="--mmap" for mapped files).
#
# A pair's throughput has two bounds. Each loader runs whole passes until
# SECONDS have gone by, so one may finish first and the other then runs
# alone for up to a pass: the sum of their records/s counts that tail at
# full speed (high bound); both records over the longer run's seconds
# counts it as idle (low bound). Prints the medians of pair/alone (low,
# high), t2/alone and pair/t2 (low, high).
#
#   benches/loader/pairs.sh [ROUNDS] [SECONDS]      (EXTRA="--mmap")
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-4}; SECS=${2:-3}; EXTRA=${EXTRA:-}
OUT=$(mktemp)
# "records seconds" of one `grist bench --json` run.
run() {
  "$GRIST" bench --json "$@" | python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print(d['records'], d['seconds'])"
}
one() {
  # shellcheck disable=SC2086
  local args=(--spec "$2" --batch-size 1024 --min-seconds "$SECS" $EXTRA "$3")
  local alone pair t2
  alone=$(run "${args[@]}" --threads 1)
  pair=$( (run "${args[@]}" --threads 1 & run "${args[@]}" --threads 1; wait) | tr '\n' ' ')
  t2=$(run "${args[@]}" --threads 2)
  echo "$1 $alone $pair $t2" >> "$OUT"
}
each_input "$ROUNDS" one
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, *v = line.split()
    ra, sa, r1, s1, r2, s2, rt, st = map(float, v)
    alone, t2 = ra / sa, rt / st
    hi, lo = r1 / s1 + r2 / s2, (r1 + r2) / max(s1, s2)
    d[n].append((lo / alone, hi / alone, t2 / alone, lo / t2, hi / t2))
for n, rows in d.items():
    m = [statistics.median(r[i] for r in rows) for i in range(5)]
    print(f"{n}: pair/alone {m[0]:.2f}-{m[1]:.2f} t2/alone {m[2]:.2f} "
          f"pair/t2 {m[3]:.2f}-{m[4]:.2f} ({len(rows)} rounds)")
PY
