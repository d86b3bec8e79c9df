"""API ``Scan`` calls during a write load: what each costs the writers, end to end.

A 3-node cluster of local processes (fsync on, the default SQLite applier unless
``--appliers none``), as in ``bench_node.py``. Two phases of ``--duration`` seconds each on
the same cluster: 8 clients writing 500-row transactions alone, then the same writers beside
one client calling ``Scan`` (stale, ``--limit`` rows from a random key of the table being
written) back to back. Printed: write rows/s of each phase and their ratio (the writers'
loss to the scans), scans/s and their p50/p99 latency.

Compare revisions with ``compare_revisions.py ... -- benchmarks/bench_scan_load.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_node as bn

from gateway.v1 import gateway_pb2, gateway_pb2_grpc, value_pb2


async def _phase(address: str, duration: float, limit: int, scans: bool
                 ) -> tuple[float, list[float]]:
    """Write rows/s of the 500-row writers, and the scan latencies (seconds) if ``scans``."""
    stop = asyncio.Event()
    latencies: list[float] = []

    async def scanner() -> None:
        ch = bn.channels(address, 1)[0]
        stub = gateway_pb2_grpc.GatewayStub(ch)
        rnd = random.Random(7)
        await asyncio.sleep(0.5)  # the writers' warm-up
        while not stop.is_set():
            start = f"t10-{rnd.randrange(8)}-{rnd.randrange(1000)}"
            req = gateway_pb2.ScanRequest(table="bench.kv", limit=limit,
                                          consistency=gateway_pb2.CONSISTENCY_STALE,
                                          start_key=[value_pb2.Value(string_value=start)])
            t0 = time.perf_counter()
            await stub.Scan(req, timeout=20)
            latencies.append(time.perf_counter() - t0)
        await ch.close()

    task = asyncio.create_task(scanner()) if scans else None
    r = await bn.bench_big(address, "10 B", bn.BIG_CLIENTS, duration)
    stop.set()
    if task is not None:
        await task
    return r.rows_per_s, latencies


async def _run(address: str, duration: float, limit: int) -> None:
    alone, _ = await _phase(address, duration, limit, False)
    beside, lat = await _phase(address, duration, limit, True)
    lat.sort()
    p = (lambda q: 1e3 * lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else \
        (lambda q: float("nan"))
    print("| phase | write rows/s | scans/s | scan p50 ms | scan p99 ms |\n|---|---|---|---|---|")
    print(f"| writes alone | {alone:,.0f} | - | - | - |")
    print(f"| writes beside scans | {beside:,.0f} | {len(lat) / duration:,.1f} | "
          f"{p(0.5):.2f} | {p(0.99):.2f} |")
    print(f"\nwrites beside scans / alone: {beside / alone:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--appliers", default="sqlite", choices=["sqlite", "none"])
    a = ap.parse_args()
    from tests.harness.cluster import ProcessCluster

    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env={
            "GATEWAY_FSYNC": "true", "GATEWAY_LOG_LEVEL": "warning",
            "GATEWAY_APPLIERS": "" if a.appliers == "none" else a.appliers})
        try:
            cluster.start()
            lead = cluster.wait_for_leader()
            print(f"3 nodes, appliers: {a.appliers}; {bn.BIG_CLIENTS} clients of "
                  f"{bn.BIG_ROWS}-row transactions; scans of {a.limit} rows\n")
            asyncio.run(_run(cluster.nodes[lead].api_address, a.duration, a.limit))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
