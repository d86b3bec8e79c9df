"""Convergence under conflicts, model-based, with the real state machines: clusters in a pair
or a ring of three write concurrently to a few hot rows (inserts, updates, deletes; one or
two rows per transaction), under the epoch functions with cluster 1 PRIMARY and the others
SECONDARY. The channels are simulated the way the node runs them (``test_topologies``: reads
of the source's applied log, as the change feed serves it -- the outcome of judged epochs,
derived transactions included -- assembled epochs, units built by the leader's view with a
reserved GTID for what conflicts derive), with random delays, partial deliveries,
disconnections (replays) and leader changes (a new epoch term, the view rebuilt).

After quiescence: every cluster's rows are equal (the primary's choices everywhere); no
entry was refused; conflicts were met; and each cluster's sink -- a SQLite database fed the
cluster's committed transactions as the appliers receive them -- equals its store.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.appliers.sqlite import SqliteApplier
from gateway.conflict import ConflictRule, Role
from gateway.core import messages
from gateway.core.reducer import reduce_transaction
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.replication import EpochAssembler, ReplicationState, SourceRecord, build_unit
from gateway.replication import transactions as unit_transactions
from gateway.v1 import gtid_pb2, replication_pb2, statement_pb2, transaction_pb2, value_pb2

HOT = 4  # rows 0..3 of s.t
_INT, _STR = value_pb2.FIELD_TYPE_INTEGER, value_pb2.FIELD_TYPE_VARCHAR
_TABLE = statement_pb2.TableMetadata(schema_name="s", table_name="t")
_KEY = [statement_pb2.FieldMetadata(name="id", type=_INT)]
_V = [statement_pb2.FieldMetadata(name="v", type=_STR)]


@dataclass
class Rec:
    epoch: int
    txn: transaction_pb2.Transaction | None = None
    marker: int = 0
    unit: replication_pb2.ReplicatedEpoch | None = None


class Cluster:
    def __init__(self, root: Path, cid: int, function: str, clock: list[int]) -> None:
        self.cid = cid
        self.sm = StoreStateMachine(str(root / f"c{cid}"), cluster_id=cid)
        self.sm.conflict_rules = {"s.t": ConflictRule("s.t", function)}
        self.sm.conflict_role = Role.PRIMARY if cid == 1 else Role.SECONDARY
        self.log: list[Rec] = []
        self.applied = 0
        self.term, self.n = 1, 1
        self.epoch_txns = 0
        self.next_trans = 1
        self.view = ReplicationState(cid)
        self.clock = clock

    @property
    def epoch(self) -> int:
        return self.term << 32 | self.n

    def ts(self) -> int:
        self.clock[0] += 1
        return self.clock[0]

    def _entry(self, i: int) -> Entry | None:
        rec = self.log[i]
        if rec.txn is not None:
            return Entry(term=1, index=i + 1, type=EntryType.NORMAL,
                         data=encode_transaction(rec.txn, ""))
        if rec.unit is not None:
            return Entry(term=1, index=i + 1, type=EntryType.NORMAL,
                         data=messages.pack(rec.unit))
        return None

    def apply_some(self, n: int) -> None:
        batch = []
        while n and self.applied < len(self.log):
            e = self._entry(self.applied)
            self.applied += 1
            n -= 1
            if e is not None:
                batch.append(e)
        if batch:
            for a in self.sm.apply(batch):
                assert a.error is None, f"cluster {self.cid} entry {a.index}: {a.error}"

    def write(self, rng: random.Random) -> None:
        """A client transaction on one or two hot rows, against the rows as they stand (the
        leader validates against its applied state)."""
        self.apply_some(1 << 30)
        stmts = []
        for k in rng.sample(range(HOT), rng.choice([1, 1, 2])):
            kv = [value_pb2.Value(int_value=k)]
            v = [value_pb2.Value(string_value=f"{self.cid}:{self.clock[0]}")]
            if self.sm.get_row("s", "t", kv) is None:
                stmts.append(statement_pb2.Statement(insert=statement_pb2.InsertStatement(
                    table=_TABLE, key_fields=_KEY, fields=_V,
                    records=[statement_pb2.InsertRecord(key_values=kv, after_values=v)])))
            elif rng.random() < 0.7:
                stmts.append(statement_pb2.Statement(update=statement_pb2.UpdateStatement(
                    table=_TABLE, key_fields=_KEY, set_fields=_V,
                    records=[statement_pb2.UpdateRecord(key_values=kv, after_values=v)])))
            else:
                stmts.append(statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
                    table=_TABLE, key_fields=_KEY,
                    records=[statement_pb2.DeleteRecord(key_values=kv)])))
        ts = self.ts()
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=self.cid, trans_id=self.next_trans), epoch=self.epoch,
            author=self.cid, start_timestamp_ns=ts, commit_timestamp_ns=ts, segment_id=1,
            end_segment=True, statements=stmts)
        self.next_trans += 1
        self.log.append(Rec(self.epoch, txn=txn))
        self.epoch_txns += 1
        self.apply_some(1 << 30)

    def tick(self) -> None:
        if self.epoch_txns:
            self.log.append(Rec(self.epoch, marker=self.epoch))
        self.n += 1
        self.epoch_txns = 0

    def new_leader(self) -> None:
        """A leader change: a new term (larger epochs); the view is the applied state plus
        the units of the log tail."""
        view = self.sm.replication.copy()
        for rec in self.log[self.applied:]:
            if rec.unit is not None and view.refusal(rec.unit) is None:
                view.apply(rec.unit)
        self.view = view
        self.term += 1
        self.n = 1
        self.epoch_txns = 0

    def served(self, i: int, ignore: int = 0) -> list[replication_pb2.ReplicatedItem]:
        """What the change feed serves of log record ``i``: a local transaction, or a unit as
        the conflict rules left it (accepted transactions, then the derived one), without
        the transactions of origin ``ignore``."""
        rec = self.log[i]
        if rec.txn is not None:
            if rec.txn.gtid.server_id == ignore:
                return []
            return [replication_pb2.ReplicatedItem(transaction=rec.txn)]
        if rec.unit is None or self.sm.skipped(i + 1):
            return []
        unit = self.sm.unit_outcome(i + 1) or rec.unit
        return [it for it in unit.items if not (it.WhichOneof("item") == "transaction"
                                                and it.transaction.gtid.server_id == ignore)]


class Channel:
    def __init__(self, src: Cluster, dst: Cluster) -> None:
        self.src, self.dst = src, dst
        self.reconnect()

    def reconnect(self) -> None:
        held = self.dst.view.held(self.src.cid)
        self.asm = EpochAssembler(held)
        self.cursor = next((i for i, r in enumerate(self.src.log) if r.epoch > held),
                           len(self.src.log))

    def deliver(self, n: int) -> bool:
        moved = False
        src, dst = self.src, self.dst
        while n and self.cursor < src.applied:
            rec = src.log[self.cursor]
            if rec.marker:
                recs = [SourceRecord(self.cursor + 1, rec.epoch, marker_epoch=rec.marker)]
            else:
                recs = [SourceRecord(self.cursor + 1, rec.epoch, item=it)
                        for it in src.served(self.cursor, ignore=dst.cid)]
            for sr in recs:
                for sealed in self.asm.add(sr):
                    if not sealed.items:
                        continue
                    parts = build_unit(dst.view, f"from{src.cid}", src.cid, sealed, dst.epoch)
                    if parts and any(unit_transactions(p.items) for p in parts):
                        last = parts[-1]  # the GTID of what conflicts may derive
                        last.derived_trans_id = dst.next_trans
                        last.derived_commit_ts = dst.ts()
                        dst.next_trans += 1
                        dst.epoch_txns += 1
                    for p in parts:
                        dst.log.append(Rec(dst.epoch, unit=p))
            self.cursor += 1
            n -= 1
            moved = True
        return moved


def _rows(c: Cluster) -> dict[int, str]:
    return {r.key_values[0].int_value: r.values[0].string_value
            for r in c.sm.scan_rows("s", "t", [], [])}


def _sink(c: Cluster, path: Path) -> dict[int, str]:
    """A SQLite database fed the cluster's committed transactions as the appliers get them."""
    sink = SqliteApplier(path)
    try:
        for i in range(c.applied):
            for it in c.served(i):
                if it.WhichOneof("item") == "transaction":
                    ops = reduce_transaction(it.transaction, i + 1)
                    if ops:
                        sink.apply(ops)
        try:
            return {r["id"]: r["v"] for r in sink.rows("t")}  # the applier names it t
        except sqlite3.OperationalError:  # no table: nothing was ever written
            return {}
    finally:
        sink.close()


def simulate(root: Path, seed: int, ring: bool, function: str) -> int:
    rng = random.Random(seed)
    clock = [0]
    ids = [1, 2, 3] if ring else [1, 2]
    clusters = {i: Cluster(root, i, function, clock) for i in ids}
    links = [(1, 2), (2, 3), (3, 1)] if ring else [(1, 2), (2, 1)]
    channels = [Channel(clusters[s], clusters[d]) for s, d in links]
    for _ in range(rng.randint(150, 300)):
        r = rng.random()
        c = clusters[rng.choice(ids)]
        if r < 0.25:
            c.write(rng)
        elif r < 0.4:
            c.tick()
        elif r < 0.7:
            rng.choice(channels).deliver(rng.randint(1, 6))
        elif r < 0.9:
            c.apply_some(rng.randint(1, 5))
        elif r < 0.96:
            rng.choice(channels).reconnect()
        else:
            c.new_leader()
            for ch in channels:
                if ch.dst is c:
                    ch.reconnect()
    for _ in range(300):  # quiesce
        moved = False
        for c in clusters.values():
            c.tick()
            before = c.applied
            c.apply_some(1 << 30)
            moved = moved or c.applied != before
        for ch in channels:
            moved = ch.deliver(1 << 30) or moved
        if not moved:
            break
    else:
        raise AssertionError("did not quiesce")
    want = _rows(clusters[1])
    for c in clusters.values():
        assert _rows(c) == want, f"seed {seed}: cluster {c.cid} differs from the primary"
        assert _sink(c, root / f"sink{c.cid}.db") == _rows(c), \
            f"seed {seed}: cluster {c.cid}'s sink differs from its store"
        assert not any(c.sm.skipped(i + 1) for i in range(c.applied)), "an entry was refused"
    # the primary's counters add up to the exception rows it recorded (every cluster holds them)
    got: dict[str, int] = {}
    for ch in clusters[1].sm.conflict_counters.values():
        for k, v in ch.items():
            got[k] = got.get(k, 0) + v
    conflicts = sum(v for k, v in got.items() if k.startswith("conflict_fn_"))
    recorded = [r for r in clusters[1].sm.scan_rows("s", "t$EX", [], [])
                if r.key_values[0].uint_value == 1]
    trans_only = got.get("trans_row_reject_count", 0) - got.get("trans_row_conflict_count", 0)
    assert len(recorded) == conflicts + trans_only, (seed, got, len(recorded))
    for c in clusters.values():
        assert len(list(c.sm.scan_rows("s", "t$EX", [], []))) == len(recorded)
    for c in clusters.values():
        c.sm.close()
    return conflicts


@pytest.mark.parametrize("function", ["NDB$EPOCH", "NDB$EPOCH2", "NDB$EPOCH_TRANS"])
@pytest.mark.parametrize("ring", [False, True], ids=["pair", "ring"])
def test_clusters_converge_on_the_primarys_choices_and_sinks_equal_stores(tmp_path, function,
                                                                          ring):
    met = 0
    for seed in range(8):
        met += simulate(tmp_path / f"s{seed}", seed * 7 + ring, ring, function)
    assert met > 0, "no conflict met: the histories do not exercise realignment"
