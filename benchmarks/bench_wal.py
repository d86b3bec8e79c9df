#!/usr/bin/env python3
"""Segmented WAL: append throughput and append-to-durable latency per fsync policy.

One writer thread appends one entry per ``append`` call for ``--seconds`` under each policy
(``batch`` is the reference; ``always`` and ``never`` are its peers in the same run, on the
same file system), then ``sync()``s. Throughput counts that final sync. Latency is from the
start of an ``append`` call to the ``on_durable`` callback covering its entry (for ``always``
that is the ``append`` call itself; ``never`` only becomes durable at the final ``sync`` and
has no meaningful latency).

    python3 benchmarks/bench_wal.py [--seconds 2] [--size 200] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from gateway.core.fileio import OsFileSystem
from gateway.core.wal import FsyncPolicy, SegmentedWal, WalEntry, WalOptions


@dataclass
class Result:
    policy: str
    appends: int
    seconds: float
    bytes: int
    fsyncs: int
    p50_ms: float | None
    p99_ms: float | None

    @property
    def rate(self) -> float:
        return self.appends / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def run(policy: FsyncPolicy, seconds: float, size: int, root: str) -> Result:
    directory = tempfile.mkdtemp(prefix=f"bench-wal-{policy.value}-", dir=root)
    fs = OsFileSystem()
    events: list[tuple[int, float]] = []
    lock = threading.Lock()

    def on_durable(index: int) -> None:
        now = time.perf_counter()
        with lock:
            events.append((index, now))

    wal = SegmentedWal(directory, fs=fs, options=WalOptions(fsync=policy), on_durable=on_durable)
    payload = os.urandom(size)
    starts: list[float] = []
    clock = time.perf_counter
    t0 = clock()
    deadline = t0 + seconds
    i = 0
    while True:
        i += 1
        now = clock()
        starts.append(now)
        wal.append([WalEntry(i, 1, 0, payload)])
        if now > deadline:
            break
    wal.sync()
    elapsed = clock() - t0
    fsyncs = fs.stats.syncs
    written = fs.stats.bytes_written
    wal.close()
    shutil.rmtree(directory, ignore_errors=True)

    p50 = p99 = None
    if policy is not FsyncPolicy.NEVER:
        latencies: list[float] = []
        done = 0
        for index, t in events:
            for k in range(done, index):
                latencies.append(t - starts[k])
            done = max(done, index)
        qs = statistics.quantiles(latencies, n=100)
        p50, p99 = qs[49] * 1e3, qs[98] * 1e3
    return Result(policy.value, i, elapsed, written, fsyncs, p50, p99)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="run time per policy")
    parser.add_argument("--size", type=int, default=200, help="entry payload bytes")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to put the WALs")
    ns = parser.parse_args()

    results = {
        p: run(p, ns.seconds, ns.size, ns.dir)
        for p in (FsyncPolicy.BATCH, FsyncPolicy.ALWAYS, FsyncPolicy.NEVER)
    }
    ref = results[FsyncPolicy.BATCH]

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    print(f"WAL append, {ns.size} B entries, one entry per append, one writer thread, "
          f"{ns.seconds:g} s per policy, dir {ns.dir}")
    header = (f"{'fsync':<7} {'appends/s':>10} {'MB/s':>7} {'vs batch':>9} {'fsyncs':>7} "
              f"{'entries/fsync':>14} {'p50 ms':>8} {'p99 ms':>8}")
    print(header)
    print("-" * len(header))
    for r in results.values():
        per_sync = r.appends / r.fsyncs if r.fsyncs else float("inf")
        print(f"{r.policy:<7} {r.rate:>10,.0f} {r.mb_per_s:>7.2f} {r.rate / ref.rate:>8.2f}x "
              f"{r.fsyncs:>7} {per_sync:>14.1f} {ms(r.p50_ms):>8} {ms(r.p99_ms):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
