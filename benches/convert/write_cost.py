"""What writing a file costs the machine, buffered against O_DIRECT.

Writes SIZE MiB (default 880, a 400,000-record prod19 TFRecord
conversion's output) in 4 MiB writes to a file in DIR, fsyncs it, and
prints the wall time, this process's user and system CPU, and the cores
the whole machine kept busy meanwhile (the kernel's writeback threads
included), for each mode given:

    python3 benches/convert/write_cost.py [--dir DIR] [--mib SIZE] buffered direct ...

A buffered write copies every byte into the page cache and the kernel
writes the pages back later; O_DIRECT hands the (aligned) buffer to the
device. grist's local writer goes direct past 16 MiB
(crates/io/src/direct.rs).
"""

import argparse
import mmap
import os
import resource
import time


def machine():
    """(total, idle) jiffies of all cores."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--mib", type=int, default=880)
    p.add_argument("modes", nargs="+", choices=["buffered", "direct"])
    a = p.parse_args()
    chunk = 4 << 20
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(chunk))
    cores = os.cpu_count() or 1
    for mode in a.modes:
        path = os.path.join(a.dir, f"write_cost.{os.getpid()}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if mode == "direct":
            flags |= os.O_DIRECT
        t0, r0, s0 = time.time(), resource.getrusage(resource.RUSAGE_SELF), machine()
        fd = os.open(path, flags, 0o644)
        try:
            for _ in range(a.mib * (1 << 20) // chunk):
                os.write(fd, buf)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(path)
        wall = time.time() - t0
        r1, s1 = resource.getrusage(resource.RUSAGE_SELF), machine()
        total, idle = s1[0] - s0[0], s1[1] - s0[1]
        busy = cores * (total - idle) / max(total, 1)
        print(
            f"{mode}: wall {wall:.2f} s, user {r1.ru_utime - r0.ru_utime:.2f} s, "
            f"system {r1.ru_stime - r0.ru_stime:.2f} s, machine busy {busy:.2f} cores "
            f"= {busy * wall:.2f} CPU-s"
        )


if __name__ == "__main__":
    main()
