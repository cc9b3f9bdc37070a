#!/usr/bin/env python3
"""One pass of grist.Loader from Python, for instruction counts.

    valgrind --tool=cachegrind --cache-sim=no python benches/peers/python_icount.py \\
        FILE SPEC numpy|arrow|torch PASSES

Run it with PASSES=1 and PASSES=0 (imports and the loader's construction
only) and subtract: the difference is what one pass costs from Python,
to set against `valgrind ... grist bench --spec SPEC --batch-size 1024
--threads 2 --min-seconds 0 FILE` (one pass of the Rust loader). Batch
1024, 2 parse threads. Instruction counts do not depend on the machine's
load, so they compare runs made while other jobs run.

Side-by-side peer script for humans; nothing in CI depends on it.
"""

import sys

import grist

path, spec, form, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if form not in ("numpy", "arrow", "torch"):
    sys.exit("form: numpy, arrow or torch")
if form == "torch":
    # Imported in both runs: torch's import alone is billions of instructions.
    import grist.torch as gt
loader = grist.Loader(
    path, spec, batch_size=1024, threads=2, epochs=passes,
    output="arrow" if form == "arrow" else "numpy",
)
if passes:
    if form == "torch":
        for batch in loader:
            gt.to_torch(batch)
    else:
        for batch in loader:
            pass
