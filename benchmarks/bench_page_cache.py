"""What a log's pages cost the writer when they stay in the page cache, against giving them back.

    python3 benchmarks/bench_page_cache.py [--mib 256] [--rounds 2] [--dir DIR]

Writes ``--mib`` MiB, 1 MiB per ``write`` and an ``fdatasync`` after each (a Raft log's
pattern, group commits of 1 MiB), through the product's file layer (`OsFileSystem`) twice
per round, side by side:

- ``keep``: the synced pages stay cached (what a file does by default; the page cache grows
  by every byte written);
- ``drop``: ``WritableFile.drop_cache()`` after each sync (``POSIX_FADV_DONTNEED``: the
  pages go back to the free lists, and the next writes reuse them), what `SegmentedWal` and
  the LSM store's table writers do by default.

Before each pass it writes and syncs a 1 GiB file that it deletes after the pass: a level-0
merge's output, which takes the free pages the writers would otherwise reuse. It prints the
system CPU of the writing thread per MiB and the wall time, both ways, and their ratios. On a
virtual machine whose balloon reports free memory to the host (``/sys/module/page_reporting``),
a page-cache page the kernel takes from memory the host has reclaimed costs a host fault on
first touch: there ``keep`` pays it for every MiB and ``drop`` mostly does not
(docs/benchmarks.md, "Synced pages given back"). On bare metal both should cost about the
same. Timings are informative only.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.core.fileio import OsFileSystem

MIB = 1 << 20


def _sys_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_stime


def fill(fs: OsFileSystem, path: str, mib: int = 1024) -> None:
    """Write and sync ``mib`` MiB to ``path``, kept cached: what a merge's output does to the
    page cache."""
    w = fs.create(path)
    block = os.urandom(MIB)
    for _ in range(mib):
        w.write(block)
    w.sync()
    w.close()


def write_log(fs: OsFileSystem, directory: str, mib: int, drop: bool) -> tuple[float, float]:
    """``mib`` MiB in 1 MiB writes, each synced (and dropped if ``drop``); returns (system CPU
    ms per MiB, wall ms per MiB)."""
    path = os.path.join(directory, "log")
    w = fs.create(path)
    block = os.urandom(MIB)
    s0, t0 = _sys_seconds(), time.perf_counter()
    for _ in range(mib):
        w.write(block)
        w.sync()
        if drop:
            w.drop_cache()
    s1, t1 = _sys_seconds(), time.perf_counter()
    w.close()
    fs.remove(path)
    return 1e3 * (s1 - s0) / mib, 1e3 * (t1 - t0) / mib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="MiB written per pass")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default=None, help="directory on the disk to test (default: a "
                    "temporary one)")
    args = ap.parse_args()
    if args.mib < 1 or args.rounds < 1:
        ap.error("--mib and --rounds must be at least 1")
    fs = OsFileSystem()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        rows = []
        for r in range(args.rounds):
            for mode in ("keep", "drop"):
                fill(fs, os.path.join(d, "merged"))
                cpu, wall = write_log(fs, d, args.mib, mode == "drop")
                fs.remove(os.path.join(d, "merged"))
                time.sleep(3.0)  # the freed pages go back to the host (where it takes them)
                rows.append((r + 1, mode, cpu, wall))
                print(f"round {r + 1} {mode}: {cpu:.2f} ms system CPU / MiB, "
                      f"{wall:.2f} ms wall / MiB", flush=True)
    print(f"\n| mode | system CPU ms / MiB | wall ms / MiB |   ({args.mib} MiB per pass, "
          f"load {os.getloadavg()[0]:.2f})")
    print("|---|---|---|")
    best = {}
    for mode in ("keep", "drop"):
        mine = [row for row in rows if row[1] == mode]
        best[mode] = (min(row[2] for row in mine), min(row[3] for row in mine))
        print(f"| {mode} | {' / '.join(f'{row[2]:.2f}' for row in mine)} | "
              f"{' / '.join(f'{row[3]:.2f}' for row in mine)} |")
    print(f"\ndrop / keep, best of {args.rounds}: system CPU "
          f"{best['drop'][0] / max(best['keep'][0], 1e-9):.2f}x, wall "
          f"{best['drop'][1] / max(best['keep'][1], 1e-9):.2f}x")


if __name__ == "__main__":
    main()
