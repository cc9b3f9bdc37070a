#!/usr/bin/env bash
# What two cores give this work: per round, one single-thread loader alone,
# two single-thread loaders started together (a pair: independent
# processes, nothing shared), then one loader with two parse threads;
# batch 1024, on the six prod19 inputs (EXTRA="--mmap" for mapped files).
# Prints the medians of pair/alone, t2/alone and pair/t2 over the rounds.
#
#   benches/loader/pairs.sh [ROUNDS] [SECONDS]      (EXTRA="--mmap")
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-4}; SECS=${2:-3}; EXTRA=${EXTRA:-}
OUT=$(mktemp)
one() {
  # shellcheck disable=SC2086
  local args=(--spec "$2" --batch-size 1024 --min-seconds "$SECS" $EXTRA "$3")
  local alone pair t2
  alone=$(bench_line x "${args[@]}" --threads 1 | cut -d' ' -f2)
  pair=$( (bench_line x "${args[@]}" --threads 1 & bench_line x "${args[@]}" --threads 1; wait) \
    | awk '{s += $2} END {print s}')
  t2=$(bench_line x "${args[@]}" --threads 2 | cut -d' ' -f2)
  echo "$1 $alone $pair $t2" >> "$OUT"
}
each_input "$ROUNDS" one
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, a, p, t = line.split(); d[n].append((float(a), float(p), float(t)))
for n, rows in d.items():
    med = lambda f: statistics.median(f(a, p, t) for a, p, t in rows)
    print(f"{n}: pair/alone {med(lambda a, p, t: p / a):.2f} "
          f"t2/alone {med(lambda a, p, t: t / a):.2f} "
          f"pair/t2 {med(lambda a, p, t: p / t):.2f} ({len(rows)} rounds)")
PY
