#!/usr/bin/env python3
"""Summarize peer benchmark JSON lines (from the *_bench.py --json runs) as a
Markdown table: one row per configuration, the runs' records/s listed, and the
best run (the least disturbed on a noisy machine) in its own columns.

    python3 benches/peers/summarize.py RESULTS.jsonl [...]

Standard library only. Side-by-side peer script for humans; nothing in CI
depends on it.
"""

import json
import statistics
import sys
from collections import OrderedDict


def key(r):
    peer = r["peer"]
    files = ",".join(r.get("files", []))
    threads = str(r.get("threads"))
    aff = r.get("cpu_affinity")
    if aff is not None and len(aff) < r.get("host_cpus", 0):
        threads += " (pinned to cpu " + ",".join(map(str, aff)) + ")"
    return (peer, files, threads, int(r["batch_size"]))


def main():
    rows = OrderedDict()
    for path in sys.argv[1:]:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line)
                rows.setdefault(key(r), []).append(r)
    print("| peer | file | threads | batch | records/s (runs) | median records/s | best records/s | MB/s (best) | median ms/step (best) | best records/CPU-s | s (best) |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (peer, files, threads, batch), runs in rows.items():
        best = max(runs, key=lambda r: r["records_per_s"] or 0)
        cpus = [r["records_per_cpu_s"] for r in runs if r.get("records_per_cpu_s")]
        cpu = max(cpus) if cpus else None
        print(
            f"| {peer} | {files} | {threads} | {batch} | "
            + ", ".join(f"{r['records_per_s']:,.0f}" for r in runs)
            + f" | {statistics.median(r['records_per_s'] for r in runs):,.0f}"
            + f" | {best['records_per_s']:,.0f} | {best['bytes_per_s'] / 1e6:,.1f} | {best['median_step_ms']:.2f} | "
            + (f"{cpu:,.0f}" if cpu else "n/a")
            + f" | {best['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
