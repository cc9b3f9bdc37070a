#!/usr/bin/env bash
# Side by side, in one run: grist vs tensorflow-io's ATDSDataset
# (AvroTensorDataset) on prod19 as Avro, codecs null and deflate, batch
# sizes 64, 256 and 1024, with fastavro + numpy as a reference column.
#
#   benches/peers/side_by_side_avro.sh DATA_DIR [ROUNDS] [SECONDS]
#
# Every reader is pinned to CPU 0 (`taskset -c 0`: "per core" means one
# core) and they alternate, round by round, over the same files, so that
# machine noise hits all alike. Each run reports records/s and records per
# CPU-second; the summary prints the medians and the ratios grist / ATDS.
#
# - ATDS: atds_bench.py, ATDSDataset(num_parallel_calls=1, shuffle off),
#   prefetch(1), TF thread pools of 1, features from prod19.atds.json.
# - grist: $GRIST_BENCH (default: the avro_file_bench example, which
#   prints `grist bench --json`'s keys; GRIST_BENCH="target/release/grist
#   bench" runs the CLI, which takes the same flags), one thread, same
#   feature list. Its CPU time comes from time(1) (whole process).
# - fastavro (reference, batch 1024 only): fastavro_bench.py, each pass
#   ending after FASTAVRO_RECORDS records (default 20000: a full pass takes
#   about a minute at its speed); FASTAVRO=0 leaves it out.
# - BATCHES: the batch sizes to run (default "64 256 1024").
#
# Needs: the peers venv (/work/peers/venv or $PY), DATA_DIR from
# gen_prod19.py (prod19-null.avro, prod19-deflate.avro, prod19.atds.json),
# `cargo build --release -p grist-benches --example avro_file_bench`.
# The raw JSON lines go to $OUT (default: a temporary file, named at the end).
set -euo pipefail
DATA=${1:?usage: side_by_side_avro.sh DATA_DIR [ROUNDS] [SECONDS]}
ROUNDS=${2:-3}
SECS=${3:-10}
PY=${PY:-/work/peers/venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
GRIST_BENCH=${GRIST_BENCH:-$HERE/../../target/release/examples/avro_file_bench}
FASTAVRO=${FASTAVRO:-1}
BATCHES=${BATCHES:-64 256 1024}
FASTAVRO_RECORDS=${FASTAVRO_RECORDS:-20000}
OUT=${OUT:-$(mktemp --suffix=.jsonl)}
SPEC=$DATA/prod19.atds.json
TIMES=$(mktemp)
trap 'rm -f "$TIMES"' EXIT

# Adds "peer", "codec" and "rpcpu" (records per CPU-second) to a result line.
tag() {
  python3 -c '
import json, sys
peer, codec, times = sys.argv[1:4]
d = json.loads(sys.stdin.read())
d["peer"], d["codec"] = peer, codec
if times != "-":
    u, s = open(times).read().split()[-2:]
    d["rpcpu"] = d["records"] / (float(u) + float(s))
else:
    d["rpcpu"] = d.get("records_per_cpu_s")
d["rps"] = d["records_per_s"]
print(json.dumps(d))' "$@"
}

echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg); rounds $ROUNDS, ${SECS}s per run; raw: $OUT" >&2
for round in $(seq "$ROUNDS"); do
  for codec in null deflate; do
    file=$DATA/prod19-$codec.avro
    for batch in $BATCHES; do
      taskset -c 0 "$PY" "$HERE/atds_bench.py" --spec "$SPEC" --batch-size "$batch" \
        --num-parallel-calls 1 --warmup-steps 10 --min-seconds "$SECS" --json "$file" 2>/dev/null \
        | tag atds "$codec" - >> "$OUT"
      # shellcheck disable=SC2086 # GRIST_BENCH may be "grist bench"
      /usr/bin/time -f '%U %S' -o "$TIMES" taskset -c 0 $GRIST_BENCH --spec "$SPEC" \
        --batch-size "$batch" --threads 1 --min-seconds "$SECS" --json "$file" \
        | tag grist "$codec" "$TIMES" >> "$OUT"
    done
    if [ "$FASTAVRO" != 0 ]; then
      taskset -c 0 "$PY" "$HERE/fastavro_bench.py" --spec "$SPEC" --batch-size 1024 \
        --max-records "$FASTAVRO_RECORDS" --min-seconds "$SECS" --json "$file" \
        | tag fastavro "$codec" - >> "$OUT"
    fi
    echo "# round $round $codec done, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(peer, codec, batch, key):
    xs = [r[key] for r in rows if r["peer"] == peer and r["codec"] == codec
          and r["batch_size"] == batch and r.get(key)]
    return statistics.median(xs) if xs else None
f = lambda x: f"{x:,.0f}" if x else "-"
r = lambda a, b: f"{a / b:.1f}x" if a and b else "-"
print("| codec | batch | ATDS records/s | grist records/s | ratio | ATDS records/CPU-s "
      "| grist records/CPU-s | ratio | fastavro records/s (ref) | grist / fastavro |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for codec in ("null", "deflate"):
    fa = med("fastavro", codec, 1024, "rps")
    for b in (64, 256, 1024):
        a, g = med("atds", codec, b, "rps"), med("grist", codec, b, "rps")
        ac, gc = med("atds", codec, b, "rpcpu"), med("grist", codec, b, "rpcpu")
        fcol = f(fa) if b == 1024 else ""
        fr = r(g, fa) if b == 1024 else ""
        print(f"| {codec} | {b} | {f(a)} | {f(g)} | {r(g, a)} | {f(ac)} | {f(gc)} | {r(gc, ac)} | {fcol} | {fr} |")
runs = {p: sum(1 for x in rows if x["peer"] == p) for p in ("atds", "grist", "fastavro")}
print(f"medians of {runs} runs, all pinned to CPU 0 ({sys.argv[1]})")
PY
echo "# $(date -u +%FT%TZ) end, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
