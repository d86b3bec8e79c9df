"""Issue 57, "Tests", second bullet: a pair of one-node clusters of real processes writing on
both sides as fast as the writers go, with the SQLite, Cassandra and RabbitMQ appliers on
cluster 2 (B) against the real servers; cluster 1 (A) adds, renames and drops a column while
both write. Each change reaches B and every sink; B's writes made under the old version are
accepted and read under the new one; the stores are equal after each change, with no
exception row, no dead letter and every channel running; then conflicting changes on both
clusters at once end with one winner on both and the loser recorded.

What each sink holds is what its README documents (docs/appliers.md, "Schema events"):
SQLite alters its table (rows written before an ADD read its default); Cassandra has no
column defaults and renames only key columns, so the renamed column keeps its values and the
new name is a new column; RabbitMQ publishes each event as a message of its own, in log order
between the rows. The write rate reached is printed (``-s``), never asserted.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from gateway.cli.sql_ddl import parse_ddl
from gateway.client import GatewayClient, GatewayError, row_insert
from gateway.v1 import value_pb2
from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster, Topology, node_db
from tests.harness.fingerprints import exception_count, fingerprint, sqlite_image, store_image
from tests.integration.servers import CassandraServer, require_module

require_module("cassandra", "cassandra-driver")
require_module("gateway_cassandra", "-e plugins/gateway-cassandra")
require_module("gateway_rabbit", "-e plugins/gateway-rabbit")

from cassandra import InvalidRequest  # noqa: E402
from cassandra.cluster import NoHostAvailable  # noqa: E402
from gateway_rabbit import decode_body, decode_schema_body  # noqa: E402

pytestmark = pytest.mark.integration

STR_T = value_pb2.FieldType.FIELD_TYPE_VARCHAR
INT_T = value_pb2.FieldType.FIELD_TYPE_INTEGER
WAIT = 90.0
WRITERS = 3  # threads per cluster


class Load:
    """``WRITERS`` threads per cluster inserting rows with the VARCHAR columns of the
    definition they last read there (re-read when a write is refused: a column renamed or
    dropped); the others take their defaults. Counts what was acknowledged."""

    def __init__(self, mc: MultiCluster, table: str, base: int,
                 writers: int = WRITERS) -> None:
        self.mc, self.table = mc, table
        self.stop = threading.Event()
        self.acked = {1: 0, 2: 0}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(cid, base + cid * 1_000_000
                                                                 + k * 100_000), daemon=True)
                        for cid in (1, 2) for k in range(writers)]
        self.started = time.monotonic()
        for t in self.threads:
            t.start()

    def _run(self, cid: int, n: int) -> None:
        cols = self._strings(cid)
        with self.mc.client(cid, timeout=10) as c:
            while not self.stop.is_set():
                n += 1
                try:
                    c.write([row_insert(self.table, {"id": n},
                                        {x: f"{cid}-{n}" for x in cols})], timeout=5)
                    with self.lock:
                        self.acked[cid] += 1
                except GatewayError:
                    cols = self._strings(cid)

    def _strings(self, cid: int) -> list[str]:
        return [n for n, t in (columns(self.mc, cid, self.table) or {}).items() if t == STR_T]

    def close(self) -> dict[int, float]:
        """Stop; the acknowledged writes per second on each cluster."""
        self.stop.set()
        for t in self.threads:
            t.join(30)
        took = time.monotonic() - self.started
        assert all(self.acked.values()), f"a cluster had no write accepted: {self.acked}"
        return {cid: n / took for cid, n in self.acked.items()}


def configure_sinks(mc: MultiCluster, contact: tuple[str, int], url: str, exchange: str,
                    keyspace: str) -> None:
    """Before ``mc.start()``: the SQLite, Cassandra and RabbitMQ appliers on cluster 2 (B),
    only the SQLite applier on cluster 1 (A). ``mc`` runs with ``GATEWAY_PLUGINS`` naming
    the three plugins."""
    host, port = contact
    b = mc.root / "c2.toml"
    b.write_text(b.read_text() + "\n".join([
        "[appliers.sqlite]", "[appliers.cassandra]", f'contact = "{host}:{port}"',
        f'status_keyspace = "{keyspace}_st"',
        "[appliers.rabbit]", f'url = "{url}"', f'exchange = "{exchange}"', ""]))
    a = mc.root / "c1.toml"
    a.write_text('appliers = "sqlite"\n' + a.read_text())


def columns(mc: MultiCluster, cid: int, table: str) -> dict[str, int] | None:
    try:
        with GatewayClient(mc.apis(cid), timeout=5) as c:
            d = c.show_table(table).definition
    except GatewayError:
        return None
    return {col.name: col.type for col in d.columns} or None


def same_definition(mc: MultiCluster, table: str, want: dict[str, int]) -> None:
    wait_until(f"{table} as {sorted(want)} on both clusters",
               lambda: columns(mc, 1, table) == want and columns(mc, 2, table) == want,
               WAIT, 0.3, mc.describe)


def ddl(mc: MultiCluster, cid: int, sql: str) -> None:
    with mc.client(cid, timeout=60) as c:
        c.change_schema(parse_ddl(sql))


def converged(mc: MultiCluster, table: str) -> dict[Any, dict[str, Any]]:
    """Both clusters' rows of ``table``, once equal (their fingerprints too)."""
    got: dict[str, Any] = {}

    def same() -> bool:
        got["a"] = store_image(mc.apis(1)[0], [table])
        got["b"] = store_image(mc.apis(2)[0], [table])
        return bool(got["a"] == got["b"])

    wait_until("both clusters holding the same rows", same, WAIT, 0.5, mc.describe)
    assert fingerprint(got["a"]) == fingerprint(got["b"])
    return {k: dict(r.values) for k, r in got["a"][table].items()}


def sinks_caught_up(mc: MultiCluster, table: str, rows: dict[Any, dict[str, Any]],
                    session: Any, keyspace: str) -> dict[int, dict[str, Any]]:
    """Wait until B's SQLite database holds exactly ``rows`` and Cassandra every key of
    them; return Cassandra's rows by id."""
    got: dict[str, Any] = {}

    def sqlite_same() -> bool:
        got["sqlite"] = sqlite_image(node_db(mc.clusters[2], 1), {table: ["id"]}).get(table, {})
        return bool(got["sqlite"] == rows)

    wait_until("B's SQLite sink holding the store's rows", sqlite_same, WAIT, 0.5,
               lambda: f"{len(got.get('sqlite', {}))} rows vs {len(rows)}\n{mc.describe()}")
    want = {k[0] for k in rows}

    def cassandra_same() -> bool:
        try:
            got["cql"] = {r["id"]: r for r in (x._asdict() for x in session.execute(
                f'SELECT * FROM "{keyspace}"."items"'))}
        except (InvalidRequest, NoHostAvailable):  # the table not made (or agreed on) yet
            return False
        return set(got["cql"]) == want

    wait_until("Cassandra holding every row", cassandra_same, WAIT, 0.5,
               lambda: f"{len(got.get('cql', {}))} rows vs {len(want)}\n{mc.describe()}")
    return dict(got["cql"])


def cql_columns(session: Any, keyspace: str) -> set[str]:
    session.cluster.refresh_schema_metadata(max_schema_agreement_wait=20)
    return set(session.cluster.metadata.keyspaces[keyspace].tables["items"].columns)


def all_well(mc: MultiCluster, table: str, lost: int = 0) -> None:
    """No exception row, no dead letter, channels running, ``lost`` schema events lost."""
    for cid in (1, 2):
        st = mc.status(cid)
        assert st is not None
        for ch in st.channels:
            assert ch.state == "running", f"cluster {cid} channel {ch.name}: {ch.state}"
            assert not ch.conflicts.get("quarantined_trans_count"), ch
            assert ch.conflicts.get("schema_lost_count", 0) == lost, (cid, dict(ch.conflicts))
        assert [(a.name, a.dead_letters) for a in st.appliers if a.dead_letters] == []
        assert exception_count(store_image(mc.apis(cid)[0], [f"{table}$EX"]), cid) == 0
    st = mc.status(2)
    assert st is not None
    assert {a.name for a in st.appliers} >= {"sqlite", "cassandra", "rabbit"}, st.appliers


async def _bind(url: str, exchange: str, queue: str) -> None:
    async with await aio_pika.connect(url) as conn:
        ch = await conn.channel()
        ex = await ch.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        q = await ch.declare_queue(queue, durable=True)
        await q.bind(ex, "#")


async def _drain(url: str, queue: str, idle: float) -> list[Any]:
    out: list[Any] = []
    async with await aio_pika.connect(url) as conn:
        ch = await conn.channel()
        await ch.set_qos(prefetch_count=1000)
        q = await ch.declare_queue(queue, durable=True)
        async with q.iterator() as it:
            while True:
                try:
                    m = await asyncio.wait_for(it.__anext__(), idle)
                except (TimeoutError, StopAsyncIteration):
                    break
                out.append(m)
                await m.ack()
        await q.delete(if_unused=False, if_empty=False)
    return out


@pytest.fixture
def session(cassandra_server: CassandraServer) -> Iterator[Any]:
    cluster = cassandra_server.cluster()
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def test_a_pair_under_load_carries_column_changes_to_the_other_cluster_and_every_sink(
        tmp_path: Path, rabbitmq_url: str, cassandra_contact: tuple[str, int],
        session: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    ks = f"e{tag}"
    table = f"{ks}.items"
    exchange, queue = f"gw-e2e-{tag}", f"gw-e2e-q-{tag}"
    asyncio.run(_bind(rabbitmq_url, exchange, queue))
    mc = MultiCluster(tmp_path, Topology("pair", (1, 1)),
                      env={"GATEWAY_PLUGINS": "sqlite,cassandra,rabbit"})
    configure_sinks(mc, cassandra_contact, rabbitmq_url, exchange, ks)
    rates: list[dict[int, float]] = []
    try:
        mc.start()
        ddl(mc, 1, f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40))")
        same_definition(mc, table, {"id": INT_T, "name": STR_T})

        # ADD COLUMN on A while both write rows without it
        load = Load(mc, table, 0)
        time.sleep(2.0)
        ddl(mc, 1, f"ALTER TABLE {table} ADD COLUMN c INT DEFAULT 0")
        same_definition(mc, table, {"id": INT_T, "name": STR_T, "c": INT_T})
        time.sleep(1.0)
        rates.append(load.close())
        rows = converged(mc, table)
        assert rows and all(v["c"] == 0 for v in rows.values())
        assert any(k[0] >= 2_000_000 for k in rows), "no row of B's"
        cql = sinks_caught_up(mc, table, rows, session, ks)  # SQLite: exactly the rows
        assert cql_columns(session, ks) == {"id", "name", "c"}
        # CQL has no defaults: a row reads c = 0 only where its write carried it
        assert all(cql[k[0]]["name"] == v["name"] for k, v in rows.items())
        all_well(mc, table)

        # RENAME COLUMN: B writes the old name until it knows the new one
        load = Load(mc, table, 10_000)
        time.sleep(2.0)
        ddl(mc, 1, f"ALTER TABLE {table} RENAME COLUMN name TO title")
        same_definition(mc, table, {"id": INT_T, "title": STR_T, "c": INT_T})
        time.sleep(1.0)
        rates.append(load.close())
        rows = converged(mc, table)
        assert all(v.keys() == {"title", "c"} and v["title"] for v in rows.values())
        cql = sinks_caught_up(mc, table, rows, session, ks)
        # a regular column cannot be renamed in CQL (documented): the new name is a new
        # column, the old keeps the values written before the rename
        assert cql_columns(session, ks) == {"id", "name", "c", "title"}
        assert all(v["title"] in (cql[k[0]]["name"], cql[k[0]]["title"])
                   for k, v in rows.items())
        all_well(mc, table)

        # DROP COLUMN
        load = Load(mc, table, 20_000)
        time.sleep(2.0)
        ddl(mc, 1, f"ALTER TABLE {table} DROP COLUMN c")
        same_definition(mc, table, {"id": INT_T, "title": STR_T})
        time.sleep(1.0)
        rates.append(load.close())
        rows = converged(mc, table)
        assert all(v.keys() == {"title"} for v in rows.values())
        sinks_caught_up(mc, table, rows, session, ks)
        assert cql_columns(session, ks) == {"id", "name", "title"}
        all_well(mc, table)

        # conflicting changes on both clusters at once (the channels cut meanwhile)
        mc.partition(1)
        ddl(mc, 1, f"ALTER TABLE {table} ADD COLUMN d INT DEFAULT 1")
        ddl(mc, 2, f"ALTER TABLE {table} ADD COLUMN d VARCHAR(10) DEFAULT 'x'")
        mc.heal()
        same_definition(mc, table, {"id": INT_T, "title": STR_T, "d": INT_T})
        rows = converged(mc, table)
        assert all(v["d"] == 1 for v in rows.values())
        all_well(mc, table, lost=1)
        for cid in (1, 2):
            with mc.client(cid) as c:
                h = c.schema_history(table)
            assert [e.origin for e in h.events][-1] == "1"
            assert [e.origin for e in h.lost] == ["2"] and h.lost_causes[0], h
        sinks_caught_up(mc, table, rows, session, ks)
        # Cassandra made B's losing ``d`` (text) first and cannot change a column's type:
        # B's applier says so when the winner arrives, rather than pass over it
        wait_until("B's log naming the Cassandra column kept as text",
                   lambda: "column 'd' is text in" in mc.clusters[2].log_text(1), WAIT, 0.5,
                   lambda: mc.clusters[2].log_tail(1))

        # RabbitMQ: every change a message of its own, in B's log order; every row there
        received = asyncio.run(_drain(rabbitmq_url, queue, 3.0))
        changes = [decode_schema_body(m.body, m.content_type) for m in received
                   if m.routing_key == f"{table}.schema"]
        assert [(e.kind, e.version) for e in changes][:4] == [
            ("create", 1), ("add_column", 2), ("rename_column", 3), ("drop_column", 4)]
        published = {decode_body(m.body, m.content_type).row_id for m in received
                     if m.routing_key != f"{table}.schema"}
        assert {k[0] for k in rows} <= {rid[1][0] for rid in published}
    except AssertionError as e:
        raise AssertionError(f"{e}\n{mc.log_tails()}") from None
    finally:
        mc.close()
    print(f"\nacknowledged tx/s per phase (cluster: rate): "
          f"{[{c: round(r) for c, r in x.items()} for x in rates]}")
