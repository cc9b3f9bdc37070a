#!/usr/bin/env bash
# Run every peer benchmark on the prod19 set once and append the JSON lines to
# a .jsonl file. This is a side-by-side peer script for humans; nothing in CI
# depends on it.
#
#   benches/peers/run_prod19_suite.sh DATA_DIR OUT.jsonl [PYTHON]
#
# Environment knobs: MIN_SECONDS (default 10), WARMUP (default 10 steps),
# SKIP_FASTAVRO=1, PINNED_ONLY=1 (only the one-thread configurations, each run
# under `taskset -c ${PIN_CPU:-0}`: a true one-core measurement; the JSON's
# cpu_affinity says which CPUs a run had).
set -euo pipefail
D=${1:?data dir}
OUT=${2:?output .jsonl}
PY=${3:-/work/peers/venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
MIN=${MIN_SECONDS:-10}
W=${WARMUP:-10}
mkdir -p "$(dirname "$OUT")"

PIN=()
if [ "${PINNED_ONLY:-0}" = 1 ]; then
    PIN=(taskset -c "${PIN_CPU:-0}")
fi
run() {
    echo "+ ${PIN[*]} $*" >&2
    "${PIN[@]}" "$PY" "$@" --json 2>/dev/null | tee -a "$OUT"
}

if [ "${PINNED_ONLY:-0}" = 1 ]; then T_LIST="1"; N_LIST="1"; else T_LIST="1 autotune"; N_LIST="1 autotune"; fi
for t in $T_LIST; do
    for b in 64 256 1024; do
        run "$HERE/tf_bench.py" --spec "$D/prod19.spec.json" --batch-size $b --threads $t \
            --warmup-steps $W --min-seconds $MIN "$D/prod19.tfrecord"
    done
    run "$HERE/tf_bench.py" --spec "$D/prod19.spec.json" --batch-size 256 --threads $t \
        --warmup-steps $W --min-seconds $MIN "$D/prod19.tfrecord.gz"
    for b in 64 256 1024; do
        run "$HERE/tf_bench.py" --framing-only --batch-size $b --threads $t \
            --warmup-steps $W --min-seconds $MIN "$D/prod19.tfrecord"
    done
done
for n in $N_LIST; do
    for f in null deflate; do
        for b in 64 256 1024; do
            run "$HERE/atds_bench.py" --spec "$D/prod19.atds.json" --batch-size $b --num-parallel-calls $n \
                --warmup-steps $W --min-seconds $MIN "$D/prod19-$f.avro"
        done
    done
done
if [ "${SKIP_FASTAVRO:-0}" != 1 ]; then
    for f in null deflate; do
        run "$HERE/fastavro_bench.py" --spec "$D/prod19.atds.json" --batch-size 1024 \
            --warmup-steps 2 --min-seconds $MIN "$D/prod19-$f.avro"
    done
fi
