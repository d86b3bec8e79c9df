"""Range scans while a store is being written: Gateway's LSMStore beside rocksdict (RocksDB).

What a node does when an API ``Scan`` (or the state machine's own short scans) meets a write
load: batches of rows are written as the state machine writes them (``--batch`` rows of
16-byte random keys and 100-byte values per ``write_batch``), and after every ``--every``
batches one range scan of ``--span`` consecutive existing keys runs on the same thread. The
active memtable has the node's budget (32 MiB), so it grows large between flushes.

Reported per engine: write rows/s over the whole run (scans included, as a node pays them),
scan latency p50/p99, and for the LSMStore how many files it made (level-0 tables, their
compactions, memtable WALs): a scan that froze the active memtable made a table per scan.
Then the LSMStore/rocksdict ratios.

    python3 benchmarks/bench_scan_under_writes.py [--rows 400000] [--batch 500] [--every 4]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from typing import Any

SEED = 20261126


def _engine(name: str, path: str) -> tuple[Any, Any, Any, Any]:
    """(write_batch(pairs), scan(lo, n) -> list, stats() -> int flushes, close())."""
    if name == "gateway":
        from gateway.core.lsm import LSMStore

        s = LSMStore(path, memtable_bytes=32 << 20)

        def scan(lo: bytes, n: int) -> list[tuple[bytes, bytes]]:
            out = []
            for kv in s.scan(lo, None):
                out.append(kv)
                if len(out) == n:
                    break
            return out

        first = s._next_file

        def flushes() -> int:  # files numbered since open: tables (flushes, compactions), WALs
            return s._next_file - first

        return s.write_batch, scan, flushes, s.close
    import rocksdict

    db = rocksdict.Rdict(path)

    def write(pairs: list[tuple[bytes, bytes]]) -> None:
        wb = rocksdict.WriteBatch()
        for k, v in pairs:
            wb.put(k, v)
        db.write(wb)

    def scan_r(lo: bytes, n: int) -> list[tuple[bytes, bytes]]:
        out = []
        for kv in db.items(from_key=lo):
            out.append(kv)
            if len(out) == n:
                break
        return out

    return write, scan_r, lambda: 0, db.close


def run(name: str, rows: int, batch: int, every: int, span: int) -> dict[str, float]:
    rnd = random.Random(SEED)
    keys = [rnd.randbytes(16) for _ in range(rows)]
    value = rnd.randbytes(100)
    path = tempfile.mkdtemp(prefix=f"scanw-{name}-")
    try:
        write, scan, flushes, close = _engine(name, path)
        lat: list[float] = []
        t0 = time.perf_counter()
        for b, i in enumerate(range(0, rows, batch)):
            write([(k, value) for k in keys[i:i + batch]])
            if b % every == every - 1:
                lo = keys[rnd.randrange(i + batch)]
                s0 = time.perf_counter()
                got = scan(lo, span)
                lat.append(time.perf_counter() - s0)
                assert got and got[0][0] == lo
        secs = time.perf_counter() - t0
        made = flushes()
        close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    lat.sort()
    return {"rows/s": rows / secs, "scans": len(lat), "p50 ms": 1e3 * lat[len(lat) // 2],
            "p99 ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "flushes": made}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--every", type=int, default=4, help="batches between scans")
    ap.add_argument("--span", type=int, default=100, help="keys per scan")
    ap.add_argument("--engines", default="gateway,rocksdict")
    a = ap.parse_args()
    got = {e: run(e, a.rows, a.batch, a.every, a.span) for e in a.engines.split(",")}
    print(f"{a.rows:,} rows in batches of {a.batch}, a scan of {a.span} keys every "
          f"{a.every} batches\n")
    print("| engine | write rows/s | scans | scan p50 ms | scan p99 ms | files made (disk) |")
    print("|---|---|---|---|---|---|")
    for e, r in got.items():
        print(f"| {e} | {r['rows/s']:,.0f} | {r['scans']:.0f} | {r['p50 ms']:.3f} | "
              f"{r['p99 ms']:.3f} | {r['flushes']:.0f} |")
    if "gateway" in got and "rocksdict" in got:
        g, r = got["gateway"], got["rocksdict"]
        print(f"\ngateway/rocksdict: write rows/s {g['rows/s'] / r['rows/s']:.2f}x, "
              f"scan p50 {g['p50 ms'] / r['p50 ms']:.2f}x, p99 {g['p99 ms'] / r['p99 ms']:.2f}x")


if __name__ == "__main__":
    main()
