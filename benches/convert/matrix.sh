#!/bin/bash
# Conversion speed against the loader's read-only speed, for every input
# format and every uncompressed output format, one line per input per
# round: the loader's records/s (`grist bench`, default threads, steady
# state) and each conversion's (two encoding threads, the input given
# twice: 400,000 records of prod19) with its ratio to the loader.
#
# usage: benches/convert/matrix.sh DATA ROUNDS [CONVERT_BINARY...]
#   DATA holds prod19.tfrecord + prod19.spec.json, prod19-null.avro +
#   prod19.atds.json, ffr/part-00000.ffr + ffr/spec.json and
#   of/part-00000 + of/spec.json (the last two made by `grist convert
#   --to ffrecord|ofrecord --spec prod19.spec.json prod19.tfrecord -o
#   DATA/ffr|of`). Several binaries alternate within each round (A/B).
#   The default binary is target/release/examples/convert
#   (`cargo build --release -p grist-cli -p grist-benches --examples`).
set -euo pipefail
cd "$(dirname "$0")/../.."
D=$1; ROUNDS=$2; shift 2
BINS=("$@"); [ ${#BINS[@]} -eq 0 ] && BINS=(target/release/examples/convert)
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
J='import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(round(d["records_per_s"]))'
declare -A IN=( [tf]="$D/prod19.tfrecord $D/prod19.spec.json" [avro]="$D/prod19-null.avro $D/prod19.atds.json"
                [ffr]="$D/ffr/part-00000.ffr $D/ffr/spec.json" [of]="$D/of/part-00000 $D/of/spec.json" )
for r in $(seq "$ROUNDS"); do
  for bin in "${BINS[@]}"; do
    echo "# round $r $(basename "$bin") $(date +%T)"
    for src in tf avro ffr of; do
      read -r f s <<< "${IN[$src]}"
      b=$(target/release/grist bench --spec "$s" --min-seconds 2 --json "$f" | python3 -c "$J")
      line="$src bench $b"
      for to in tfrecord avro ffrecord ofrecord; do
        rm -rf "$OUT/cv"
        c=$("$bin" --lossy --spec "$s" --threads 2 --to "$to" -o "$OUT/cv" "$f" "$f" | python3 -c "$J")
        line="$line | $to $c $(python3 -c "print(f'{100*$c/$b:.1f}%')")"
      done
      echo "$line"
    done
  done
done
