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
the observation (A's Status ``epoch``, sampled every ``--poll`` seconds by a thread of its
own), so 1 means "in the next epoch". Each observer polls every ``--poll`` seconds on a
connection it keeps, in a thread of its own (a slow probe -- Cassandra's ``system_schema``
query -- never delays another's observation), and the RabbitMQ messages are pushed to a
consumer (``basic.consume``) that notes each schema message's arrival: a probe that opened a
connection per poll, or ran after the others, or fetched the row messages one ``basic.get`` at
a time, measured itself. The clock starts right before ``ChangeSchema`` is sent on an open
connection, so each figure includes A's commit. The plugins of this checkout are put first on
the node processes' path (an editable install elsewhere would otherwise be measured).

    PYTHONPATH=$PWD python3 benchmarks/bench_schema.py [--changes 10] [--writers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import shutil
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

PLUGINS = [str(ROOT / "plugins" / n) for n in ("gateway-cassandra", "gateway-rabbit")]
sys.path[1:1] = PLUGINS

from gateway.cli.sql_ddl import parse_ddl  # noqa: E402
from tests.harness.clusters import MultiCluster, Topology, node_db  # noqa: E402
from tests.integration.servers import start_cassandra, start_rabbitmq  # noqa: E402
from tests.integration.test_schema_pair_sinks import (  # noqa: E402
    Load,
    _bind,
    configure_sinks,
    ddl,
)


class EpochClock:
    """A thread sampling A's sealed epoch every ``poll`` seconds on one connection:
    ``at(t)`` is the epoch of the last sample taken at or before ``t`` (monotonic)."""

    def __init__(self, mc: MultiCluster, cid: int, poll: float) -> None:
        self.times: list[float] = []
        self.epochs: list[int] = []
        self.stop = threading.Event()
        self._client = mc.client(cid, timeout=5)
        self.thread = threading.Thread(target=self._run, args=(poll,), daemon=True)
        self.thread.start()

    def _run(self, poll: float) -> None:
        while not self.stop.is_set():
            try:
                e = int(self._client.status(timeout=5).epoch)
            except Exception:
                e = None
            if e is not None:
                self.times.append(time.monotonic())
                self.epochs.append(e)
            self.stop.wait(poll)

    def at(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        return self.epochs[max(i, 0)]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self._client.close()


class Observer:
    """A thread calling ``probe(version)`` every ``poll`` seconds until it is true for the
    version ``expect`` set (``None``: nothing to look for); ``seen[version]`` is when."""

    def __init__(self, probe: Any, poll: float) -> None:
        self.probe, self.poll = probe, poll
        self.expect: tuple[int, Any] | None = None
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            want = self.expect
            if want is not None and want[0] not in self.seen:
                try:
                    ok = self.probe(*want)
                except Exception:
                    ok = False
                if ok:
                    self.seen[want[0]] = time.monotonic()
            self.stop.wait(self.poll)


class SchemaMessages:
    """A push consumer noting when each schema message of ``table`` arrives, by version."""

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
            key = f"{self.table}.schema"

            async def on_message(m: Any) -> None:
                if m.routing_key == key:
                    self.seen.setdefault(int(m.headers["x-gateway-schema-version"]),
                                         time.monotonic())
                await m.ack()

            await q.consume(on_message)
            while not self.stop.is_set():
                await asyncio.sleep(0.05)


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
    path = os.pathsep.join([str(ROOT), *PLUGINS, os.environ.get("PYTHONPATH", "")])
    mc = MultiCluster(tmp / "pair", Topology("pair", (1, 1)),
                      env={"GATEWAY_PLUGINS": "sqlite,cassandra,rabbit",
                           "PYTHONPATH": path.rstrip(os.pathsep)})
    configure_sinks(mc, cassandra.contact, rabbit.url, exchange, ks)
    messages = SchemaMessages(rabbit.url, queue, table)
    figures: dict[str, list[tuple[float, int]]] = {k: [] for k in
                                                   ("B", "sqlite", "cassandra", "rabbit")}
    observers: list[Observer] = []
    clock: EpochClock | None = None
    try:
        mc.start()
        ddl(mc, 1, f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40))")
        load = Load(mc, table, 0, writers=args.writers)
        time.sleep(3.0)
        db = node_db(mc.clusters[2], 1)
        client_b = mc.client(2, timeout=5)

        def b_has(version: int, _col: str, _adding: bool) -> bool:
            return int(client_b.show_table(table).definition.version) >= version

        def sqlite_has(_version: int, col: str, adding: bool) -> bool:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                cols = {r[1] for r in conn.execute("PRAGMA table_info(items)")}
            return (col in cols) == adding

        def cql_has(_version: int, col: str, adding: bool) -> bool:
            rows = session.execute(
                "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
                "AND table_name = 'items'", (ks,))
            return (col in {r.column_name for r in rows}) == adding

        observers = [Observer(p, args.poll) for p in (b_has, sqlite_has, cql_has)]
        names = ("B", "sqlite", "cassandra")
        clock = EpochClock(mc, 1, args.poll)
        client_a = mc.client(1, timeout=60)
        for i in range(args.changes):
            col = f"c{i // 2}"
            adding = i % 2 == 0
            sql = (f"ALTER TABLE {table} ADD COLUMN {col} INT DEFAULT 0" if adding
                   else f"ALTER TABLE {table} DROP COLUMN {col}")
            request = parse_ddl(sql)
            t0 = time.monotonic()
            version = int(client_a.change_schema(request).version)
            for o in observers:
                o.expect = (version, col, adding)
            deadline = t0 + args.timeout
            seen = {n: o.seen for n, o in zip(names, observers, strict=True)}
            seen["rabbit"] = messages.seen
            while time.monotonic() < deadline and any(version not in s for s in seen.values()):
                time.sleep(0.05)
            for name, s in seen.items():
                if version in s:
                    at = s[version]
                    figures[name].append(((at - t0) * 1000, clock.at(at) - clock.at(t0)))
            missing = sorted(n for n, s in seen.items() if version not in s)
            if missing:
                print(f"change {i} ({sql}): not seen within {args.timeout}s by {missing}")
        client_a.close()
        client_b.close()
        rates = load.close()
    finally:
        messages.stop.set()
        for o in observers:
            o.stop.set()
        if clock is not None:
            clock.close()
        mc.close()
        session.cluster.shutdown()
        cassandra.close()
        rabbit.close()
        shutil.rmtree(tmp, ignore_errors=True)
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
