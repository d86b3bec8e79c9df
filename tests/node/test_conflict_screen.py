"""The state machine's screen for replicated epochs under conflict rules: an epoch whose
judged changes are all inserts of keys this cluster holds nothing for is applied without
judging it row by row. It must decide exactly what judging decides, in every case."""

from __future__ import annotations

import random
import zlib

import pytest

from gateway.conflict import Role
from gateway.conflict.rules import ConflictRule
from gateway.core import messages
from gateway.node.state.state_machine import StoreStateMachine
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import gtid_pb2, replication_pb2, statement_pb2, transaction_pb2, value_pb2

_INT = value_pb2.FIELD_TYPE_INTEGER


def _stmt(kind: str, table: str, keys: list[int], value: int) -> statement_pb2.Statement:
    t = statement_pb2.TableMetadata(schema_name="s", table_name=table)
    kf = [statement_pb2.FieldMetadata(name="id", type=_INT)]
    f = [statement_pb2.FieldMetadata(name="v", type=_INT)]
    kv = [[value_pb2.Value(int_value=k)] for k in keys]
    if kind == "insert":
        return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=t, key_fields=kf, fields=f, records=[statement_pb2.InsertRecord(
                key_values=k, after_values=[value_pb2.Value(int_value=value)]) for k in kv]))
    if kind == "update":
        return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
            table=t, key_fields=kf, set_fields=f, records=[statement_pb2.UpdateRecord(
                key_values=k, after_values=[value_pb2.Value(int_value=value)]) for k in kv]))
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=t, key_fields=kf, records=[statement_pb2.DeleteRecord(key_values=k)
                                         for k in kv]))


def _entries(seed: int) -> list[Entry]:
    """Epochs of cluster 2: mostly inserts of new keys (the screen's case), some inserting
    a key again (held row, tombstone, twice in one epoch), updates, deletes, a table with
    no rule."""
    rng = random.Random(seed)
    view = ReplicationState(1)
    out: list[Entry] = []
    trans = 0
    fresh = 1000
    for n in range(1, 80):
        items = []
        for _ in range(rng.randint(1, 3)):
            trans += 1
            stmts = []
            for _ in range(rng.randint(1, 2)):
                keys = list(range(fresh, fresh + rng.randint(1, 6)))
                fresh += len(keys)
                roll = rng.random()
                if roll < 0.12:
                    keys[0] = rng.randrange(1000, fresh)  # an earlier key again
                elif roll < 0.17:
                    keys.append(keys[0])  # twice in one transaction
                elif roll < 0.22:
                    keys[0] = fresh - 1 + 100  # the next transaction may insert it too
                table = "plain" if rng.random() < 0.15 else "t"
                stmts.append(_stmt("insert", table, keys, trans))
            roll = rng.random()
            if roll < 0.1:
                stmts.append(_stmt("update", "t", [rng.randrange(1000, fresh)], -trans))
            elif roll < 0.18:
                stmts.append(_stmt("delete", "t", [rng.randrange(1000, fresh)], 0))
            items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=2, trans_id=trans), epoch=(1 << 32) | n,
                author=2, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=stmts)))
        sealed = SealedEpoch((1 << 32) | n, items, last_log_index=n)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | n):
            part.derived_trans_id = 10_000 + n  # as the leader reserves it
            part.derived_commit_ts = 5_000 + n
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(part)))
    return out


@pytest.mark.parametrize(("function", "role"), [
    ("NDB$EPOCH2", Role.PRIMARY), ("NDB$EPOCH_TRANS", Role.PRIMARY),
    ("NDB$EPOCH", Role.SECONDARY), ("LWW", Role.NONE), ("NDB$MAX(v)", Role.NONE),
    ("NDB$EPOCH", Role.NONE),
])
def test_screened_epochs_are_applied_exactly_as_judged_ones(tmp_path, function, role):
    """Every entry's store batch, outcome and the final store are the same with the screen
    as with every epoch judged row by row; the screen was taken and also declined."""
    entries = _entries(zlib.crc32(function.encode()) % 1000 + len(role.value))  # stable seed
    got = []
    taken: list[bool] = []
    for name, screen in (("screened", True), ("judged", False)):
        sm = StoreStateMachine(str(tmp_path / name), cluster_id=1,
                               memtable_bytes=64 << 10)  # flushed to tables as it goes
        fn, _, arg = function.partition("(")
        sm.conflict_rules = {"s.t": ConflictRule("s.t", fn, (arg[:-1],) if arg else ())}
        sm.conflict_role = role
        inner = sm._all_fresh

        def all_fresh(*a, _f=inner, _on=screen):  # type: ignore[no-untyped-def]
            out = _f(*a) if _on else (None, None)
            if _on:
                taken.append(bool(out[0]))
            return out

        sm._all_fresh = all_fresh  # type: ignore[method-assign]
        batches: list = []
        write = sm.store.write_batch

        def record(ops, log_index=0, _w=write, _b=batches):  # type: ignore[no-untyped-def]
            _b.append((list(ops), log_index))
            _w(ops, log_index=log_index)

        sm.store.write_batch = record  # type: ignore[method-assign]
        outcomes = []
        for i in range(0, len(entries), 3):
            for a in sm.apply(entries[i:i + 3]):
                outcomes.append((a.index, a.error and str(a.error),
                                 a.result and a.result.SerializeToString()))
        got.append((batches, outcomes, list(sm.store.scan_prefix(b"")),
                    sm.conflict_counters))
        sm.close()
    assert got[0] == got[1]
    if role is Role.NONE and function.startswith("NDB$EPOCH"):
        assert any(o[1] for o in got[0][1])  # the first epoch with a judged row is refused
    else:
        assert any(taken) and not all(taken)
