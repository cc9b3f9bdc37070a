#!/usr/bin/env bash
# One against two parse threads, batch 1024, read calls and --mmap, on the
# six prod19 inputs, alternating; prints best and median records/s.
#
# Also what two cores allow: a one-thread loader keeps more than one core
# busy (its prefetch thread reads, copies and checks beside the parse
# thread), so with CPU per record unchanged, two cores give it at most
# 2 / (cores busy at one thread) times its records/s: the "ceiling"
# (medians of CPU-seconds per wall-second from getrusage).
#
#   benches/loader/scaling.sh [ROUNDS] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
ROUNDS=${1:-2}; SECS=${2:-3}
OUT=$(mktemp)
one() {
  for m in read mmap; do
    flag=""; [ $m = mmap ] && flag=--mmap
    for t in 1 2; do
      # shellcheck disable=SC2086
      bench_line "$1 $m $t" --spec "$2" --batch-size 1024 --threads $t $flag \
        --min-seconds "$SECS" "$3" >> "$OUT"
    done
  done
}
each_input "$ROUNDS" one
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
busy = collections.defaultdict(list)
per_cpu = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, m, t, r, c, _ = line.split()
    d[(n, m, int(t))].append(float(r))
    busy[(n, m, int(t))].append(float(r) / float(c))
    per_cpu[(n, m, int(t))].append(float(c))
for n, m in dict.fromkeys((k[0], k[1]) for k in d):
    b1, b2 = max(d[(n, m, 1)]), max(d[(n, m, 2)])
    m1, m2 = statistics.median(d[(n, m, 1)]), statistics.median(d[(n, m, 2)])
    u1 = statistics.median(busy[(n, m, 1)])
    cpu = statistics.median(per_cpu[(n, m, 2)]) / statistics.median(per_cpu[(n, m, 1)])
    print(f"{n} {m}: t1 best {b1:,.0f} t2 best {b2:,.0f} | t2/t1 best {b2 / b1:.2f} "
          f"median {m2 / m1:.2f} | cores busy at t1 {u1:.2f}, ceiling {2 / u1:.2f}, "
          f"records per CPU-s t2/t1 {cpu:.2f}")
PY
