#!/usr/bin/env bash
# Side by side, in one run, on the "nested" Avro dataset (gen_nested.py):
# grist's key-expression path against tensorflow-io's generic path
# (make_avro_record_dataset + parse_avro) and against arrow-rs's
# arrow-avro decoding the same file to Arrow.
#
#   benches/peers/side_by_side_nested.sh DATA_DIR [ROUNDS] [SECONDS]
#
# Every reader is pinned to CPU 0 (`taskset -c 0`) and they alternate,
# round by round. Cases, batch 1024, codec null:
# - scalar: the features tensorflow-io 0.37.1 parses reliably
#   (nested.scalar.json: paths through records, unions, a map key, an
#   array element by index): grist vs tfio_generic_bench.py;
# - all: every feature (nested.spec.json: also [*] paths, arrays of
#   records, an array in records in an array): grist vs arrow-avro, which
#   decodes every field of the file (it has no key-expression projection).
# Prints the medians of records/s and records per CPU-second and the
# ratios; the raw JSON lines go to $OUT (default: a temporary file).
#
# Needs: the peers venv (/work/peers/venv or $PY), DATA_DIR from
# gen_nested.py, `cargo build --release -p grist-cli`, and the arrow-avro
# program: `CARGO_TARGET_DIR=/work/peers/arrow-target cargo build --release
# --manifest-path benches/peers/arrow_avro/Cargo.toml` ($ARROW_AVRO).
set -euo pipefail
DATA=${1:?usage: side_by_side_nested.sh DATA_DIR [ROUNDS] [SECONDS]}
ROUNDS=${2:-3}
SECS=${3:-5}
PY=${PY:-/work/peers/venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
GRIST=${GRIST:-$HERE/../../target/release/grist}
ARROW_AVRO=${ARROW_AVRO:-/work/peers/arrow-target/release/arrow-avro-bench}
OUT=${OUT:-$(mktemp --suffix=.jsonl)}
F=$DATA/nested-null.avro
pin() { taskset -c 0 "$@"; }
tag() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); d["case"]=sys.argv[1]; d["who"]=sys.argv[2]; print(json.dumps(d))' "$@"; }
for round in $(seq "$ROUNDS"); do
  pin "$PY" "$HERE/tfio_generic_bench.py" --spec "$DATA/nested.scalar.json" --min-seconds "$SECS" --json "$F" 2>/dev/null \
    | tag scalar tfio >> "$OUT"
  pin "$GRIST" bench --spec "$DATA/nested.scalar.json" --threads 1 --min-seconds "$SECS" --json "$F" \
    | tag scalar grist >> "$OUT"
  pin "$ARROW_AVRO" --min-seconds "$SECS" "$F" | tag all arrow-avro >> "$OUT"
  pin "$GRIST" bench --spec "$DATA/nested.spec.json" --threads 1 --min-seconds "$SECS" --json "$F" \
    | tag all grist >> "$OUT"
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = {}
for case in ("scalar", "all"):
    for who in ("tfio", "arrow-avro", "grist"):
        got = [r for r in rows if r["case"] == case and r["who"] == who]
        if got:
            med[case, who] = (statistics.median(r["records_per_s"] for r in got),
                              statistics.median(r["records_per_cpu_s"] for r in got))
print("| case | reader | records/s | records/CPU-s |")
print("|---|---|---:|---:|")
for (case, who), (rs, rc) in med.items():
    print(f"| {case} | {who} | {rs:,.0f} | {rc:,.0f} |")
for case, peer in (("scalar", "tfio"), ("all", "arrow-avro")):
    if (case, peer) in med and (case, "grist") in med:
        g, p = med[case, "grist"], med[case, peer]
        print(f"{case}: grist / {peer} = {g[0] / p[0]:.1f}x records/s, {g[1] / p[1]:.2f}x per CPU-second")
print(f"raw: {sys.argv[1]}")
PY
