#!/usr/bin/env python3
"""Paired A/B of two conversion binaries on prod19, alternating A and B in
each round (the order flipped every round), and the median of the rounds'
B/A ratios: on a noisy machine the pairs say more than the medians of
each side.

  benches/convert/ab.py ROUNDS SRC TO BIN_A BIN_B [DATA]

SRC: tf | avro | ffr | of (DATA's prod19.tfrecord, prod19-null.avro,
ffr/part-00000.ffr, of/part-00000 with their specs, as
benches/convert/matrix.sh reads them); TO: the output format. Each run
converts the input given twice (400,000 records) with 2 threads and
--lossy; the binaries are `examples/convert` builds
(`cargo build --release -p grist-benches --examples`), or scripts that
run one with other arguments appended.
"""
import json
import shutil
import statistics
import subprocess
import sys
import tempfile

rounds, src, to, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
D = sys.argv[6] if len(sys.argv) > 6 else "/work/peers/data200k"
IN = {
    "tf": (f"{D}/prod19.tfrecord", f"{D}/prod19.spec.json"),
    "avro": (f"{D}/prod19-null.avro", f"{D}/prod19.atds.json"),
    "ffr": (f"{D}/ffr/part-00000.ffr", f"{D}/ffr/spec.json"),
    "of": (f"{D}/of/part-00000", f"{D}/of/spec.json"),
}
f, s = IN[src]
out = tempfile.mkdtemp() + "/cv"
res = ([], [])
for r in range(rounds):
    for side in (0, 1) if r % 2 == 0 else (1, 0):
        binary = (a, b)[side]
        shutil.rmtree(out, ignore_errors=True)
        cmd = [binary, "--lossy", "--spec", s, "--threads", "2", "--to", to, "-o", out, f, f]
        line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        d = json.loads(line.strip().splitlines()[-1])
        res[side].append((d["records_per_s"], d["records_per_cpu_s"]))
shutil.rmtree(out, ignore_errors=True)
ratios = [y[0] / x[0] for x, y in zip(*res)]
per_cpu = [y[1] / x[1] for x, y in zip(*res)]
for name, runs in zip(("A " + a, "B " + b), res):
    print(name, "records/s median", int(statistics.median(x[0] for x in runs)),
          "records/CPU-s median", int(statistics.median(x[1] for x in runs)))
print(f"B/A paired median: records/s {statistics.median(ratios):.3f}, "
      f"per CPU-s {statistics.median(per_cpu):.3f}; rounds {[round(x, 2) for x in ratios]}")
