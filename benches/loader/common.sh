# Shared by the loader benchmark loops in this folder (sourced, not run).
#
# GRIST: the grist binary (default: target/release/grist of this checkout;
# build it with `cargo build --release`). DATA: the folder of
# benches/peers/gen_prod19.py (prod19-null.avro, prod19-deflate.avro,
# prod19.tfrecord[.gz], prod19.spec.json, prod19.atds.json). GEN: a folder
# holding `grist gen prod19 --records 200000 --format ffrecord|ofrecord
# --out GEN/g-<format>` outputs (default: DATA/..).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GRIST=${GRIST:-$HERE/../../target/release/grist}
DATA=${DATA:-/work/peers/data}
GEN=${GEN:-$(dirname "$DATA")}

# The six prod19 inputs: name, spec, file (one triple per line).
prod19_inputs() {
    cat <<LIST
avro-null $DATA/prod19.atds.json $DATA/prod19-null.avro
avro-deflate $DATA/prod19.atds.json $DATA/prod19-deflate.avro
tfrecord $DATA/prod19.spec.json $DATA/prod19.tfrecord
tfrecord-gz $DATA/prod19.spec.json $DATA/prod19.tfrecord.gz
ffrecord $GEN/g-ffrecord/prod19.spec.json $GEN/g-ffrecord/prod19.ffr
ofrecord $GEN/g-ofrecord/prod19.spec.json $GEN/g-ofrecord/prod19.ofrecord
LIST
}

# The six prod19 inputs of `grist gen prod19 --records 200000` outputs in
# the folder $1 (tf/ with --gzip, avro-null/, avro-deflate/, ffr/, of/):
# name, spec, file (one triple per line). seam.sh and icount.sh read them.
gen_inputs() {
    cat <<LIST
avro-null $1/avro-null/prod19.avro.spec.json $1/avro-null/prod19.avro
avro-deflate $1/avro-deflate/prod19.avro.spec.json $1/avro-deflate/prod19.deflate.avro
tfrecord $1/tf/prod19.spec.json $1/tf/prod19.tfrecord
tfrecord-gz $1/tf/prod19.spec.json $1/tf/prod19.tfrecord.gz
ffrecord $1/ffr/prod19.spec.json $1/ffr/prod19.ffr
ofrecord $1/of/prod19.spec.json $1/of/prod19.ofrecord
LIST
}

# Runs `grist bench --json ARGS…` and prints "TAG records_per_s
# records_per_cpu_s threads_mean".
bench_line() {
    local tag=$1
    shift
    "$GRIST" bench --json "$@" | python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print('$tag', d['records_per_s'], d['records_per_cpu_s'], d['threads_mean'])"
}

# Reads FILE (or every file below it) once, so that the runs find it in
# the page cache: the host may have dropped it since it was last read (on
# the benchmark VM, the page cache of idle files shrinks by ~1 MB/s), and
# the first configuration would then pay for the disk.
warm() {
    find "$@" -type f -exec cat {} + > /dev/null
}

# Calls FUNC NAME SPEC FILE ROUNDS times for each prod19 input (the rounds
# of one input together, so that its configurations alternate).
each_input() {
    local rounds=$1 fn=$2 name spec file
    while read -r name spec file; do
        warm "$file"
        for _ in $(seq "$rounds"); do
            "$fn" "$name" "$spec" "$file"
        done
    done < <(prod19_inputs)
}
