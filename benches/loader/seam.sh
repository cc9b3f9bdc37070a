#!/usr/bin/env bash
# Two grist binaries (before and after a change to the middle of the
# loader) on every prod19 input, with 1 and 2 parse threads and autotune,
# in order and shuffled (a buffer of 10,000 records; an exact permutation
# for inputs read by number), alternating (ab.sh); prints one line per
# configuration: the median records/s of each and after ÷ before.
#
#   benches/loader/seam.sh ROUNDS BEFORE AFTER DATA
#
# DATA holds `grist gen prod19 --records 200000` outputs: tf/ (with
# --gzip), avro-null/, avro-deflate/ (--format avro --codec null|deflate),
# ffr/ (--format ffrecord), of/ (--format ofrecord).
set -euo pipefail
ROUNDS=$1; BEFORE=$2; AFTER=$3; DATA=$4
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/common.sh"
while read -r name spec file; do
    # In the page cache before the first run.
    find "$file" -type f -exec cat {} + > /dev/null
    for shuffle in 0 10000; do
        for threads in 1 2 autotune; do
            printf '%-13s shuffle %-5s threads %-8s ' "$name" "$shuffle" "$threads"
            "$HERE/ab.sh" "$ROUNDS" "$BEFORE" "$AFTER" -- --spec "$spec" \
                --threads "$threads" --shuffle-buffer "$shuffle" "$file"
        done
    done
done < <(gen_inputs "$DATA")
