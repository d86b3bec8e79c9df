"""How long after its acknowledgement a write is in every node's embedded SQLite database.

    python benchmarks/bench_apply_lag.py [--writes 300] [--gap 0] [--background 0]

Starts a 3-node cluster of local processes (fsync on, the default configuration: the SQLite
applier on every node, as ``bench_node.py`` does), then one client writes one-row
transactions to the leader one at a time; after each acknowledgement it polls every node's
``DATA/sqlite/gateway.db`` (read-only connections, WAL mode: a reader sees each committed
applier transaction) until the row is there, and only then writes the next -- so every write
finds the appliers caught up and idle, the case where an applier that polls its log instead
of being woken waits longest; ``--gap S`` also sleeps S seconds before each write (an idle
cluster between writes). ``--background N`` adds N closed-loop writers of other keys
(a loaded cluster). Prints the acknowledgement latency and, per node, the lag from the
acknowledgement to the row being visible: p50, p90, p99, max. Compare trees with
``compare_revisions.py``. Timings are informative only.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_node as bn  # noqa: E402
import grpc  # noqa: E402

from gateway.v1 import gateway_pb2_grpc  # noqa: E402


def _percentiles(ms: list[float]) -> str:
    s = sorted(ms)

    def at(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))]

    return f"{at(0.5):.2f} | {at(0.9):.2f} | {at(0.99):.2f} | {s[-1]:.2f}"


def _table(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
                     "'%kv%'").fetchone()
    return row[0] if row else None


async def measure(address: str, dbs: list[Path], writes: int, gap: float,
                  background: int) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = gateway_pb2_grpc.GatewayStub(ch)
        value = bn.value_of(10)
        await stub.Write(bn.put_request("lag-first", value), timeout=10)
        conns: list[sqlite3.Connection] = []
        tables: list[str] = []
        deadline = time.monotonic() + 30
        for path in dbs:  # the table exists once the first write is applied
            while True:
                if path.exists():
                    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                         check_same_thread=False)
                    name = _table(db)
                    if name is not None:
                        conns.append(db)
                        tables.append(name)
                        break
                    db.close()
                if time.monotonic() > deadline:
                    sys.exit(f"{path}: the first write never reached SQLite")
                await asyncio.sleep(0.01)
        stop = asyncio.Event()

        async def load(c: int) -> None:
            seq = 0
            while not stop.is_set():
                await stub.Write(bn.put_request(f"bg-{c}-{seq}", value), timeout=10)
                seq += 1

        loaders = [asyncio.create_task(load(c)) for c in range(background)]
        acks: list[float] = []
        lags: list[list[float]] = [[] for _ in dbs]
        try:
            for i in range(writes):
                if gap:
                    await asyncio.sleep(gap)
                key = f"lag-{i}"
                t0 = time.perf_counter()
                await stub.Write(bn.put_request(key, value), timeout=10)
                t1 = time.perf_counter()
                acks.append((t1 - t0) * 1000)
                pending = set(range(len(dbs)))
                while pending:
                    for n in list(pending):
                        q = f'SELECT 1 FROM "{tables[n]}" WHERE k = ?'
                        if conns[n].execute(q, (key,)).fetchone() is not None:
                            lags[n].append((time.perf_counter() - t1) * 1000)
                            pending.discard(n)
                    if pending:
                        if time.perf_counter() - t1 > 10:
                            sys.exit(f"write {key} not in SQLite after 10 s on nodes "
                                     f"{sorted(pending)}")
                        await asyncio.sleep(0.0002)
        finally:
            stop.set()
            for t in loaders:
                t.cancel()
            await asyncio.gather(*loaders, return_exceptions=True)
            for db in conns:
                db.close()
    print(f"{writes} one-row writes, one at a time, {gap * 1000:.0f} ms apart, {background} "
          f"background writers")
    print("| figure | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    print(f"| write acknowledged (latency) | {_percentiles(acks)} |")
    for n, lag in enumerate(lags):
        role = "leader" if n == 0 else f"follower {n}"
        print(f"| in SQLite after the ack, {role} (latency) | {_percentiles(lag)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--writes", type=int, default=300)
    p.add_argument("--gap", type=float, default=0.0,
                   help="seconds to sleep before each write (0: the next once visible)")
    p.add_argument("--background", type=int, default=0,
                   help="closed-loop writers of other keys beside the measured one")
    args = p.parse_args()

    from tests.harness.cluster import ProcessCluster

    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp:
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=bn.gateway_env("sqlite"))
        try:
            address, _ = bn.start_gateway(cluster)
            lead = next(i for i, n in cluster.nodes.items() if n.api_address == address)
            order = sorted(cluster.nodes, key=lambda i: i != lead)
            dbs = [cluster.nodes[i].data_dir / "sqlite" / "gateway.db" for i in order]
            asyncio.run(measure(address, dbs, args.writes, args.gap, args.background))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
