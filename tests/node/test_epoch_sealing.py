"""Epochs along a cluster's log stay readable by its channels across leader changes: a new
leader seals the epoch its predecessor left open (else a channel reading the cluster holds
those transactions back until the new leader writes something), seals nothing when nothing
is open, and a leader whose proposals were dropped during a leadership transfer keeps its
epochs increasing.

Three in-process drivers (``tests/node/drivers.py``), the epochs read from their logs; and
``unsealed_epoch`` case by case on logs built by hand.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from gateway.client import row_insert
from gateway.core import messages
from gateway.core.messages import TypeTag
from gateway.node.base.errors import NodeStoppedError, NotLeaderError
from gateway.node.loop.epoch_seal import entry_epoch, unsealed_epoch
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.wire import decode_entry, encode_transaction_wire
from gateway.raft import NO_LIMIT, Entry, EntryType, MemoryStorage
from gateway.raft.log import RaftLog
from gateway.replication import EpochAssembler, SourceRecord
from gateway.v1 import epoch_pb2, replication_pb2

from .conftest import run, wait_for
from .drivers import Trio


def _records(trio: Trio, node: int) -> list[tuple[str, int, int]]:
    """``(kind, epoch, log index)`` of every transaction and marker in ``node``'s log."""
    st = trio.storages[node]
    out = []
    for e in st.entries(st.first_index(), st.last_index() + 1, NO_LIMIT):
        if e.type != EntryType.NORMAL or not e.data:
            continue
        if e.data[0] == TypeTag.TRANSACTION:
            out.append(("txn", entry_epoch(e), e.index))
        elif e.data[0] == TypeTag.EPOCH_MARKER:
            m = epoch_pb2.EpochMarker.FromString(e.data[1:])
            assert m.server_id == 7
            out.append(("marker", m.epoch, e.index))
    return out


def _data_at(st, index: int) -> bytes:
    return st.entries(index, index + 1, NO_LIMIT)[0].data


def _txn_at(st, index: int):
    """The transaction of the entry at ``index`` of storage ``st``."""
    txn = decode_entry(_data_at(st, index))[0]
    assert txn is not None
    return txn


def _marker_at(st, index: int) -> epoch_pb2.EpochMarker:
    """The epoch marker of the entry at ``index`` of storage ``st``."""
    return epoch_pb2.EpochMarker.FromString(_data_at(st, index)[1:])


def _sealed(records: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    """``(epoch, transactions)`` of the epochs a channel reading ``records`` gets, in order."""
    asm = EpochAssembler()
    out = []
    for kind, epoch, index in records:
        rec = SourceRecord(index, epoch, marker_epoch=epoch) if kind == "marker" else \
            SourceRecord(index, epoch, item=replication_pb2.ReplicatedItem())
        out += [(s.epoch, len(s.items)) for s in asm.add(rec)]
    return out


def test_a_new_leader_seals_the_epoch_its_predecessor_left_open(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path)  # epochs of 1e6 s: no leader closes its epoch on its own
        old = await trio.start()
        try:
            await trio.write(old, 0, 5)
            old_id = trio.id_of(old)
            recs = _records(trio, old_id)
            epoch = recs[0][1]
            assert [r[:2] for r in recs] == [("txn", epoch)] * 5
            assert _sealed(recs) == []  # the channel holds the epoch back

            trio.cut.add(old_id)
            await wait_for(lambda: trio.leader() is not None, what="a new leader")
            new = trio.leader()
            assert new is not None and new is not old
            new_id = trio.id_of(new)
            await wait_for(lambda: any(k == "marker" for k, _, _ in _records(trio, new_id))
                           and new.applied_index == trio.storages[new_id].last_index(),
                           what="the new leader's marker applied")
            recs = _records(trio, new_id)
            assert [r[:2] for r in recs] == [("txn", epoch)] * 5 + [("marker", epoch)]
            assert _sealed(recs) == [(epoch, 5)]
            # the marker names the epoch's last transaction, as its own leader's would
            st = trio.storages[new_id]
            trans_ids = [_txn_at(st, index).gtid.trans_id for _, _, index in recs[:5]]
            assert _marker_at(st, recs[5][2]).last_trans_id == max(trans_ids) > 0

            # nothing left open: the next leader proposes no marker of its own
            trio.cut.discard(old_id)
            await wait_for(lambda: old.applied_index >= new.applied_index,
                           what="the old leader to catch up")
            trio.cut.add(new_id)
            await wait_for(lambda: trio.leader() not in (None, new), what="a third leader")
            third = trio.leader()
            assert third is not None
            third_id = trio.id_of(third)
            await third.submit_write(WriteProposal([row_insert("t.s", {"id": 99}, {"v": "x"})]))
            recs = _records(trio, third_id)
            assert [k for k, _, _ in recs].count("marker") == 1
            assert recs[-1][0] == "txn" and recs[-1][1] > epoch
        finally:
            await trio.close()

    run(go())


def test_a_leader_stopping_gracefully_seals_its_open_epoch_after_what_it_accepted(tmp_path):
    """``seal_for_stop``: the writes already queued go into the log first, then the marker of
    their epoch, naming its last transaction; writes after it are refused (a record after its
    epoch's marker would be dropped by readers as already held); a second call seals
    nothing more, and a follower has nothing to seal."""
    async def go() -> None:
        trio = Trio(tmp_path)  # epochs of 1e6 s: the leader never closes its epoch on its own
        lead = await trio.start()
        try:
            lead_id = trio.id_of(lead)
            await trio.write(lead, 0, 3)
            queued = [lead.submit_write(WriteProposal(
                    [row_insert("t.s", {"id": i}, {"v": f"late {i}"})]))
                      for i in range(3, 8)]
            assert await lead.seal_for_stop(10.0)
            await asyncio.gather(*queued)  # accepted before the seal: all committed
            with pytest.raises(NodeStoppedError):
                await lead.submit_write(WriteProposal(
                        [row_insert("t.s", {"id": 9}, {"v": "too late"})]))
            recs = _records(trio, lead_id)
            epoch = recs[0][1]
            assert [r[:2] for r in recs] == [("txn", epoch)] * 8 + [("marker", epoch)]
            assert _sealed(recs) == [(epoch, 8)]
            st = trio.storages[lead_id]
            last = _txn_at(st, recs[7][2])
            assert _marker_at(st, recs[8][2]).last_trans_id == last.gtid.trans_id > 0
            assert lead.applied_index == st.last_index()

            assert await lead.seal_for_stop(10.0)  # nothing open any more
            assert [k for k, _, _ in _records(trio, lead_id)].count("marker") == 1
            follower = next(d for d in trio.drivers.values() if d is not lead)
            assert not await follower.seal_for_stop(1.0)
        finally:
            await trio.close()

    run(go())


def test_a_leader_whose_proposals_were_dropped_keeps_its_epochs_increasing(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path, epoch_s=0.02)
        lead = await trio.start()
        try:
            lead_id = trio.id_of(lead)
            await trio.write(lead, 0, 3)
            await asyncio.sleep(0.15)  # a few epochs later
            await trio.write(lead, 3, 3)
            target = next(i for i in trio.drivers if i != lead_id)
            trio.cut.add(target)  # the transfer cannot complete; it is abandoned later
            lead.control(lambda raw: raw.transfer_leader(target))
            with pytest.raises(NotLeaderError):
                await lead.submit_write(WriteProposal(
                        [row_insert("t.s", {"id": 50}, {"v": "dropped"})]))
            await wait_for(lambda: not lead.raw.raft.lead_transferee, what="the transfer "
                           "abandoned")
            assert lead.is_leader
            await trio.write(lead, 6, 3)
            epochs = [e for k, e, _ in _records(trio, lead_id) if k == "txn"]
            assert len(epochs) == 9 and epochs == sorted(epochs), epochs
        finally:
            await trio.close()

    run(go())


def test_a_marker_refused_during_a_leadership_transfer_is_proposed_again(tmp_path):
    """The epoch ends while a transfer is in progress (the marker is refused); the transfer
    is abandoned and the leader writes nothing more: the epoch is still sealed."""
    async def go() -> None:
        trio = Trio(tmp_path)  # epochs of 1e6 s until the test shortens them
        lead = await trio.start()
        try:
            lead_id = trio.id_of(lead)
            target = next(i for i in trio.drivers if i != lead_id)
            trio.cut.add(target)  # the transfer cannot complete
            await trio.write(lead, 0, 3)
            epoch = _records(trio, lead_id)[-1][1]
            lead.control(lambda raw: raw.transfer_leader(target))
            await wait_for(lambda: lead.raw.raft.lead_transferee == target, what="a transfer")
            ticks = lead.counters.readies
            lead.opts = dataclasses.replace(lead.opts, epoch_s=0.001)  # the epoch ends now
            await wait_for(lambda: lead.counters.readies > ticks + 1, what="cycles")
            assert lead.raw.raft.lead_transferee == target  # they ran during the transfer
            await wait_for(lambda: not lead.raw.raft.lead_transferee, what="the transfer "
                           "abandoned")
            assert lead.is_leader
            await wait_for(lambda: ("marker", epoch) in [r[:2] for r in _records(trio, lead_id)],
                           what="the marker of the epoch")
            assert _sealed(_records(trio, lead_id))[-1] == (epoch, 3)
        finally:
            await trio.close()

    run(go())


_E1, _E2 = (2 << 32) | 1, (2 << 32) | 2  # two epochs of term 2


def _txn(trans_id: int, epoch: int) -> bytes:
    return encode_transaction_wire(7, trans_id, epoch, 7, 1, 1, b"")


def _unit(epoch: int, derived: int = 0) -> bytes:
    return messages.pack(replication_pb2.ReplicatedEpoch(
        channel="c", source_id=9, local_epoch=epoch, derived_trans_id=derived,
        segment_id=1, end_segment=True))


def _marker(epoch: int) -> bytes:
    return messages.pack(epoch_pb2.EpochMarker(server_id=7, epoch=epoch))


@pytest.mark.parametrize(("payloads", "compact_to", "want"), [
    ([], 0, (0, 0)),                                        # a new cluster
    ([b"", b""], 0, (0, 0)),                                # no-ops only
    ([_txn(1, _E1), _txn(2, _E1)], 0, (_E1, 2)),            # an open epoch
    ([_txn(1, _E1), _marker(_E1), b""], 0, (0, 0)),         # sealed
    ([_txn(1, _E1), _marker(_E1), _txn(2, _E2)], 0, (_E2, 2)),
    ([_txn(1, _E1), _unit(_E1)], 0, (_E1, 1)),              # a unit that reserved nothing
    ([_txn(1, _E1), _unit(_E1, 5), b""], 0, (_E1, 5)),      # ... and one that did
    ([_txn(1, _E1), _unit(_E2)], 0, (_E2, 0)),              # alone in its epoch
    ([_txn(1, _E1), b"", b""], 3, ((3 << 32) - 1, 0)),      # records compacted away
    ([_txn(1, _E1), _txn(2, _E1), b""], 2, (_E1, 2)),       # compacted, record kept
])
def test_the_epoch_a_new_leader_seals_is_read_back_from_its_log(payloads, compact_to, want):
    st = MemoryStorage.bootstrap((1,))
    st.append([Entry(2, 2 + i, data=d) for i, d in enumerate(payloads)])
    if compact_to:
        st.create_snapshot(compact_to, None, b"")
        st.compact(compact_to)
    assert unsealed_epoch(RaftLog(st), 3) == want
