"""How long a flush stops the other Python threads: the flush's work in C without the GIL
beside the same work holding it, same run.

    python3 benchmarks/bench_flush_stall.py [--keys 160000] [--rounds 3]

A store is filled with ``--keys`` random 24-byte keys and 60-byte values (about one 32 MiB
memtable, the node's default) and flushed while a ticker thread -- standing in for a node's
event loop -- wakes every 1 ms. Printed per configuration: the flush's wall time and the
ticker's longest gap (the longest the flush kept the interpreter from it), best of
``--rounds``. Configurations: ``gil-free`` (the code as it is: the memtable's sort, the bloom
hashes and the data blocks made without the GIL), ``python-sort`` (the memtable sorted by
``sorted()``, which holds the GIL throughout: the sort before ``_memsort``). Then the sort alone:
``sorted()`` with a lookup per key (the specification) against ``_memsort.sorted_pairs``, for
keys inserted at random and in order. Timings are informative only.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.core.lsm import memtable
from gateway.core.lsm.store import LSMStore, WriteBatch


def _fill(store: LSMStore, keys: list[bytes], rng: random.Random) -> None:
    for i in range(0, len(keys), 1000):
        batch = WriteBatch()
        for k in keys[i:i + 1000]:
            batch.put(k, rng.randbytes(60))
        store.write_batch(batch)


def flush_stall(keys: list[bytes], python_sort: bool) -> tuple[float, float]:
    """(flush seconds, the ticker's longest gap in seconds) for one store of ``keys``."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="flush-stall-") as tmp:
        store = LSMStore(os.path.join(tmp, "db"), memtable_bytes=1 << 30)
        try:
            _fill(store, keys, rng)
            gaps: list[float] = []
            stop = threading.Event()

            def ticker() -> None:
                last = time.perf_counter()
                while not stop.is_set():
                    time.sleep(0.001)
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

            t = threading.Thread(target=ticker)
            t.start()
            time.sleep(0.05)
            sort = None if python_sort else memtable._sorted_pairs
            with mock.patch.object(memtable, "_sorted_pairs", sort):
                t0 = time.perf_counter()
                store.flush()
                took = time.perf_counter() - t0
            time.sleep(0.05)
            stop.set()
            t.join()
            return took, max(gaps)
        finally:
            store.close()


def sort_times(keys: list[bytes]) -> tuple[float, float]:
    """(seconds of sorted() + lookups, seconds of sorted_pairs) for a dict of ``keys``."""
    data = dict.fromkeys(keys, b"\x00v")
    t0 = time.perf_counter()
    ks = sorted(data)
    list(map(data.__getitem__, ks))
    t1 = time.perf_counter()
    assert memtable._sorted_pairs is not None
    memtable._sorted_pairs(data)
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=160_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if memtable._sorted_pairs is None:
        sys.exit("bench_flush_stall: gateway.core.lsm._memsort is not built "
                 "(python3 setup.py build_ext --inplace)")
    rng = random.Random(1)
    keys = list({rng.randbytes(24) for _ in range(args.keys)})
    load = os.getloadavg()
    print(f"{len(keys):,} keys; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| configuration | flush ms | longest stall of another thread, ms |")
    print("|---|---|---|")
    best = {}
    for _ in range(args.rounds):
        for name, py in (("gil-free", False), ("python-sort", True)):
            took, gap = flush_stall(keys, py)
            old = best.get(name)
            best[name] = (min(took, old[0]), min(gap, old[1])) if old else (took, gap)
    for name, (took, gap) in best.items():
        print(f"| {name} | {took * 1e3:.1f} | {gap * 1e3:.1f} |")
    print(f"stall python-sort / gil-free: {best['python-sort'][1] / best['gil-free'][1]:.1f}x")
    print("\n| keys inserted | sorted() + lookups ms | sorted_pairs ms | ratio |")
    print("|---|---|---|---|")
    for order, ks in (("at random", keys), ("in order", sorted(keys))):
        py, c = min(sort_times(ks) for _ in range(args.rounds))
        print(f"| {order} | {py * 1e3:.1f} | {c * 1e3:.1f} | {py / c:.2f}x |")


if __name__ == "__main__":
    main()
