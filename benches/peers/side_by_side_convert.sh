#!/usr/bin/env bash
# grist's conversions (issue 17) against the reference tools.
#
#   benches/peers/side_by_side_convert.sh readback DATA_DIR OUT_DIR
#   benches/peers/side_by_side_convert.sh speed DATA_DIR [ROUNDS] [RECORDS]
#
# readback: converts DATA_DIR's prod19.tfrecord and prod19-null.avro (from
#   gen_prod19.py) with grist (the `convert` example) into every format and
#   codec, one folder per case in OUT_DIR, then reads each back with the
#   reference tools (convert_readback.py: tf.data + parse_example, fastavro,
#   ATDS, the FFRecord and OFRecord format rules) and compares every value
#   with the originals. Exit status 1 if a value differs.
#
# speed: the Python baseline (convert_baseline.py: TensorFlow -> fastavro
#   and fastavro -> tf.train.Example -> TFRecordWriter) against grist's
#   conversion of the same file, one encoding thread, and grist's
#   conversions into the uncompressed formats against the loader's
#   read-only speed (`grist bench --threads 1`) on the same input. Every
#   run is pinned to CPU 0 (taskset -c 0: one core) and they alternate,
#   round by round. RECORDS (default: all) limits the Python baseline's
#   records per run (it takes minutes per 100,000). Prints a Markdown
#   table of medians and ratios; OUT=FILE.jsonl keeps the raw lines.
#
# Needs: the peers venv (/work/peers/venv or $PY); release builds of grist
# and of the example:
#   cargo build --release -p grist-cli
#   cargo build --release -p grist-benches --example convert
set -euo pipefail
MODE=${1:?usage: side_by_side_convert.sh readback DATA_DIR OUT_DIR | speed DATA_DIR [ROUNDS] [RECORDS]}
DATA=${2:?DATA_DIR}
PY=${PY:-/work/peers/venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
TARGET=${TARGET:-$HERE/../../target/release}
GRIST=${GRIST:-$TARGET/grist}
CONVERT=${CONVERT:-$TARGET/examples/convert}
TFSPEC=$DATA/prod19.spec.json
ATDS=$DATA/prod19.atds.json

convert() { # CASE_DIR SPEC INPUT ARGS...
  local out=$1 spec=$2 input=$3
  shift 3
  "$CONVERT" --spec "$spec" --threads 2 --records-per-file 2000 -o "$out" "$@" "$input" >/dev/null
}

if [ "$MODE" = readback ]; then
  OUT=${3:?OUT_DIR}
  mkdir -p "$OUT"
  T=$DATA/prod19.tfrecord
  A=$DATA/prod19-null.avro
  convert "$OUT/tfrecord-to-tfrecord" "$TFSPEC" "$T" --to tfrecord
  convert "$OUT/tfrecord-to-tfrecord-gzip" "$TFSPEC" "$T" --to tfrecord --compression GZIP
  convert "$OUT/tfrecord-to-tfrecord-zlib" "$TFSPEC" "$T" --to tfrecord --compression ZLIB
  for codec in null deflate snappy zstandard bzip2 xz; do
    convert "$OUT/tfrecord-to-avro-$codec" "$TFSPEC" "$T" --to avro --codec "$codec"
  done
  convert "$OUT/tfrecord-to-ffrecord" "$TFSPEC" "$T" --to ffrecord
  convert "$OUT/tfrecord-to-ffrecord-payload-ofrecord" "$TFSPEC" "$T" --to ffrecord --payload ofrecord
  convert "$OUT/tfrecord-to-ofrecord" "$TFSPEC" "$T" --to ofrecord
  for codec in null deflate snappy; do
    convert "$OUT/avro-to-avro-$codec" "$ATDS" "$A" --to avro --codec "$codec"
  done
  convert "$OUT/avro-to-ofrecord" "$ATDS" "$A" --to ofrecord
  convert "$OUT/avro-to-ffrecord-payload-ofrecord" "$ATDS" "$A" --to ffrecord --payload ofrecord
  convert "$OUT/avro-to-tfrecord-lossy" "$ATDS" "$A" --to tfrecord --lossy
  convert "$OUT/avro-to-ffrecord-lossy" "$ATDS" "$A" --to ffrecord --lossy
  exec "$PY" "$HERE/convert_readback.py" --data "$DATA" "$OUT"/*-to-*
fi

[ "$MODE" = speed ] || { echo "unknown mode $MODE" >&2; exit 2; }
ROUNDS=${3:-3}
RECORDS=${4:-0}
RAW=${OUT:-$(mktemp --suffix .jsonl)}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
pin() { taskset -c 0 "$@"; }
for round in $(seq "$ROUNDS"); do
  pin "$PY" "$HERE/convert_baseline.py" tfrecord-to-avro "$DATA/prod19.tfrecord" "$SCRATCH/b.avro" \
    --spec "$TFSPEC" --max-records "$RECORDS" 2>/dev/null >> "$RAW"
  pin "$CONVERT" --spec "$TFSPEC" --threads 1 --to avro --codec null -o "$SCRATCH/g-avro" \
    "$DATA/prod19.tfrecord" | sed 's/"tool": "grist-convert"/"tool": "grist-convert", "case": "tfrecord-to-avro"/' >> "$RAW"
  pin "$PY" "$HERE/convert_baseline.py" avro-to-tfrecord "$DATA/prod19-null.avro" "$SCRATCH/b.tfrecord" \
    --spec "$ATDS" --max-records "$RECORDS" 2>/dev/null >> "$RAW"
  pin "$CONVERT" --spec "$ATDS" --threads 1 --to tfrecord --lossy -o "$SCRATCH/g-tfrecord" \
    "$DATA/prod19-null.avro" | sed 's/"tool": "grist-convert"/"tool": "grist-convert", "case": "avro-to-tfrecord"/' >> "$RAW"
  for to in ffrecord ofrecord tfrecord; do
    pin "$CONVERT" --spec "$TFSPEC" --threads 1 --to "$to" -o "$SCRATCH/g-$to" "$DATA/prod19.tfrecord" \
      | sed "s/\"tool\": \"grist-convert\"/\"tool\": \"grist-convert\", \"case\": \"tfrecord-to-$to\"/" >> "$RAW"
  done
  pin "$GRIST" bench --spec "$TFSPEC" --threads 1 --min-seconds 3 --json "$DATA/prod19.tfrecord" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); d["tool"]="grist-bench"; d["case"]="read-tfrecord"; print(json.dumps(d))' >> "$RAW"
  pin "$GRIST" bench --spec "$ATDS" --threads 1 --min-seconds 3 --json "$DATA/prod19-null.avro" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); d["tool"]="grist-bench"; d["case"]="read-avro"; print(json.dumps(d))' >> "$RAW"
  rm -rf "$SCRATCH"/*
done
python3 - "$RAW" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(pred, key="records_per_s"):
    xs = [r[key] for r in rows if pred(r)]
    return statistics.median(xs) if xs else float("nan")
base = lambda d: (lambda r: r["tool"] == "python-baseline" and r["direction"] == d)
gr = lambda c: (lambda r: r["tool"] == "grist-convert" and r.get("case") == c)
rd = lambda c: (lambda r: r["tool"] == "grist-bench" and r.get("case") == c)
print("| conversion (one core) | Python records/s | grist records/s | ratio | Python records/CPU-s | grist records/CPU-s | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for d, label in [("tfrecord-to-avro", "TFRecord → Avro (null)"), ("avro-to-tfrecord", "Avro (null) → TFRecord")]:
    p, g = med(base(d)), med(gr(d))
    pc, gc = med(base(d), "records_per_cpu_s"), med(gr(d), "records_per_cpu_s")
    print(f"| {label} | {p:,.0f} | {g:,.0f} | {g / p:.1f}x | {pc:,.0f} | {gc:,.0f} | {gc / pc:.1f}x |")
print()
print("| grist, one core | records/s | loader read-only records/s | ratio | records/CPU-s | loader records/CPU-s | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for c, label, read in [("tfrecord-to-avro", "TFRecord → Avro (null)", "read-tfrecord"),
                       ("tfrecord-to-ffrecord", "TFRecord → FFRecord", "read-tfrecord"),
                       ("tfrecord-to-ofrecord", "TFRecord → OFRecord", "read-tfrecord"),
                       ("tfrecord-to-tfrecord", "TFRecord → TFRecord", "read-tfrecord"),
                       ("avro-to-tfrecord", "Avro (null) → TFRecord", "read-avro")]:
    g, r = med(gr(c)), med(rd(read))
    gc, rc = med(gr(c), "records_per_cpu_s"), med(rd(read), "records_per_cpu_s")
    print(f"| {label} | {g:,.0f} | {r:,.0f} | {g / r:.0%} | {gc:,.0f} | {rc:,.0f} | {gc / rc:.0%} |")
print(f"\nruns: {len(rows)} lines in {sys.argv[1]}")
PY
