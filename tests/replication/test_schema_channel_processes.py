"""Schema changes across two clusters of real processes (docs/schema.md, "Across clusters"):
a pair of one-node clusters, the SQLite applier on, writing on both sides while cluster 1
adds, renames and drops a column; cluster 2's writes made under the old version are accepted
and read under the new one on both sides; the stores are equal after each change, with no
exception row, no dead letter, no quarantined transaction and every channel running. Then
conflicting changes made on both clusters while the channels are cut, and an undeclared
table first written with two shapes, end with one winner everywhere and the loser recorded.

Kept modest for CI: one node per cluster and a light write load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.cli.sql_ddl import parse_ddl
from gateway.client import GatewayClient, GatewayError, from_value, row_insert
from gateway.v1 import value_pb2
from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster, Topology, channel_name
from tests.harness.fingerprints import diff, exception_count, fingerprint, store_image

T = "shop.items"
INT_T = value_pb2.FieldType.FIELD_TYPE_INTEGER
STR_T = value_pb2.FieldType.FIELD_TYPE_VARCHAR
WAIT = 90.0


def ddl(mc: MultiCluster, cid: int, sql: str) -> None:
    with mc.client(cid, timeout=60) as c:
        c.change_schema(parse_ddl(sql))


def columns(mc: MultiCluster, cid: int, table: str = T) -> dict[str, int] | None:
    """The table's columns (name -> type) on cluster ``cid``, None while it has none."""
    try:
        with GatewayClient(mc.apis(cid), timeout=5) as c:
            d = c.show_table(table).definition
    except GatewayError:
        return None
    return {col.name: col.type for col in d.columns} or None


def default_of(mc: MultiCluster, cid: int, column: str) -> object:
    with GatewayClient(mc.apis(cid), timeout=5) as c:
        d = c.show_table(T).definition
    [col] = [x for x in d.columns if x.name == column]
    return from_value(col.default_value)


class Writer:
    """Inserts rows ``(base + n)`` into ``T`` on one cluster, naming the VARCHAR columns of
    the definition it last read there (re-read when a write is refused: a column renamed);
    the others take their defaults."""

    def __init__(self, mc: MultiCluster, cid: int, base: int) -> None:
        self.mc, self.cid, self.n = mc, cid, base
        self.stop = threading.Event()
        self.acked: list[int] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        cols = self._columns()
        with self.mc.client(self.cid, timeout=10) as c:
            while not self.stop.is_set():
                self.n += 1
                try:
                    c.write([row_insert(T, {"id": self.n},
                                        {n: f"{self.cid}-{self.n}" for n in cols})], timeout=5)
                    self.acked.append(self.n)
                except GatewayError:
                    cols = self._columns()
                time.sleep(0.02)

    def _columns(self) -> list[str]:
        return [n for n, t in (columns(self.mc, self.cid) or {}).items() if t == STR_T]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


@contextmanager
def writing(mc: MultiCluster) -> Iterator[tuple[Writer, Writer]]:
    w = (Writer(mc, 1, 1_000_000 + 10_000 * _PHASE[0]), Writer(mc, 2, 2_000_000 +
                                                               10_000 * _PHASE[0]))
    _PHASE[0] += 1
    try:
        time.sleep(1.0)
        yield w
        time.sleep(1.0)
    finally:
        for x in w:
            x.close()
    assert all(x.acked for x in w), "a writer had no write accepted"


_PHASE = [0]


def converged(mc: MultiCluster, tables: list[str]) -> dict:
    """Wait until both clusters hold the same rows of ``tables``; return the image."""
    got: dict = {}

    def same() -> bool:
        a = store_image(mc.apis(1)[0], tables)
        b = store_image(mc.apis(2)[0], tables)
        got.update(a=a, b=b)
        return a == b

    try:
        wait_until("both clusters holding the same rows", same, WAIT, 0.5)
    except Exception:
        raise AssertionError(f"stores differ:\n{diff(got['a'], got['b'])}\n"
                             f"{mc.describe()}") from None
    assert fingerprint(got["a"]) == fingerprint(got["b"])
    return got["a"]


def all_well(mc: MultiCluster, lost: int = 0) -> None:
    """No exception row, dead letter or quarantined transaction; channels running; ``lost``
    schema events recorded as lost per channel."""
    for cid in (1, 2):
        st = mc.status(cid)
        assert st is not None
        for ch in st.channels:
            assert ch.state == "running", f"cluster {cid} channel {ch.name}: {ch.state}"
            assert not ch.conflicts.get("quarantined_trans_count"), ch
            assert ch.conflicts.get("schema_lost_count", 0) == lost, (cid, dict(ch.conflicts))
        assert sum(a.dead_letters for a in st.appliers) == 0
        image = store_image(mc.apis(cid)[0], [f"{T}$EX"])
        assert exception_count(image, cid) == 0


def same_definition(mc: MultiCluster, want: dict[str, int], table: str = T) -> None:
    wait_until(f"{table} as {sorted(want)} on both clusters",
               lambda: columns(mc, 1, table) == want and columns(mc, 2, table) == want,
               WAIT, 0.3, mc.describe)


def test_column_changes_reach_the_other_cluster_and_old_version_writes_are_upcast(
        tmp_path: Path) -> None:
    mc = MultiCluster(tmp_path, Topology("pair", (1, 1)))
    try:
        mc.start()
        ddl(mc, 1, f"CREATE TABLE {T} (id INT PRIMARY KEY, name VARCHAR(40))")
        same_definition(mc, {"id": INT_T, "name": STR_T})

        with writing(mc):  # ADD COLUMN while both write rows without it
            ddl(mc, 1, f"ALTER TABLE {T} ADD COLUMN c INT DEFAULT 0")
            same_definition(mc, {"id": INT_T, "name": STR_T, "c": INT_T})
        image = converged(mc, [T])
        assert default_of(mc, 2, "c") == 0
        assert image[T] and all(r.value("c") == 0 for r in image[T].values())
        assert any(k[0] >= 2_000_000 for k in image[T])
        all_well(mc)

        with writing(mc):  # RENAME COLUMN: cluster 2 writes the old name until it knows
            ddl(mc, 1, f"ALTER TABLE {T} RENAME COLUMN name TO title")
            same_definition(mc, {"id": INT_T, "title": STR_T, "c": INT_T})
        image = converged(mc, [T])
        assert all(r.value("title") for r in image[T].values()), "a value lost its column"
        assert all(dict(r.values).keys() == {"title", "c"} for r in image[T].values())
        all_well(mc)

        with writing(mc):  # DROP COLUMN
            ddl(mc, 1, f"ALTER TABLE {T} DROP COLUMN c")
            same_definition(mc, {"id": INT_T, "title": STR_T})
        image = converged(mc, [T])
        assert all(dict(r.values).keys() == {"title"} for r in image[T].values())
        all_well(mc)

        # conflicting changes on both clusters at once (the channels cut meanwhile)
        mc.partition(1)
        ddl(mc, 1, f"ALTER TABLE {T} ADD COLUMN d INT DEFAULT 1")
        ddl(mc, 2, f"ALTER TABLE {T} ADD COLUMN d VARCHAR(10) DEFAULT 'x'")
        with mc.client(2) as c:
            c.write([row_insert(T, {"id": 3_000_001}, {"title": "t", "d": "on-2"})])
        mc.heal()
        # no PRIMARY: the smaller origin's change wins (docs/schema.md), on both clusters
        same_definition(mc, {"id": INT_T, "title": STR_T, "d": INT_T})
        image = converged(mc, [T])
        assert image[T][(3_000_001,)].value("d") == 1  # the losing type's value: default
        all_well(mc, lost=1)
        for cid in (1, 2):
            with mc.client(cid) as c:
                h = c.schema_history(T)
            assert [e.origin for e in h.events][-1] == "1"
            # the loser is listed with its cause on both clusters
            assert [e.origin for e in h.lost] == ["2"], h
            assert len(h.lost_causes) == 1 and h.lost_causes[0], h

        # an undeclared table first written with two shapes while cut off
        mc.partition(1)
        with mc.client(1) as c:
            c.write([row_insert("shop.u", {"id": 1}, {"x": 10})])
        with mc.client(2) as c:
            c.write([row_insert("shop.u", {"id": 2}, {"y": "b"})])
        mc.heal()
        same_definition(mc, {"id": INT_T, "x": INT_T}, "shop.u")
        image = converged(mc, ["shop.u"])
        assert {k: dict(r.values) for k, r in image["shop.u"].items()} == {
            (1,): {"x": 10}, (2,): {"x": None}}
        all_well(mc, lost=2)
        for cid in (1, 2):
            st = mc.status(cid)
            assert st is not None
            assert {ch.name for ch in st.channels} == {channel_name(3 - cid)}
    except AssertionError as e:
        raise AssertionError(f"{e}\n{mc.describe()}\n{mc.log_tails()}") from None
    finally:
        mc.close()
