"""The apply fast path builds stored rows and write results from serialized parts; they must
be byte-identical to what protobuf serializes (replicas, replays and snapshots rely on every
node storing the same bytes)."""

from __future__ import annotations

import random

from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import write_result
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, value_pb2


def _value(rng: random.Random) -> value_pb2.Value:
    kind = rng.choice("sinbud")
    if kind == "s":
        text = rng.choice(["", "é", "x" * rng.choice([1, 200, 70000])])
        return value_pb2.Value(string_value=text)
    if kind == "i":
        return value_pb2.Value(int_value=rng.randint(-2**63, 2**63 - 1))
    if kind == "n":
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    if kind == "b":
        return value_pb2.Value(bytes_value=rng.randbytes(rng.randint(0, 300)))
    if kind == "u":
        return value_pb2.Value(uint_value=rng.randint(0, 2**64 - 1))
    return value_pb2.Value(double_value=rng.random())


def test_insert_rows_are_byte_identical_to_row_serialization():
    rng = random.Random(7)
    for _ in range(300):
        nk, nv = rng.randint(1, 3), rng.randint(0, 4)
        table = statement_pb2.TableMetadata(schema_name=rng.choice(["", "s"]), table_name="t")
        kf = [statement_pb2.FieldMetadata(name=f"k{i}", type=12) for i in range(nk)]
        ff = [statement_pb2.FieldMetadata(name=f"f{i}", type=12) for i in range(nv)]
        recs = [statement_pb2.InsertRecord(key_values=[_value(rng) for _ in range(nk)],
                                           after_values=[_value(rng) for _ in range(nv)])
                for _ in range(rng.randint(1, 5))]
        body = statement_pb2.InsertStatement(table=table, key_fields=kf, fields=ff, records=recs)
        gtid = gtid_pb2.Gtid(server_id=rng.choice([0, 1, 7]),
                             trans_id=rng.choice([0, rng.randint(1, 10**12)]))
        meta = (rng.choice([0, 5 << 32 | 3]), rng.choice([0, 1, 300]),
                rng.choice([0, rng.randint(1, 2**64 - 1)]))
        index = rng.choice([0, rng.randint(1, 10**9)])
        ops: list = []
        StoreStateMachine._insert(None, body, index, gtid, meta, ops, {})  # type: ignore[arg-type]
        want = []
        for rec in recs:
            row = gateway_pb2.Row(table=table, key_fields=kf, key_values=rec.key_values,
                                  fields=ff, values=rec.after_values, epoch=meta[0],
                                  author=meta[1], gtid=gtid, commit_timestamp_ns=meta[2],
                                  log_index=index)
            want.append(row.SerializeToString())
        assert [v for _, v, *_ in ops] == want


def test_write_results_are_byte_identical():
    rng = random.Random(3)
    for _ in range(1000):
        gtid = gtid_pb2.Gtid(server_id=rng.choice([0, 1, 2**32 - 1]),
                             trans_id=rng.choice([0, 1, 2**64 - 1, rng.randint(0, 2**40)]))
        epoch = rng.choice([0, 1 << 32 | 5, 2**64 - 1])
        ts = rng.choice([0, 2**64 - 1, rng.randint(0, 2**63)])
        index = rng.choice([0, 1, rng.randint(0, 2**50)])
        want = gateway_pb2.WriteResult(gtid=gtid, epoch=epoch, commit_timestamp_ns=ts,
                                       log_index=index).SerializeToString()
        assert write_result(gtid.SerializeToString(), epoch, ts, index) == want


def test_fast_apply_writes_what_the_general_path_writes(tmp_path):
    """Entries made of inserts take the wire-bytes fast path; applying the same entries with
    it disabled (every entry through the protobuf path) must write the same store batches
    and give the same outcomes."""
    from gateway.node.state.wire import encode_transaction
    from gateway.raft import Entry, EntryType
    from gateway.v1 import transaction_pb2

    rng = random.Random(11)
    kinds = {"t": 12, "u": 3}  # key column types per table: VARCHAR-ish and INT-ish
    entries = []
    for index in range(2, 400):
        stmts = []
        for _ in range(rng.choice([1, 1, 2])):
            tname = rng.choice(["t", "u"])
            nk = 1 if tname == "t" else 2
            kf = [statement_pb2.FieldMetadata(name=f"k{i}", type=kinds[tname])
                  for i in range(nk)]
            ff = [statement_pb2.FieldMetadata(name="v", type=12)]
            recs = []
            for _ in range(rng.randint(1, 4)):
                if tname == "t":
                    kv = [value_pb2.Value(string_value=rng.choice(["a", "b\0c", "é", ""]))]
                else:
                    kv = [rng.choice([value_pb2.Value(int_value=rng.randint(-5, 5)),
                                      _value(rng)]) for _ in range(nk)]
                recs.append(statement_pb2.InsertRecord(key_values=kv,
                                                       after_values=[_value(rng)]))
            stmts.append(statement_pb2.Statement(insert=statement_pb2.InsertStatement(
                table=statement_pb2.TableMetadata(schema_name="s", table_name=tname),
                key_fields=kf, fields=ff, records=recs)))
        if index > 50 and rng.random() < 0.1:  # a shape conflict: rejected on apply
            stmts[0].insert.key_fields[0].name = "other"
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=1, trans_id=index), epoch=rng.choice([0, 7 << 32]),
            author=1, start_timestamp_ns=5, commit_timestamp_ns=10 + index, segment_id=1,
            end_segment=True, statements=stmts)
        idem = rng.choice(["", "", f"key-{rng.randint(0, 30)}"])
        entries.append(Entry(term=1, index=index, type=EntryType.NORMAL,
                             data=encode_transaction(txn, idem)))
    got = []
    hits: list[int] = []
    for name, fast in (("fast", True), ("general", False)):
        sm = StoreStateMachine(str(tmp_path / name))
        if not fast:
            sm._apply_fast = lambda *a: None  # type: ignore[method-assign]
        else:
            inner = sm._apply_fast

            def counted(*a, _f=inner):  # type: ignore[no-untyped-def]
                out = _f(*a)
                hits.append(out is not None)
                return out

            sm._apply_fast = counted  # type: ignore[method-assign]
        batches: list = []
        write = sm.store.write_batch

        def record(ops, log_index=0, _w=write, _b=batches):  # type: ignore[no-untyped-def]
            _b.append((list(ops), log_index))
            _w(ops, log_index=log_index)

        sm.store.write_batch = record  # type: ignore[method-assign]
        outcomes = []
        for i in range(0, len(entries), 13):
            for a in sm.apply(entries[i:i + 13]):
                outcomes.append((a.index, a.wire, a.error and str(a.error),
                                 a.result and a.result.SerializeToString()))
        got.append((batches, outcomes, list(sm.store.scan_prefix(b""))))
        sm.close()
    assert got[0] == got[1]
    assert any(o[2] for o in got[0][1]) and any(o[1] for o in got[0][1])
    assert sum(hits) > len(entries) // 2  # most entries took the fast path


def test_meta_parts_match_row_tail_and_write_result():
    from gateway.node.state.wire import gtid_bytes, meta_parts, row_tail

    rng = random.Random(4)
    for _ in range(3000):
        sid = rng.choice([0, 1, 2**32 - 1, rng.randrange(2**32)])
        tid = rng.choice([0, 1, 127, 128, 2**64 - 1, rng.randrange(2**40)])
        ep = rng.choice([0, 1, 5 << 32 | 3, 2**64 - 1])
        au = rng.choice([0, 1, 300, 2**32 - 1])
        ts = rng.choice([0, 1, 2**64 - 1, rng.randrange(2**63)])
        ix = rng.choice([0, 1, 200, rng.randrange(2**50)])
        g = gtid_bytes(sid, tid)
        assert g == gtid_pb2.Gtid(server_id=sid, trans_id=tid).SerializeToString()
        assert meta_parts(sid, tid, ep, au, ts, ix) == (
            g, row_tail((ep, au, ts), g, ix), write_result(g, ep, ts, ix))


def test_replicated_epochs_write_what_the_general_path_writes(tmp_path):
    """A replicated epoch's insert-only transactions take the wire-bytes path with the
    origin's GTID, author and commit ts and this cluster's epoch; with that path disabled
    (every transaction through the protobuf path) the store batches and outcomes are the
    same. Updates, deletes and a new table in the same epochs take the general path, reading
    rows the fast path wrote earlier in the entry."""
    from gateway.core import messages
    from gateway.node.state.keys import table_prefix
    from gateway.raft import Entry, EntryType
    from gateway.replication import ReplicationState, build_unit
    from gateway.replication.epochs import SealedEpoch
    from gateway.v1 import replication_pb2, transaction_pb2

    rng = random.Random(5)
    view = ReplicationState(1)
    entries = []
    trans = 0
    for n in range(1, 60):
        items = []
        for _ in range(rng.randint(1, 4)):
            trans += 1
            keys = [rng.randint(0, 30) for _ in range(rng.randint(1, 5))]
            stmts = [statement_pb2.Statement(insert=statement_pb2.InsertStatement(
                table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
                key_fields=[statement_pb2.FieldMetadata(name="id", type=3)],
                fields=[statement_pb2.FieldMetadata(name="v", type=12)],
                records=[statement_pb2.InsertRecord(
                    key_values=[value_pb2.Value(int_value=k)],
                    after_values=[_value(rng) if rng.random() < 0.3 else
                                  value_pb2.Value(string_value=f"r{trans}")])
                         for k in keys]))]
            roll = rng.random()
            if roll < 0.2:
                stmts.append(statement_pb2.Statement(update=statement_pb2.UpdateStatement(
                    table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
                    key_fields=[statement_pb2.FieldMetadata(name="id", type=3)],
                    set_fields=[statement_pb2.FieldMetadata(name="v", type=12)],
                    records=[statement_pb2.UpdateRecord(
                        key_values=[value_pb2.Value(int_value=keys[0])],
                        after_values=[value_pb2.Value(string_value="upd")])])))
            elif roll < 0.3:
                stmts.append(statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
                    table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
                    key_fields=[statement_pb2.FieldMetadata(name="id", type=3)],
                    records=[statement_pb2.DeleteRecord(
                        key_values=[value_pb2.Value(int_value=rng.randint(0, 30))])])))
            elif roll < 0.35:
                stmts.append(statement_pb2.Statement(insert=statement_pb2.InsertStatement(
                    table=statement_pb2.TableMetadata(schema_name="s", table_name=f"n{n}"),
                    key_fields=[statement_pb2.FieldMetadata(name="k", type=12)],
                    records=[statement_pb2.InsertRecord(
                        key_values=[value_pb2.Value(string_value="a")])])))
            items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=2, trans_id=trans), epoch=(1 << 32) | n,
                author=2, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=stmts)))
        sealed = SealedEpoch((1 << 32) | n, items, last_log_index=n)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | n):
            entries.append(Entry(term=1, index=len(entries) + 2, type=EntryType.NORMAL,
                                 data=messages.pack(part)))
    got = []
    hits: list[bool] = []
    for name, fast in (("fast", True), ("general", False)):
        sm = StoreStateMachine(str(tmp_path / name), cluster_id=1)
        inner = sm._replicated_rows

        def rows(*a, _f=inner, _fast=fast):  # type: ignore[no-untyped-def]
            out = _f(*a) if _fast else None
            if _fast:
                hits.append(out is not None)
            return out

        sm._replicated_rows = rows  # type: ignore[method-assign]
        batches: list = []
        write = sm.store.write_batch

        def record(ops, log_index=0, _w=write, _b=batches):  # type: ignore[no-untyped-def]
            _b.append((list(ops), log_index))
            _w(ops, log_index=log_index)

        sm.store.write_batch = record  # type: ignore[method-assign]
        outcomes = []
        for i in range(0, len(entries), 7):
            for a in sm.apply(entries[i:i + 7]):
                outcomes.append((a.index, a.error and str(a.error),
                                 a.result and a.result.SerializeToString()))
        got.append((batches, outcomes, list(sm.store.scan_prefix(b""))))
        sm.close()
    assert got[0] == got[1]
    assert not any(o[1] for o in got[0][1])
    assert any(hits) and not all(hits)  # both paths were taken
    prefix = table_prefix("s", "t")
    stored = [gateway_pb2.Row.FromString(v) for k, v, *_ in got[0][2] if k.startswith(prefix)]
    assert stored and all(r.author == 2 and r.gtid.server_id == 2 and r.epoch >> 32 == 3
                          for r in stored)
