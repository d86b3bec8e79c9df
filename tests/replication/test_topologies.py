"""The channel's pure core in simulated topologies: pairs, rings of 3 to 5, full meshes.

Each simulated cluster has a log, an applied ``ReplicationState`` and a leader's view of it;
each channel reads its source's log the way the node's runner does (``ignore_origins`` =
the destination, epoch markers, apply-status rows), assembles sealed epochs, has the leader
build entries from its view (``build_unit``) and the state machine apply them later
(``refusal`` / ``apply``). Random interleavings of writes, epoch ticks, partial deliveries,
disconnections (the reader restarts from the destination's held epoch: replays), delayed
applies and leader changes (the view rebuilt from the applied state and the log tail).

After quiescence: every cluster holds every origin's transactions exactly once and in the
origin's order; no entry was refused; no cluster believes a peer applied more of its epochs
than the peer holds; in pairs and rings every cluster learns (reflection) that every peer
applied its last epoch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from gateway.replication import (
    EpochAssembler,
    ReplicationState,
    SourceRecord,
    build_unit,
    join_segments,
)
from gateway.v1 import epoch_pb2, gtid_pb2, replication_pb2, transaction_pb2


@dataclass
class Rec:
    epoch: int
    txn: transaction_pb2.Transaction | None = None
    marker: int = 0
    unit: replication_pb2.ReplicatedEpoch | None = None


@dataclass
class Cluster:
    cid: int
    log: list[Rec] = field(default_factory=list)
    applied: int = 0  # records of log applied to state
    epoch: int = 1
    epoch_txns: int = 0
    next_trans: int = 1
    refused: int = 0

    def __post_init__(self) -> None:
        self.state = ReplicationState(self.cid)
        self.view = ReplicationState(self.cid)

    def write(self) -> None:
        t = transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=self.cid,
                                                           trans_id=self.next_trans),
                                        epoch=self.epoch, author=self.cid)
        self.next_trans += 1
        self.log.append(Rec(self.epoch, txn=t))
        self.epoch_txns += 1

    def tick(self) -> None:
        if self.epoch_txns:
            self.log.append(Rec(self.epoch, marker=self.epoch))
        self.epoch += 1
        self.epoch_txns = 0

    def apply_some(self, n: int) -> None:
        while n and self.applied < len(self.log):
            rec = self.log[self.applied]
            self.applied += 1
            n -= 1
            if rec.unit is not None and rec.unit.end_segment:
                unit = _whole(self.log, self.applied - 1)
                if self.state.refusal(unit) is not None:
                    self.refused += 1
                else:
                    self.state.apply(unit)

    def new_leader(self) -> None:
        """A leader change: the view is the applied state plus the log tail."""
        view = self.state.copy()
        for i in range(self.applied, len(self.log)):
            rec = self.log[i]
            if rec.unit is not None and rec.unit.end_segment:
                unit = _whole(self.log, i)
                if view.refusal(unit) is None:
                    view.apply(unit)
        self.view = view
        self.epoch += 1  # a new term: a larger epoch
        self.epoch_txns = 0


def _whole(log: list[Rec], i: int) -> replication_pb2.ReplicatedEpoch:
    last = log[i].unit
    assert last is not None
    return join_segments([log[j].unit for j in range(i - last.segment_id + 1, i + 1)])


class Channel:
    def __init__(self, src: Cluster, dst: Cluster, max_bytes: int) -> None:
        self.src, self.dst, self.max_bytes = src, dst, max_bytes
        self.reconnect()

    def reconnect(self) -> None:
        held = self.dst.view.held(self.src.cid)
        self.asm = EpochAssembler(held)
        self.cursor = next((i for i, r in enumerate(self.src.log) if r.epoch > held),
                           len(self.src.log))

    def records(self, rec: Rec, index: int) -> list[SourceRecord]:
        d = self.dst.cid
        if rec.marker:
            return [SourceRecord(index, rec.epoch, marker_epoch=rec.marker)]
        if rec.txn is not None:
            if rec.txn.gtid.server_id == d:
                return []
            return [SourceRecord(index, rec.epoch,
                                 item=replication_pb2.ReplicatedItem(transaction=rec.txn))]
        assert rec.unit is not None
        if not rec.unit.end_segment:
            return []
        out = []
        for it in _whole(self.src.log, index).items:
            if it.WhichOneof("item") == "transaction" and it.transaction.gtid.server_id == d:
                continue
            out.append(SourceRecord(index, rec.epoch, item=it))
        return out

    def deliver(self, n: int) -> bool:
        moved = False
        # A source reader sees only what the source applied (the feed reads the applied log).
        while n and self.cursor < self.src.applied:
            rec = self.src.log[self.cursor]
            for sr in self.records(rec, self.cursor):
                for sealed in self.asm.add(sr):
                    if not sealed.items:
                        continue
                    parts = build_unit(self.dst.view, f"from{self.src.cid}", self.src.cid,
                                       sealed, self.dst.epoch, max_bytes=self.max_bytes)
                    for p in parts:
                        self.dst.log.append(Rec(self.dst.epoch, unit=p))
                    if any(it.WhichOneof("item") == "transaction"
                           for p in parts for it in p.items):
                        self.dst.epoch_txns += 1
                    moved = moved or bool(parts)
            self.cursor += 1
            n -= 1
            moved = True
        return moved


def _topology(kind: str, n: int) -> list[tuple[int, int]]:
    ids = list(range(1, n + 1))
    if kind == "pair":
        return [(1, 2), (2, 1)]
    if kind == "ring":
        return [(ids[i], ids[(i + 1) % n]) for i in range(n)]
    return [(a, b) for a in ids for b in ids if a != b]  # mesh


def _origin_sequences(c: Cluster) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, rec in enumerate(c.log[: c.applied]):
        if rec.txn is not None:
            out.setdefault(rec.txn.gtid.server_id, []).append(rec.txn.gtid.trans_id)
        elif rec.unit is not None and rec.unit.end_segment:
            for it in _whole(c.log, i).items:
                if it.WhichOneof("item") == "transaction":
                    g = it.transaction.gtid
                    out.setdefault(g.server_id, []).append(g.trans_id)
    return out


def simulate(seed: int, kind: str, n: int) -> None:
    rng = random.Random(seed)
    clusters = {i: Cluster(i) for i in range(1, n + 1)}
    max_bytes = rng.choice([64, 200, 4 << 20])  # small limits force segmented entries
    channels = [Channel(clusters[s], clusters[d], max_bytes) for s, d in _topology(kind, n)]
    for _ in range(rng.randint(50, 400)):
        r = rng.random()
        c = clusters[rng.randint(1, n)]
        if r < 0.3:
            c.write()
        elif r < 0.45:
            c.tick()
        elif r < 0.75:
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
    for _ in range(200):  # quiesce
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
    for c in clusters.values():
        c.apply_some(1 << 30)
    own = {cid: list(range(1, c.next_trans)) for cid, c in clusters.items()}
    for c in clusters.values():
        assert c.refused == 0, f"cluster {c.cid} refused {c.refused} entries"
        seqs = _origin_sequences(c)
        for origin, expected in own.items():
            assert seqs.get(origin, []) == expected, (
                f"seed {seed}: cluster {c.cid} holds {seqs.get(origin)} of origin {origin}")
        assert c.state.watermarks.get(c.cid, 0) == 0
        for p in clusters:
            if p == c.cid:
                continue
            # never claims more than the peer holds
            assert c.state.max_replicated_epoch(p) <= clusters[p].state.held(c.cid)
            if kind in ("pair", "ring"):
                last = max((r.epoch for r in c.log if r.txn is not None), default=0)
                assert c.state.max_replicated_epoch(p) >= last, (
                    f"seed {seed}: {c.cid} knows {p} applied up to "
                    f"{c.state.max_replicated_epoch(p)}, its last epoch is {last}")


@pytest.mark.parametrize("seed", range(40))
def test_a_pair_holds_every_origin_transaction_once_in_order(seed):
    simulate(seed, "pair", 2)


@pytest.mark.parametrize("seed", range(40))
def test_rings_of_three_to_five_hold_every_origin_transaction_once_in_order(seed):
    simulate(1000 + seed, "ring", 3 + seed % 3)


@pytest.mark.parametrize("seed", range(40))
def test_meshes_deduplicate_transactions_arriving_by_two_paths(seed):
    simulate(2000 + seed, "mesh", 3 + seed % 2)


def _row(sid, epoch, by):
    return replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
        server_id=sid, epoch=epoch, applied_by=by))


def _txn(sid, tid):
    return replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=sid, trans_id=tid), author=sid))


def _rows_of(parts):
    return [(i.apply_status.server_id, i.apply_status.epoch, i.apply_status.applied_by)
            if i.HasField("apply_status") else ("txn", i.transaction.gtid.trans_id)
            for p in parts for i in p.items]


def test_an_epoch_with_data_forwards_new_rows_derives_held_epochs_and_ends_with_the_position():
    from gateway.replication import SealedEpoch

    st = ReplicationState(3)
    items = [_txn(2, 1), _row(1, 7, 3), _row(1, 9, 2), _row(1, 9, 2)]
    parts = build_unit(st, "fromB", 2, SealedEpoch(5, items), 40)
    assert _rows_of(parts) == [("txn", 1), (1, 9, 2), (1, 9, 3), (2, 5, 3)]
    assert st.held(1) == 9 and st.held(2) == 5 and st.watermarks == {2: 1}
    assert build_unit(st, "fromB", 2, SealedEpoch(5, items), 41) == []  # held already


def test_an_epoch_without_new_data_is_written_only_for_its_reflection_rows():
    from gateway.replication import SealedEpoch

    st = ReplicationState(3)
    st.watermarks[2] = 4
    held_only = [_txn(2, 3), _row(1, 9, 2)]
    assert build_unit(st, "fromB", 2, SealedEpoch(5, held_only), 40) == []
    assert st.held(2) == 0  # nothing written: the position did not move
    reflected = [_txn(3, 8), _row(3, 12, 2), _row(1, 9, 2)]
    parts = build_unit(st, "fromB", 2, SealedEpoch(6, reflected), 40)
    assert _rows_of(parts) == [(3, 12, 2)]
    assert st.max_replicated_epoch(2) == 12 and st.held(2) == 6


def test_large_epochs_are_split_into_segments_applied_as_one():
    from gateway.replication import SealedEpoch

    st = ReplicationState(3)
    items = [_txn(2, i) for i in range(1, 40)]
    parts = build_unit(st, "fromB", 2, SealedEpoch(5, items), 40, max_bytes=100)
    assert len(parts) > 3
    assert [p.segment_id for p in parts] == list(range(1, len(parts) + 1))
    assert [p.end_segment for p in parts] == [False] * (len(parts) - 1) + [True]
    assert [t for t in _rows_of(parts) if t[0] == "txn"] == [("txn", i) for i in range(1, 40)]


def test_the_tombstone_floor_is_the_newest_epoch_every_other_peer_applied():
    st = ReplicationState(1)
    none = 1 << 64
    assert st.tombstone_floor() == (none, {})  # alone: no tombstone is needed
    st.raise_status(2, 1, 40)  # we hold cluster 2's epoch 40: 2 is a peer, has applied none
    # a one-way replica: only deletes not written by its source are kept
    assert st.tombstone_floor() == (0, {2: none})
    st.raise_status(1, 2, 17)  # 2 applied our epoch 17
    assert st.tombstone_floor() == (17, {2: none})
    st.raise_status(1, 3, 9)  # 3 (learned through 2's reflection) applied our epoch 9
    assert st.tombstone_floor() == (9, {3: 17})
    st.raise_status(1, 3, 30)
    assert st.tombstone_floor() == (17, {2: 30})
