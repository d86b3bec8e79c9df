"""Rows per second into RabbitMQ and Cassandra through the gateway, beside plain client loops.

For each store, the real dispatcher (``gateway.appliers.Dispatcher``: decode, reduce, partition
over worker threads) applies the same log -- ``--transactions`` transactions of ``--rows`` rows
inserted each -- through the plugin's applier with 1, 4 and 8 threads and two batch sizes
(``max_batch``). In the same run, a plain client loop writes the same rows:

- RabbitMQ: an aio-pika loop publishing each message and awaiting its confirm before the next
  (per-message confirms, the simple correct way), beside the ``rabbit`` applier, which publishes
  a whole batch and awaits the confirms together;
- Cassandra: a loop of ``execute_concurrent_with_args`` over a prepared INSERT (concurrency
  64, chunks of 200 rows), i.e. the driver at full speed with no gateway in the way, beside the
  ``cassandra`` applier (target: >= 80% of the plain loop).

Every variant writes into fresh tables / a fresh queue and checks the row or message count.
Servers: ``GATEWAY_TEST_RABBITMQ_URL`` / ``GATEWAY_TEST_CASSANDRA`` if set, else the launchers
of deploy/local (started here, stopped at the end), exactly as the integration tests do.

Usage: python benchmarks/bench_stores.py [--transactions N] [--rows R] [--quick]
       [--only rabbit|cassandra]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gateway.appliers import Dispatcher, DispatcherConfig, MemorySource  # noqa: E402
from gateway.core.rowops import statement_ops  # noqa: E402
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2  # noqa: E402

FT = value_pb2.FieldType
KEY = [statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)]
FIELDS = [statement_pb2.FieldMetadata(name="amount", type=FT.FIELD_TYPE_INTEGER),
          statement_pb2.FieldMetadata(name="note", type=FT.FIELD_TYPE_VARCHAR)]
THREADS = (1, 4, 8)
BATCHES = (32, 200)


def workload(n_txns: int, rows: int, schema: str) -> list[transaction_pb2.Transaction]:
    """``n_txns`` transactions, each inserting ``rows`` new rows into ``schema.rows``."""
    out = []
    for t in range(n_txns):
        ins = statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name=schema, table_name="rows"),
            key_fields=KEY, fields=FIELDS)
        for r in range(rows):
            n = t * rows + r
            ins.records.add(key_values=[value_pb2.Value(int_value=n)],
                            after_values=[value_pb2.Value(int_value=n * 7),
                                          value_pb2.Value(string_value=f"note-{n:08d}")])
        out.append(transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=1, trans_id=t + 1), epoch=1, author=1,
            commit_timestamp_ns=1_700_000_000_000_000_000 + t, segment_id=1, end_segment=True,
            statements=[statement_pb2.Statement(insert=ins)]))
    return out


def through_gateway(applier: Any, txns: list, threads: int) -> tuple[int, float]:
    """Apply ``txns`` with the dispatcher; return (operations applied, seconds)."""
    with tempfile.TemporaryDirectory() as state:
        dispatcher = Dispatcher(applier, MemorySource(txns), state,
                                config=DispatcherConfig(threads=threads))
        start = time.perf_counter()
        dispatcher.run()
        seconds = time.perf_counter() - start
    if dispatcher.metrics.dead_letters:
        raise SystemExit(f"{applier.name}: {dispatcher.metrics.dead_letters} dead letters")
    return dispatcher.metrics.applied_ops, seconds


Row = tuple[str, str, int, float]


def _table(title: str, rows: list[Row], plain: float) -> None:
    print(f"\n{title}")
    print("| variant | rows | seconds | rows/s | vs plain |")
    print("|---|---|---|---|---|")
    for name, _, n, seconds in rows:
        rate = n / seconds
        print(f"| {name} | {n} | {seconds:.2f} | {rate:,.0f} | {rate / plain:.2f}x |")


# --- RabbitMQ -------------------------------------------------------------------------------


async def _declare(url: str, exchange: str, queue: str, purge: bool = False) -> int:
    import aio_pika

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        ex = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        q = await channel.declare_queue(queue, durable=True)
        await q.bind(ex, "#")
        count = q.declaration_result.message_count or 0
        if purge:
            await q.delete(if_unused=False, if_empty=False)
        return count


async def _plain_publish(url: str, exchange: str, bodies: list[tuple[str, bytes, str]]) -> None:
    import aio_pika

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        ex = await channel.get_exchange(exchange)
        for key, body, mid in bodies:
            await ex.publish(aio_pika.Message(body, message_id=mid,
                                              delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                             key, mandatory=True)


def bench_rabbit(url: str, txns: list, check: Callable[[bool, str], None]) -> None:
    from gateway_rabbit import RabbitApplier, encode, parse_options

    results: list[Row] = []
    ops = [op for i, t in enumerate(txns, 1) for op in statement_ops(t, i)]
    bodies = [(m.routing_key, m.body, m.message_id) for m in (encode(op) for op in ops)]
    tag = uuid.uuid4().hex[:8]
    asyncio.run(_declare(url, f"bench-plain-{tag}", f"bench-plain-q-{tag}"))
    start = time.perf_counter()
    asyncio.run(_plain_publish(url, f"bench-plain-{tag}", bodies))
    plain_s = time.perf_counter() - start
    got = asyncio.run(_declare(url, f"bench-plain-{tag}", f"bench-plain-q-{tag}", purge=True))
    check(got == len(bodies), f"plain loop: {got} of {len(bodies)} messages queued")
    plain = len(bodies) / plain_s
    results.append(("aio-pika loop, confirm per message", "", len(bodies), plain_s))
    for batch in BATCHES:
        for threads in THREADS:
            ex, q = f"bench-{tag}-{batch}-{threads}", f"bench-q-{tag}-{batch}-{threads}"
            asyncio.run(_declare(url, ex, q))
            applier = RabbitApplier(parse_options({"url": url, "exchange": ex,
                                                   "max_batch": str(batch)}))
            try:
                n, seconds = through_gateway(applier, txns, threads)
            finally:
                applier.close()
            got = asyncio.run(_declare(url, ex, q, purge=True))
            check(got == n == len(ops), f"rabbit x{threads}: {got} of {n} messages queued")
            results.append((f"rabbit applier x{threads}, max_batch {batch}", "", n, seconds))
    _table("RabbitMQ: persistent messages published and confirmed", results, plain)


# --- Cassandra ------------------------------------------------------------------------------


def bench_cassandra(contact: tuple[str, int], txns_of: Callable[[str], list],
                    check: Callable[[bool, str], None]) -> None:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    from gateway_cassandra import CassandraApplier, parse_options

    host, port = contact
    profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(
        DCAwareRoundRobinPolicy(local_dc="datacenter1")), request_timeout=30)
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    session = cluster.connect()
    results: list[Row] = []
    try:
        def count(ks: str) -> int:
            return session.execute(f'SELECT COUNT(*) FROM "{ks}"."rows"', timeout=120).one()[0]

        ks = f"bench_plain_{uuid.uuid4().hex[:6]}"
        txns = txns_of(ks)
        rows = [(r.key[0], r.values[0], r.values[1])
                for i, t in enumerate(txns, 1) for r in statement_ops(t, i)]
        session.execute(f"CREATE KEYSPACE \"{ks}\" WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f'CREATE TABLE "{ks}"."rows" (id bigint PRIMARY KEY, amount bigint, '
                        f'note text)')
        insert = session.prepare(f'INSERT INTO "{ks}"."rows" (id, amount, note) '
                                 f'VALUES (?, ?, ?)')
        for first in range(0, min(len(rows), 5000), 200):  # warm the JVM up: not timed
            execute_concurrent_with_args(session, insert, rows[first:first + 200],
                                         concurrency=64)
        session.execute(f'TRUNCATE "{ks}"."rows"', timeout=120)
        start = time.perf_counter()
        for first in range(0, len(rows), 200):
            execute_concurrent_with_args(session, insert, rows[first:first + 200],
                                         concurrency=64)
        plain_s = time.perf_counter() - start
        check(count(ks) == len(rows), "plain loop: row count")
        results.append(("execute_concurrent loop (prepared INSERT)", "", len(rows), plain_s))
        for batch in BATCHES:
            for threads in THREADS:
                ks = f"bench_gw_{uuid.uuid4().hex[:6]}"
                txns = txns_of(ks)
                applier = CassandraApplier(parse_options({
                    "contact": f"{host}:{port}", "max_batch": str(batch),
                    "status_keyspace": f"{ks}_status"}))
                try:
                    applier.apply(statement_ops(txns[0], 1))  # creates the table: not timed
                    n, seconds = through_gateway(applier, txns[1:], threads)
                finally:
                    applier.close()
                check(count(ks) == len(rows), f"cassandra x{threads}: row count")
                results.append((f"cassandra applier x{threads}, max_batch {batch}", "", n,
                                seconds))
    finally:
        cluster.shutdown()
    _table("Cassandra: rows written (LOCAL_QUORUM, RF 1, one local node)", results,
           len(rows) / plain_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10, help="rows inserted per transaction")
    parser.add_argument("--quick", action="store_true", help="200 transactions")
    parser.add_argument("--only", choices=("rabbit", "cassandra"))
    args = parser.parse_args()
    n = 200 if args.quick else args.transactions
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            failures.append(what)

    from tests.integration.servers import start_cassandra, start_rabbitmq

    print(f"workload: {n} transactions x {args.rows} inserted rows = {n * args.rows} rows")
    with tempfile.TemporaryDirectory() as data:
        if args.only in (None, "rabbit"):
            server = start_rabbitmq(Path(data) / "rabbitmq")
            try:
                bench_rabbit(server.url, workload(n, args.rows, "bench"), check)
            finally:
                server.close()
        if args.only in (None, "cassandra"):
            node = start_cassandra(Path(data) / "cassandra")
            try:
                bench_cassandra(node.contact, lambda ks: workload(n, args.rows, ks), check)
            finally:
                node.close()
    if failures:
        raise SystemExit("checks failed: " + "; ".join(failures))


if __name__ == "__main__":
    main()
