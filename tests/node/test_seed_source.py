"""The source side of a seed (``seed_pins``, ``seed_source``): a pin is the store at an
epoch boundary of the log, whatever the apply batches and the writes after it, and the chunks
read from it resume exactly after a key."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core import messages
from gateway.core.lsm.errors import StoreClosedError
from gateway.node.replication import seed_source
from gateway.node.replication.seed_source import ChunkCursor, read_chunk, seed_end
from gateway.node.state import keys
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.v1 import (
    channel_pb2,
    epoch_pb2,
    gateway_pb2,
    gtid_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

E1 = (1 << 32) | 1
E2 = (1 << 32) | 2
_TABLE = statement_pb2.TableMetadata(schema_name="s", table_name="t")
_KEY = [statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)]
_V = [statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)]


def _insert(k: int, v: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_TABLE, key_fields=_KEY, fields=_V, records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=k)],
            after_values=[value_pb2.Value(string_value=v)])]))


def _update(k: int, v: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=_TABLE, key_fields=_KEY, set_fields=_V, records=[statement_pb2.UpdateRecord(
            key_values=[value_pb2.Value(int_value=k)],
            after_values=[value_pb2.Value(string_value=v)])]))


def _delete(k: int) -> statement_pb2.Statement:
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=_TABLE, key_fields=_KEY, records=[statement_pb2.DeleteRecord(
            key_values=[value_pb2.Value(int_value=k)])]))


def txn(tid: int, epoch: int, *stmts: statement_pb2.Statement, sid: int = 1) -> bytes:
    return encode_transaction(transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=sid, trans_id=tid), epoch=epoch, author=sid,
        start_timestamp_ns=1000 + tid, commit_timestamp_ns=1000 + tid, segment_id=1,
        end_segment=True, statements=list(stmts)))


def marker(epoch: int, last: int = 0) -> bytes:
    return messages.pack(epoch_pb2.EpochMarker(server_id=1, epoch=epoch, last_trans_id=last))


def pin(seed_id: int) -> bytes:
    return messages.pack(channel_pb2.SeedPin(seed_id=seed_id))


def apply(sm: StoreStateMachine, *payloads: bytes) -> None:
    start = sm.applied_index + 1
    for a in sm.apply([Entry(term=1, index=start + i, type=EntryType.NORMAL, data=p)
                       for i, p in enumerate(payloads)]):
        assert a.error is None, a.error


def all_rows(snap_chunks: list[channel_pb2.SeedChunk]) -> dict[bytes, channel_pb2.SeedRow]:
    return {r.key: r for c in snap_chunks for r in c.rows}


def read_all(sm: StoreStateMachine, seed_id: int, max_rows: int = 1000,
             after: bytes = b"") -> list[channel_pb2.SeedChunk]:
    p = sm.seed_pins.get(seed_id)
    assert p is not None and p.snapshot is not None
    out = []
    while True:
        c = read_chunk(p.snapshot, seed_id, after, len(out) + 1, max_rows=max_rows)
        if c is None:
            return out
        out.append(c)
        after = c.last_key


def values(chunks: list[channel_pb2.SeedChunk]) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for r in (r for c in chunks for r in c.rows if r.key.startswith(b"r")):
        if r.tombstone:
            out[-1] = None
            continue
        row = gateway_pb2.Row.FromString(r.value)
        out[row.key_values[0].int_value] = row.values[0].string_value
    return out


def test_a_pin_is_the_store_at_the_next_epoch_boundary_in_one_apply_batch(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a"), _insert(2, "b")))
    # one batch: the pin arms inside an open epoch, the epoch goes on, its marker seals it,
    # and writes of the next epoch follow in the same apply call
    apply(sm, pin(7), txn(2, E1, _insert(3, "c")), marker(E1, 2),
          txn(3, E2, _insert(4, "d"), _update(1, "a2")))
    p = sm.seed_pins.get(7)
    assert p is not None and p.snapshot is not None
    assert p.epoch == E1
    assert values(read_all(sm, 7)) == {1: "a", 2: "b", 3: "c"}
    # the live store moved on
    assert sm.get_row("s", "t", [value_pb2.Value(int_value=4)]) is not None
    apply(sm, txn(4, E2, _update(2, "b2")), marker(E2, 4))
    assert values(read_all(sm, 7)) == {1: "a", 2: "b", 3: "c"}
    sm.close()


def test_a_pin_after_a_sealed_epoch_is_taken_at_once(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a")), marker(E1, 1))
    apply(sm, pin(9))
    p = sm.seed_pins.get(9)
    assert p is not None and p.snapshot is not None and p.epoch == E1
    apply(sm, txn(2, E2, _insert(2, "b")))
    assert values(read_all(sm, 9)) == {1: "a"}
    sm.close()


def test_the_seal_state_survives_a_restart(tmp_path):
    path = str(tmp_path / "a")
    sm = StoreStateMachine(path, cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a")), marker(E1, 1))
    sm.flush()
    sm.close()
    sm = StoreStateMachine(path, cluster_id=1)
    assert (sm.sealed_epoch, sm.epoch_open) == (E1, False)
    apply(sm, txn(2, E2, _insert(2, "b")))
    apply(sm, pin(3))
    p = sm.seed_pins.get(3)
    assert p is not None and p.snapshot is None  # waits for E2's marker
    apply(sm, marker(E2, 2))
    assert p.snapshot is not None and p.epoch == E2
    sm.close()


def test_chunks_resume_after_a_key_and_carry_tombstones_with_metadata(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, *[_insert(k, f"v{k}") for k in range(10)]))
    apply(sm, txn(2, E1, _delete(4)), marker(E1, 2), pin(5))
    whole = read_all(sm, 5)
    small = read_all(sm, 5, max_rows=3)
    assert all_rows(whole) == all_rows(small)
    assert len(small) > 3
    # resume after the second chunk's last key: exactly the rest
    rest = read_all(sm, 5, max_rows=3, after=small[1].last_key)
    assert [r.key for c in rest for r in c.rows] == \
        [r.key for c in small[2:] for r in c.rows]
    rows = all_rows(whole)
    dead = [r for r in rows.values() if r.tombstone]
    assert len(dead) == 1 and dead[0].epoch == E1 and dead[0].author == 1 \
        and dead[0].commit_ts == 1002
    live = [r for r in rows.values() if r.key.startswith(b"r") and not r.tombstone]
    assert len(live) == 9 and all(r.epoch == E1 and r.author == 1 for r in live)
    assert keys.schema_key("s.t") in rows  # the first-seen schema goes along
    end = seed_end(sm.seed_pins.get(5).snapshot, 5, E1, 1, len(whole))
    assert [(w.origin, w.trans_id) for w in end.watermarks] == [(1, 2)]
    sm.close()


def test_the_served_chunks_come_from_one_cursor_a_slice_at_a_time_between_other_work(
        tmp_path, monkeypatch):
    """What the stream serves: the chunks ``read_chunk`` gives from each last key (rows,
    tombstones, schema), each read a slice at a time on the loop, which runs other work
    between the slices of one chunk."""
    monkeypatch.setattr(seed_source, "CHUNK_ROWS", 4)
    monkeypatch.setattr(seed_source, "SLICE_ROWS", 2)
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, *[_insert(k, f"v{k}") for k in range(10)]))
    apply(sm, txn(2, E1, _delete(4)), marker(E1, 2), pin(5))
    snap = sm.seed_pins.get(5).snapshot
    expected = read_all(sm, 5, max_rows=4)

    async def serve() -> tuple[list[channel_pb2.SeedChunk], list[int]]:
        ticks = 0
        seen: list[int] = []  # other work done by the time each chunk was read

        async def other() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        cursor, out = ChunkCursor(snap), []
        while (c := await seed_source._next_chunk(cursor, 5, len(out) + 1)) is not None:
            out.append(c)
            seen.append(ticks)
        task.cancel()
        return out, seen

    got, seen = asyncio.run(serve())
    assert [c.SerializeToString() for c in got] == [c.SerializeToString() for c in expected]
    assert [len(c.rows) for c in got] == [4, 4, 3]  # 9 rows, a tombstone, a schema
    # two slices per full chunk: the other task ran at least once inside each
    assert all(b - a >= 2 for a, b in zip([0, *seen], seen, strict=False))
    sm.close()


def test_a_released_pin_is_gone_and_a_restore_drops_the_pins(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a")), marker(E1, 1), pin(5), pin(6))
    apply(sm, messages.pack(channel_pb2.SeedPin(seed_id=5, release=True)))
    assert sm.seed_pins.get(5) is None
    assert sm.seed_pins.get(6) is not None
    sm.seed_pins.expire(now=1e18)
    assert sm.seed_pins.get(6) is None
    sm.close()


def test_a_new_pin_of_the_same_reader_releases_its_earlier_one(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a")), marker(E1, 1))

    def pin_of(seed_id: int, reader: int, channel: str) -> bytes:
        return messages.pack(channel_pb2.SeedPin(seed_id=seed_id, reader_cluster_id=reader,
                                                 channel=channel))

    apply(sm, pin_of(5, 2, "fromA"), pin_of(6, 3, "fromA"))
    first = sm.seed_pins.get(5).snapshot
    apply(sm, pin_of(7, 2, "fromA"))
    assert sm.seed_pins.get(5) is None and sm.seed_pins.get(6) is not None
    assert sm.seed_pins.get(7) is not None
    with pytest.raises(StoreClosedError, match="the snapshot is closed"):
        read_chunk(first, 5, b"", 1)
    sm.close()
