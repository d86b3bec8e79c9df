"""How long a schema change takes to reach the other cluster and each sink (issue 57: "how
many epochs it takes is a benchmark figure, target two").

A pair of one-node clusters as real processes (the harness's settings: epoch_ms = 100, fsync
on), cluster 2 (B) running the SQLite, Cassandra and RabbitMQ appliers against real servers
(started by the launchers of tests/integration/servers.py, or the ones
``GATEWAY_TEST_CASSANDRA`` / ``GATEWAY_TEST_RABBITMQ_URL`` name), ``--writers`` client
threads per cluster writing one-row transactions throughout. Cluster 1 (A) then makes
``--changes`` schema changes (ADD COLUMN, then DROP COLUMN, alternately), one at a time; for
each, from the moment ``ChangeSchema`` returned on A:

- **B**: until B's ``ShowTable`` has the new version;
- **sqlite**: until B's SQLite database has the column (or no longer has it);
- **cassandra**: until Cassandra's ``system_schema.columns`` does;
- **rabbit**: until the change's message is consumed from a queue bound to the exchange.

Each is printed in ms and in **epochs**: how many epochs A sealed between the commit and
the observation (A's Status ``epoch``), so 1 means "in the next epoch". Observations are
polled every ``--poll`` seconds, which bounds their resolution.

    PYTHONPATH=$PWD python3 benchmarks/bench_schema.py [--changes 10] [--writers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.clusters import MultiCluster, Topology, node_db  # noqa: E402
from tests.integration.servers import start_cassandra, start_rabbitmq  # noqa: E402
from tests.integration.test_schema_pair_sinks import (  # noqa: E402
    Load,
    _bind,
    configure_sinks,
    ddl,
)


def _epoch(mc: MultiCluster, cid: int) -> int:
    st = mc.status(cid)
    return int(st.epoch) if st is not None else -1


def _version(mc: MultiCluster, cid: int, table: str) -> int:
    with mc.client(cid, timeout=5) as c:
        return int(c.show_table(table).definition.version)


class SchemaMessages:
    """A consumer thread noting when each schema message of ``table`` arrives, by version."""

    def __init__(self, url: str, queue: str, table: str) -> None:
        self.url, self.queue, self.table = url, queue, table
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()

    async def _run(self) -> None:
        import aio_pika

        async with await aio_pika.connect(self.url) as conn:
            ch = await conn.channel()
            await ch.set_qos(prefetch_count=1000)
            q = await ch.declare_queue(self.queue, durable=True)
            while not self.stop.is_set():
                m = await q.get(fail=False)
                if m is None:
                    await asyncio.sleep(0.005)
                    continue
                if m.routing_key == f"{self.table}.schema":
                    self.seen[int(m.headers["x-gateway-schema-version"])] = time.monotonic()
                await m.ack()


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on a kill
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=10)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--poll", type=float, default=0.01)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-schema-"))
    rabbit = start_rabbitmq(tmp / "rabbitmq")
    cassandra = start_cassandra(tmp / "cassandra")
    session = cassandra.cluster().connect()
    tag = uuid.uuid4().hex[:8]
    ks, exchange, queue = f"b{tag}", f"gw-bench-{tag}", f"gw-bench-q-{tag}"
    table = f"{ks}.items"
    asyncio.run(_bind(rabbit.url, exchange, queue))
    mc = MultiCluster(tmp / "pair", Topology("pair", (1, 1)),
                      env={"GATEWAY_PLUGINS": "sqlite,cassandra,rabbit"})
    configure_sinks(mc, cassandra.contact, rabbit.url, exchange, ks)
    messages = SchemaMessages(rabbit.url, queue, table)
    figures: dict[str, list[tuple[float, int]]] = {k: [] for k in
                                                   ("B", "sqlite", "cassandra", "rabbit")}
    try:
        mc.start()
        ddl(mc, 1, f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40))")
        load = Load(mc, table, 0, writers=args.writers)
        time.sleep(3.0)
        db = node_db(mc.clusters[2], 1)
        for i in range(args.changes):
            col = f"c{i // 2}"
            adding = i % 2 == 0
            sql = (f"ALTER TABLE {table} ADD COLUMN {col} INT DEFAULT 0" if adding
                   else f"ALTER TABLE {table} DROP COLUMN {col}")
            e0 = _epoch(mc, 1)
            t0 = time.monotonic()
            ddl(mc, 1, sql)
            version = _version(mc, 1, table)

            def sqlite_has(col: str = col, adding: bool = adding) -> bool:
                try:
                    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                        cols = {r[1] for r in conn.execute(
                            "PRAGMA table_info(items)")}
                except sqlite3.Error:
                    return False
                return (col in cols) == adding

            def cql_has(col: str = col, adding: bool = adding) -> bool:
                rows = session.execute(
                    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
                    "AND table_name = 'items'", (ks,))
                return (col in {r.column_name for r in rows}) == adding

            probes: dict[str, Any] = {
                "B": lambda v=version: _version(mc, 2, table) >= v,
                "sqlite": sqlite_has, "cassandra": cql_has,
                "rabbit": lambda v=version: v in messages.seen}
            pending = dict(probes)
            deadline = t0 + args.timeout
            while pending and time.monotonic() < deadline:
                for name, probe in list(pending.items()):
                    if probe():
                        at = time.monotonic()
                        if name == "rabbit":
                            at = min(at, messages.seen[version])
                        figures[name].append(((at - t0) * 1000, _epoch(mc, 1) - e0))
                        del pending[name]
                time.sleep(args.poll)
            if pending:
                print(f"change {i} ({sql}): not seen within {args.timeout}s by "
                      f"{sorted(pending)}")
        rates = load.close()
    finally:
        messages.stop.set()
        mc.close()
        session.cluster.shutdown()
        cassandra.close()
        rabbit.close()
    print(f"schema changes: {args.changes}, epoch_ms 100, writers {args.writers} per cluster, "
          f"acknowledged tx/s: A {rates[1]:.0f}, B {rates[2]:.0f}")
    print(f"{'where':<10} {'n':>3} {'ms p50':>8} {'ms max':>8} {'epochs p50':>11} "
          f"{'epochs max':>11}")
    for name, xs in figures.items():
        if not xs:
            print(f"{name:<10} {0:>3}")
            continue
        ms = [x[0] for x in xs]
        ep = [x[1] for x in xs]
        print(f"{name:<10} {len(xs):>3} {statistics.median(ms):>8.0f} {max(ms):>8.0f} "
              f"{statistics.median(ep):>11.1f} {max(ep):>11}")
    with open("/proc/loadavg") as f:
        print(f"loadavg: {f.read().strip()}")


if __name__ == "__main__":
    main()
