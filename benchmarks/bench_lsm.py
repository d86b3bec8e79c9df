"""LSM store benchmark: Gateway's LSMStore beside rocksdict (RocksDB) and sqlite3.

Workload, identical for every engine (same seed, same bytes):

- ``puts``: N random 16-byte keys with 100-byte values, one call per put;
- ``settle``: wait for background work (LSMStore: flush + compaction; rocksdict: flush and
  ``compact_range``; sqlite3: commit) — reported, not part of any rate;
- ``gets``: N random point reads, half of existing keys, half of absent keys (hits and misses
  are timed separately; misses are what a bloom filter serves);
- ``scans``: S range scans of 1000 consecutive keys from random existing start keys;
- ``reopened``: the engine is closed and opened again (tables re-read, caches cold, the OS page
  cache warm) and the same gets run again -- what a restarted node serves.

Each engine runs in its own subprocess so that peak RSS (``ru_maxrss``) is its own; the
subprocess's baseline RSS before the engine opens (test data generator only) is reported too.

Usage::

    python3 benchmarks/bench_lsm.py [--n 1000000] [--scans 2000] \
        [--engines gateway,rocksdict,sqlite3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

KEY = 16
VALUE = 100
SEED = 20240611


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Data:
    """Keys and values cut from seeded random buffers (no per-item objects kept alive)."""

    def __init__(self, n: int) -> None:
        rnd = random.Random(SEED)
        self.n = n
        self.keys = rnd.randbytes(KEY * n)  # key i = keys[16i : 16i+16]
        self.absent = rnd.randbytes(KEY * n)  # absent keys (collision chance ~ 2**-100)
        self.pool = rnd.randbytes(1 << 20)
        self.order = list(range(n))
        rnd.shuffle(self.order)
        self.hits = [rnd.randrange(n) for _ in range(n // 2)]
        self.misses = [rnd.randrange(n) for _ in range(n // 2)]

    def key(self, i: int) -> bytes:
        return self.keys[KEY * i : KEY * i + KEY]

    def value(self, i: int) -> bytes:
        off = (i * 97) % ((1 << 20) - VALUE)
        return self.pool[off : off + VALUE]


class Engine:
    """What the runner needs from an engine."""

    put: Callable[[bytes, bytes], None]
    get: Callable[[bytes], Any]

    def settle(self) -> None: ...

    def scan(self, start: bytes, count: int) -> int:
        raise NotImplementedError

    def close(self) -> None: ...


class GatewayEngine(Engine):
    def __init__(self, path: str) -> None:
        from gateway.core.lsm import LSMStore

        self.db = LSMStore(path)
        self.put = self.db.put
        self.get = self.db.get

    def settle(self) -> None:
        self.db.compact()

    def scan(self, start: bytes, count: int) -> int:
        n = 0
        for _ in islice(self.db.scan(start), count):
            n += 1
        return n

    def close(self) -> None:
        self.db.close()


class RocksEngine(Engine):
    def __init__(self, path: str) -> None:
        from rocksdict import Options, Rdict

        self.db = Rdict(path, Options(raw_mode=True))
        self.put = self.db.put
        self.get = self.db.get

    def settle(self) -> None:
        self.db.flush()
        self.db.compact_range(None, None)

    def scan(self, start: bytes, count: int) -> int:
        n = 0
        for _ in islice(self.db.items(from_key=start), count):
            n += 1
        return n

    def close(self) -> None:
        self.db.close()


class SqliteEngine(Engine):
    def __init__(self, path: str) -> None:
        import sqlite3

        self.db = sqlite3.connect(os.path.join(path, "kv.db"), isolation_level=None)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=normal")
        self.db.execute("create table if not exists kv (k blob primary key, v blob) without rowid")
        self.db.execute("begin")
        ins = "insert or replace into kv values (?, ?)"
        sel = "select v from kv where k = ?"
        ex = self.db.execute
        self.put = lambda k, v: ex(ins, (k, v))
        self.get = lambda k: ex(sel, (k,)).fetchone()

    def settle(self) -> None:
        self.db.execute("commit")

    def scan(self, start: bytes, count: int) -> int:
        cur = self.db.execute("select k, v from kv where k >= ? order by k limit ?", (start, count))
        n = 0
        for _ in cur:
            n += 1
        return n

    def close(self) -> None:
        self.db.close()


ENGINES = {"gateway": GatewayEngine, "rocksdict": RocksEngine, "sqlite3": SqliteEngine}


def _gets(name: str, get: Callable[[bytes], Any], data: Data) -> tuple[float, float]:
    """Seconds for the hits, then for the misses (each answer checked)."""
    key = data.key
    t = time.perf_counter()
    for i in data.hits:
        if get(key(i)) is None:
            raise AssertionError(f"{name}: key {i} missing")
    t_hit = time.perf_counter() - t
    absent = data.absent
    t = time.perf_counter()
    for i in data.misses:
        if get(absent[KEY * i : KEY * i + KEY]) is not None:
            raise AssertionError(f"{name}: absent key {i} found")
    return t_hit, time.perf_counter() - t


def run_one(name: str, n: int, scans: int) -> dict[str, Any]:
    data = Data(n)
    base_rss = _rss_kib()
    path = tempfile.mkdtemp(prefix=f"bench-lsm-{name}-")
    try:
        eng = ENGINES[name](path)
        put, key, value = eng.put, data.key, data.value
        t = time.perf_counter()
        for i in data.order:
            put(key(i), value(i))
        t_put = time.perf_counter() - t
        t = time.perf_counter()
        eng.settle()
        t_settle = time.perf_counter() - t
        t_hit, t_miss = _gets(name, eng.get, data)
        rnd = random.Random(SEED + 1)
        starts = [key(rnd.randrange(n)) for _ in range(scans)]
        t = time.perf_counter()
        got = 0
        for s in starts:
            got += eng.scan(s, 1000)
        t_scan = time.perf_counter() - t
        eng.close()
        eng = ENGINES[name](path)
        t_rhit, t_rmiss = _gets(name, eng.get, data)
        eng.close()
        disk = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {
        "engine": name,
        "puts_per_s": n / t_put,
        "settle_s": t_settle,
        "hits_per_s": len(data.hits) / t_hit,
        "misses_per_s": len(data.misses) / t_miss,
        "gets_per_s": (len(data.hits) + len(data.misses)) / (t_hit + t_miss),
        "scans_per_s": scans / t_scan,
        "reopened_hits_per_s": len(data.hits) / t_rhit,
        "reopened_misses_per_s": len(data.misses) / t_rmiss,
        "reopened_gets_per_s": (len(data.hits) + len(data.misses)) / (t_rhit + t_rmiss),
        "scan_keys": got / max(scans, 1),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "base_rss_mib": base_rss / 1024,
        "disk_mib": disk / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--scans", type=int, default=2000)
    ap.add_argument("--engines", default="gateway,rocksdict,sqlite3")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.n, args.scans)))
        return
    results = []
    for name in args.engines.split(","):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                name,
                "--n",
                str(args.n),
                "--scans",
                str(args.scans),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    ref = next((r for r in results if r["engine"] == "rocksdict"), results[0])
    rows = [
        ("puts/s", "puts_per_s"),
        ("gets/s (all)", "gets_per_s"),
        ("gets/s (hits)", "hits_per_s"),
        ("gets/s (misses)", "misses_per_s"),
        ("scans/s (1000 keys)", "scans_per_s"),
        ("reopened: gets/s (all)", "reopened_gets_per_s"),
        ("reopened: gets/s (hits)", "reopened_hits_per_s"),
        ("reopened: gets/s (misses)", "reopened_misses_per_s"),
        ("settle (s)", "settle_s"),
        ("peak RSS (MiB)", "peak_rss_mib"),
        ("baseline RSS (MiB)", "base_rss_mib"),
        ("disk (MiB)", "disk_mib"),
    ]
    names = [r["engine"] for r in results]
    print(f"N={args.n} puts/gets, {args.scans} scans; ratio = engine / {ref['engine']}")
    print(
        "| metric | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{x}/{ref['engine']}" for x in names if x != ref["engine"])
        + " |"
    )
    print("|---" * (1 + len(names) + len(names) - 1) + "|")
    for label, field in rows:
        cells = [f"{r[field]:,.0f}" if r[field] >= 100 else f"{r[field]:.1f}" for r in results]
        ratios = [f"{r[field] / ref[field]:.2f}" for r in results if r["engine"] != ref["engine"]]
        print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
