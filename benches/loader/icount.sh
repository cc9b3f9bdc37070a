#!/usr/bin/env bash
# Instructions executed (valgrind's cachegrind) by one `grist bench` pass
# of two grist binaries on every prod19 input, one parse thread, in order
# and shuffled (a buffer of 10,000 records; an exact permutation for
# inputs read by number): a count that the host's noise does not move,
# for changes too small to tell apart in records/s.
#
#   benches/loader/icount.sh BEFORE AFTER DATA
#
# DATA as for seam.sh. Single-threaded and slow (~30 min for the twelve
# pairs): valgrind runs a program about 50x slower.
set -euo pipefail
BEFORE=$1; AFTER=$2; DATA=$3
source "$(dirname "$0")/common.sh"
count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$@" 2>&1 >/dev/null | awk '/I *refs/ {gsub(",", "", $NF); print $NF}'
}
while read -r name spec file; do
    for shuffle in 0 10000; do
        args=(bench --json --min-seconds 0 --spec "$spec" --threads 1 --shuffle-buffer "$shuffle" "$file")
        b=$(count "$BEFORE" "${args[@]}")
        a=$(count "$AFTER" "${args[@]}")
        awk -v n="$name" -v s="$shuffle" -v b="$b" -v a="$a" \
            'BEGIN {printf "%-13s shuffle %-5s before %.0f after %.0f after/before %.4f\n", n, s, b, a, a / b}'
    done
done < <(gen_inputs "$DATA")
