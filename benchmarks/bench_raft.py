"""Raft core figures: committed entries/s of an in-process 3-node cluster with batching,
cost per entry of step+ready, and simulated seeds/s.

    python benchmarks/bench_raft.py [--entries 200000] [--batch 64] [--seeds 20]

The cluster runs in one thread with a perfect in-memory network and MemoryStorage: it measures
the protocol core only (no disk, no sockets). Timings are informative, never pass/fail.
"""

from __future__ import annotations

import argparse
import time

from gateway.raft import Config, MemoryStorage, RawNode, SplitMix64
from gateway.raft.sim import SimConfig, run_seed


def _cluster(n: int = 3) -> tuple[dict[int, RawNode], dict[int, MemoryStorage]]:
    ids = tuple(range(1, n + 1))
    storages = {i: MemoryStorage.bootstrap(ids) for i in ids}
    nodes = {
        i: RawNode(Config(id=i, storage=storages[i], rng=SplitMix64(i),
                          max_size_per_msg=1 << 20, max_inflight_msgs=256))
        for i in ids
    }
    return nodes, storages


def _pump(nodes: dict[int, RawNode], storages: dict[int, MemoryStorage]) -> tuple[int, float]:
    """Drive until quiet; returns (entries applied on node 1, seconds spent in step+ready)."""
    applied = 0
    core = 0.0
    clock = time.perf_counter
    busy = True
    while busy:
        busy = False
        for i, n in nodes.items():
            t0 = clock()
            if not n.has_ready():
                core += clock() - t0
                continue
            rd = n.ready()
            core += clock() - t0
            busy = True
            storages[i].persist(rd)
            if i == 1:
                applied += len(rd.committed_entries)
            t0 = clock()
            n.advance(rd)
            for m in rd.messages:
                nodes[m.to].step(m)
            core += clock() - t0
    return applied, core


def bench_throughput(total: int, batch: int) -> tuple[float, float]:
    nodes, storages = _cluster()
    nodes[1].campaign()
    _pump(nodes, storages)
    payload = [b"x" * 100] * batch
    applied = 0
    core = 0.0
    start = time.perf_counter()
    proposed = 0
    while proposed < total:
        # keep several batches in flight, as a busy leader does
        for _ in range(8):
            t0 = time.perf_counter()
            nodes[1].propose_batch(payload)
            core += time.perf_counter() - t0
            proposed += batch
        a, c = _pump(nodes, storages)
        applied += a
        core += c
    elapsed = time.perf_counter() - start
    rate = applied / elapsed
    per_entry_us = core / applied * 1e6
    return rate, per_entry_us


def bench_sim(seeds: int, nodes: int, steps: int) -> float:
    start = time.perf_counter()
    for s in range(1, seeds + 1):
        r = run_seed(SimConfig(s, nodes, steps))
        assert r.ok, r.error
    return seeds / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--entries", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seeds", type=int, default=20)
    args = p.parse_args()
    rate, per_entry = bench_throughput(args.entries, args.batch)
    rows = [
        (f"committed entries/s (3 nodes, 100 B, batch {args.batch})", f"{rate:,.0f}",
         ">= 100,000"),
        ("step+ready+advance cost per committed entry (all 3 nodes)", f"{per_entry:.2f} us", ""),
    ]
    for n in (3, 5):
        sps = bench_sim(args.seeds, n, 600)
        rows.append((f"simulated seeds/s ({n} nodes, 600 ticks, all faults)", f"{sps:.1f}", ""))
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}}  {'value':>14}  target")
    for name, val, target in rows:
        print(f"{name:<{w}}  {val:>14}  {target}")


if __name__ == "__main__":
    main()
