"""The exception and refresh rows of a judged epoch assembled from bytes (``conflict_wire``,
``EpochApply._derived_wire``, the derived transaction's rows by the C insert path) are what
the specification (``conflict_apply``: rows built from Python values and parsed messages,
written through the general insert path) writes: the same store operations, outcome
records and counters, on random epochs of inserts, updates of some columns and deletes over
several tables -- one keyed by two columns, values of several types and NULLs, a DECIMAL
column (which the bytes path leaves to the specification) -- with rows in conflict."""

from __future__ import annotations

import random

import pytest

from gateway.conflict import Context, Role, RuleSet, Stored
from gateway.conflict.functions import BUILTIN
from gateway.conflict.rules import ConflictRule
from gateway.core import messages
from gateway.core.lsm import format
from gateway.node.state import conflict_wire, epoch_judge, keys
from gateway.node.state.conflict_apply import judge_unit, stored_of_row
from gateway.node.state.epoch_judge import judge_unit_fast
from gateway.node.state.state_machine import StoreStateMachine
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import (
    gateway_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

#: without the C accelerator (GATEWAY_PURE_PYTHON) the judgement is Python's, the refresh
#: rows and the derived transaction still come from bytes (``parts_py``)
_C = epoch_judge._judge is not None

FT = value_pb2.FieldType
_F = statement_pb2.FieldMetadata
# table -> (key columns, other columns), as (name, type)
_TABLES = {
    "t": ([("id", FT.FIELD_TYPE_INTEGER)],
          [("v", FT.FIELD_TYPE_INTEGER), ("w", FT.FIELD_TYPE_VARCHAR),
           ("x", FT.FIELD_TYPE_DOUBLE)]),
    "m": ([("a", FT.FIELD_TYPE_INTEGER), ("b", FT.FIELD_TYPE_VARCHAR)],
          [("c", FT.FIELD_TYPE_BLOB), ("d", FT.FIELD_TYPE_BOOLEAN),
           ("ts", FT.FIELD_TYPE_TIMESTAMP)]),
    "d": ([("id", FT.FIELD_TYPE_INTEGER)], [("p", FT.FIELD_TYPE_DECIMAL)]),
    "p": ([("id", FT.FIELD_TYPE_INTEGER)], [("v", FT.FIELD_TYPE_INTEGER)]),
}


def _value(rng: random.Random, ftype: int, k: int) -> value_pb2.Value:
    if rng.random() < 0.2:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    if ftype == FT.FIELD_TYPE_INTEGER:
        return value_pb2.Value(int_value=rng.randint(-5, 5) * k)
    if ftype == FT.FIELD_TYPE_VARCHAR:
        return value_pb2.Value(string_value=rng.choice(["", "x", "é" * k]))
    if ftype == FT.FIELD_TYPE_DOUBLE:
        return value_pb2.Value(double_value=rng.choice([0.0, -1.5, 2.25 * k]))
    if ftype == FT.FIELD_TYPE_BLOB:
        return value_pb2.Value(bytes_value=bytes(rng.randrange(3) * [k % 256]))
    if ftype == FT.FIELD_TYPE_BOOLEAN:
        return value_pb2.Value(bool_value=rng.random() < 0.5)
    if ftype == FT.FIELD_TYPE_TIMESTAMP:
        return value_pb2.Value(timestamp_ns=rng.choice([0, -7, 10**18 + k]))
    return value_pb2.Value(decimal_value=rng.choice(["1.50", "1e3", "-0"]))


def _key(table: str, k: int) -> list[value_pb2.Value]:
    if table == "m":
        return [value_pb2.Value(int_value=k % 3), value_pb2.Value(string_value=f"k{k}")]
    return [value_pb2.Value(int_value=k)]


def _stmt(rng: random.Random, kind: str, table: str, ks: list[int]
          ) -> statement_pb2.Statement:
    key_cols, cols = _TABLES[table]
    t = statement_pb2.TableMetadata(schema_name="s", table_name=table)
    kf = [_F(name=n, type=ft) for n, ft in key_cols]
    if kind == "insert":
        return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=t, key_fields=kf, fields=[_F(name=n, type=ft) for n, ft in cols],
            records=[statement_pb2.InsertRecord(
                key_values=_key(table, k),
                after_values=[_value(rng, ft, k) for _, ft in cols]) for k in ks]))
    if kind == "update":
        some = rng.sample(cols, rng.randint(1, len(cols)))
        return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
            table=t, key_fields=kf, set_fields=[_F(name=n, type=ft) for n, ft in some],
            records=[statement_pb2.UpdateRecord(
                key_values=_key(table, k),
                after_values=[_value(rng, ft, k) for _, ft in some]) for k in ks]))
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=t, key_fields=kf, records=[statement_pb2.DeleteRecord(key_values=_key(table, k))
                                         for k in ks]))


def _entries(seed: int, n_keys: int = 12) -> list[Entry]:
    """Cluster 1's own writes (so rows are in conflict) between epochs of cluster 2."""
    rng = random.Random(seed)
    view = ReplicationState(1)
    out: list[Entry] = []
    trans = 0

    def add(data: bytes) -> None:
        out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL, data=data))

    for n in range(1, 50):
        if rng.random() < 0.5:
            trans += 1
            table = rng.choice(list(_TABLES))
            add(messages.pack(transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=1, trans_id=trans), epoch=(3 << 32) | n,
                author=1, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=[_stmt(rng, "insert", table,
                                  sorted({rng.randrange(n_keys) for _ in range(3)}))])))
        items = []
        for _ in range(rng.randint(1, 3)):
            trans += 1
            stmts = [_stmt(rng, rng.choice(["insert", "insert", "update", "delete"]),
                           rng.choice(list(_TABLES)),
                           [rng.randrange(n_keys) for _ in range(rng.randint(1, 4))])
                     for _ in range(rng.randint(1, 3))]
            items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=2, trans_id=trans), epoch=(1 << 32) | n,
                author=2, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=stmts)))
        sealed = SealedEpoch((1 << 32) | n, items, last_log_index=n)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | n):
            part.derived_trans_id = 10_000 + n
            part.derived_commit_ts = 5_000 + n
            add(messages.pack(part))
    return out


def run_recording(path: str, entries: list[Entry], function: str, fast: bool, *,
                  tables: str = "tmd", role: Role = Role.PRIMARY) -> tuple:
    """Apply ``entries`` (three per batch) to a new state machine at ``path`` with
    ``function`` on ``s.<t>`` for each letter of ``tables``, the C paths on or off
    (``fast``); returns what it wrote: the store batches, the outcomes, the stored cells and
    the conflict counters."""
    sm = StoreStateMachine(path, cluster_id=1, memtable_bytes=64 << 10)
    sm.conflict_rules = {f"s.{t}": ConflictRule(f"s.{t}", function, ()) for t in tables}
    sm.conflict_role = role
    sm.judge_in_c = sm.derive_in_c = fast
    batches: list = []
    write = sm.store.write_batch

    def record(ops, log_index=0):  # type: ignore[no-untyped-def]
        batches.append((list(ops), log_index))
        write(ops, log_index=log_index)

    sm.store.write_batch = record  # type: ignore[method-assign]
    outcomes = []
    for i in range(0, len(entries), 3):  # several entries per batch: the overlay
        for a in sm.apply(entries[i:i + 3]):
            outcomes.append((a.index, a.error and str(a.error),
                             a.result and a.result.SerializeToString()))
    got = (batches, outcomes, list(sm.store.scan_prefix(b"")), sm.conflict_counters)
    sm.close()
    return got


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("function", ["NDB$EPOCH2", "NDB$EPOCH"])
def test_rows_in_conflict_are_written_the_same_from_bytes(tmp_path, monkeypatch, seed,
                                                           function):
    entries = _entries(seed)
    added = []
    real_add = conflict_wire.ExceptionRows.add

    def add(self, *args, **kw):  # type: ignore[no-untyped-def]
        ok = real_add(self, *args, **kw)
        added.append(ok)
        return ok

    monkeypatch.setattr(conflict_wire.ExceptionRows, "add", add)
    fast = run_recording(str(tmp_path / "fast"), entries, function, True)
    spec = run_recording(str(tmp_path / "spec"), entries, function, False)
    assert fast == spec
    counters = spec[3].get("c", {})
    assert counters.get(f"conflict_fn_{function[4:].lower()}", 0) > 5
    # rows in conflict were met, most taken from bytes, some left to the specification
    assert added.count(True) > 5 or not _C
    assert any(k.startswith(keys.table_prefix("s", "m$EX")) for k, _ in spec[2])


def test_a_judged_epoch_of_a_table_with_two_key_columns_records_its_exceptions(tmp_path):
    # the specification used to give the row key to the exception row's key columns, which
    # fails for two of them: the epoch could not be applied
    entries = _entries(3)
    got = run_recording(str(tmp_path / "spec"), entries, "NDB$EPOCH2", False)
    assert all(err is None for _, err, _ in got[1])
    prefix = keys.table_prefix("s", "m$EX")
    ex = [gateway_pb2.Row.FromString(v) for k, v in got[2] if k.startswith(prefix)]
    assert ex and all([f.name for f in r.fields][3:5] == ["a", "b"] for r in ex)


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
@pytest.mark.parametrize("seed", range(40))
def test_exception_statements_from_bytes_are_the_specifications(seed):
    rng = random.Random(seed)
    rules = RuleSet([ConflictRule(f"s.{t}", "NDB$EPOCH2", ()) for t in "tmd"], BUILTIN)
    rows: dict[bytes, bytes | None] = {}
    txns = []
    for t_no in range(rng.randint(1, 4)):
        stmts = [_stmt(rng, rng.choice(["insert", "update", "delete"]),
                       rng.choice(list(_TABLES)), [rng.randrange(6) for _ in range(3)])
                 for _ in range(rng.randint(1, 3))]
        txns.append(transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=2, trans_id=t_no + 1), epoch=(1 << 32) | 7,
            author=2, commit_timestamp_ns=100 + t_no, statements=stmts))
    for table, (_, cols) in _TABLES.items():
        for k in range(6):
            if rng.random() < 0.6:
                rk = keys.row_key("s", table, _key(table, k))
                key_cols = _TABLES[table][0]
                rows[rk] = gateway_pb2.Row(
                    epoch=rng.choice([0, 9]), author=rng.choice([1, 2]),
                    key_fields=[_F(name=n, type=ft) for n, ft in key_cols],
                    key_values=_key(table, k), fields=[_F(name=n, type=ft) for n, ft in cols],
                    values=[_value(rng, ft, k) for _, ft in cols]).SerializeToString()

    def lookup(k: bytes, values: bool) -> Stored:
        raw = rows.get(k)
        return stored_of_row(raw, None, values) if raw is not None else Stored.absent()

    def columns(schema: str, table: str) -> dict[str, int]:
        key_cols, cols = _TABLES[table]
        return dict(key_cols + cols)

    ctx = Context(1, Role.PRIMARY, {2: 5})
    want = judge_unit(txns, rules, ctx, lookup, 20, 7, None, columns, source=2)
    got = judge_unit_fast(txns, rules, ctx, lookup, lambda k: None, rows, 20, 7, None,
                          columns, source=2, raw=rows.get)
    assert got is not None
    assert [s.SerializeToString() for s in got.exceptions] == \
        [s.SerializeToString() for s in want.exceptions]
    assert got.transactions == want.transactions
    assert got.refresh == want.refresh
    assert list(got.counters.items()) == list(want.counters.items())
    # the exceptions' bytes kept for the derived transaction are what they serialize to,
    # and give the derived transaction split from the messages again
    if got.exception_parts is None:  # a row left the epoch to the specification
        return
    assert [conflict_wire.statement_bytes(h, r) for h, r in got.exception_parts] == \
        [s.SerializeToString() for s in got.exceptions]
    tables = [table for _, table, _, _ in got.refresh]
    raws = [rows.get(k) for k, _, _, _ in got.refresh]
    by_parts = conflict_wire.derived_wire(1, 9, 20, 300, got.exceptions, tables, raws,
                                          got.exception_parts)
    split = conflict_wire.derived_wire(1, 9, 20, 300, got.exceptions, tables, raws)
    assert (by_parts is None) == (split is None)
    if by_parts is not None and split is not None:
        assert by_parts[1] == split[1] and by_parts[0] == split[0]


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_the_c_walks_of_records_and_rows_give_what_the_python_gives():
    rng = random.Random(5)
    samples = [b"", b"\x08", b"\x08\xff", b"\x0a\x05ab", b"\x80\x01", b"\x0b",
               b"\x08" + b"\xff" * 9 + b"\x01", b"\x08" + b"\xff" * 9 + b"\x02",
               b"\x08" + b"\xff" * 10 + b"\x01", b"\x12" + b"\xff" * 9 + b"\x01x"]
    for _ in range(3000):
        row = gateway_pb2.Row(epoch=rng.randrange(1 << 40), author=rng.randrange(9),
                              commit_timestamp_ns=rng.randrange(1 << 63), log_index=7,
                              fields=[_F(name="v", type=FT.FIELD_TYPE_INTEGER)],
                              values=[_value(rng, FT.FIELD_TYPE_VARCHAR, 3)],
                              gtid=gtid_pb2.Gtid(server_id=1, trans_id=2)).SerializeToString()
        cut = rng.randrange(len(row) + 1)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
        samples += [row, row[:cut], row[:cut] + junk, junk]
    for _ in range(300):  # fields out of order, and long ones (two-byte lengths)
        fields = [b"\x12\x03abc", b"\x1a\x02\x18\x01", b"\x22\x04\x0a\x02vv",
                  b"\x2a\x82\x01" + b"\x3a\x80\x01" + b"x" * 128, b"\x30\x05",
                  b"\x49" + bytes(8), b"\x0a\x00"]
        samples.append(b"".join(rng.sample(fields, rng.randint(1, len(fields)))))
    table = statement_pb2.TableMetadata(schema_name="s", table_name="t").SerializeToString()
    for data in samples:
        assert conflict_wire.parts(data) == conflict_wire.parts_py(data), data
        for tb in (table, b"", b"t" * 200):
            assert conflict_wire.refresh_parts(tb, data) == \
                conflict_wire.refresh_parts_py(tb, data), data
    # the C functions were the ones compared
    assert conflict_wire.parts is not conflict_wire.parts_py
    assert conflict_wire.refresh_parts is not conflict_wire.refresh_parts_py


def _ex_inputs(rng: random.Random) -> list[tuple]:
    """``ExceptionRows.add`` calls on one statement's shape: mostly rows of the plan the
    statement's last row used, some against a stored row of other fields or none, some
    damaged (cut, junk appended, a value of another case, counts that differ)."""
    table = rng.choice(["t", "m"])
    key_cols, cols = _TABLES[table]
    kind = rng.choice(["insert", "update", "delete"])
    stmt = _stmt(rng, kind, table, list(range(rng.randint(1, 8))))
    body = getattr(stmt, kind)
    fields = body.set_fields if kind == "update" else body.fields if kind == "insert" else ()
    shape = conflict_wire.Shape([(f.name, f.type) for f in body.key_fields],
                                [(f.name, f.type) for f in fields], dict(key_cols + cols))
    calls = []
    for n, rec in enumerate(body.records):
        record = rec.SerializeToString()
        some = cols if rng.random() < 0.8 else rng.sample(cols, rng.randint(0, len(cols)))
        stored: bytes | None = gateway_pb2.Row(
            key_fields=[_F(name=c, type=ft) for c, ft in key_cols], key_values=_key(table, n),
            fields=[_F(name=c, type=ft) for c, ft in some],
            values=[_value(rng, ft, n) for _, ft in some]).SerializeToString()
        roll = rng.random()
        if roll < 0.15:
            stored = None
        elif roll < 0.25:
            record = record[:rng.randrange(len(record) + 1)]
        elif roll < 0.3:
            record += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
        elif roll < 0.35 and stored is not None:
            stored = stored[:rng.randrange(len(stored) + 1)]
        elif roll < 0.4:  # a value in another case than its column's: the spec converts it
            record += b"\x12\x02\x20\x01"
        elif roll < 0.45 and stored is not None:
            stored += b"\x2a\x02\x10\x01"
        calls.append((kind, rng.randint(1, 3), rng.choice([2, 300, 1 << 40]),
                      rng.choice(["2:1", "2:77"]), body.table, shape, record, stored))
    return calls


@pytest.mark.parametrize("seed", range(60))
def test_exception_records_assembled_in_c_are_the_pythons(monkeypatch, seed):
    # ``exception_record`` (C) assembles a row with the statement's last plan; the Python
    # assembly of ``ExceptionRows.add`` is its specification: same rows, same refusals
    calls = _ex_inputs(random.Random(seed))
    results = []
    in_c = conflict_wire.exception_record
    taken = []

    def counted(*args):  # type: ignore[no-untyped-def]
        got = in_c(*args)  # type: ignore[misc]
        taken.append(got is not None)
        return got

    for record in (counted if in_c is not None else None, None):
        monkeypatch.setattr(conflict_wire, "exception_record", record)
        rows = conflict_wire.ExceptionRows(1, 7 + seed)
        shapes: dict[int, conflict_wire.Shape] = {}
        oks = []
        for kind, cause, origin, transid, table, shape, rec, stored in calls:
            # a fresh copy of the shape per run: its plans are learned again
            own = shapes.setdefault(id(shape), conflict_wire.Shape(
                shape.key_fields, shape.fields, shape.types))
            oks.append(rows.add(kind, cause, origin, transid, table, own, rec, stored))
        results.append((oks, rows.statements, rows.count))
    assert results[0] == results[1]
    assert taken.count(True) <= results[1][0].count(True)


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
@pytest.mark.parametrize("seed", range(40))
def test_a_statements_rows_taken_in_one_c_run_are_the_row_by_row_ones(monkeypatch, seed):
    # ``ExceptionRows.add_run`` (``exception_run`` in C) takes a statement's rejected rows in
    # one call, reading the stored rows from the overlay and the store's cells; the loop of
    # ``_judged_wire`` adding them one by one is its specification, ``judge_unit`` theirs
    _judge_in_runs_and_row_by_row(monkeypatch, seed)


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_most_judgements_take_rows_in_c_runs(monkeypatch):
    # a statement's first row, a DECIMAL column's, a stored row not at hand are the
    # specification's; the rest of a statement's rows are taken in C
    taken = [_judge_in_runs_and_row_by_row(monkeypatch, seed) for seed in range(40)]
    assert taken.count(True) >= 20


def _judge_in_runs_and_row_by_row(monkeypatch: pytest.MonkeyPatch, seed: int) -> bool:
    """Judge a random epoch with ``add_run`` and row by row; both must be ``judge_unit``'s
    judgement. Returns whether a C run took a row."""
    rng = random.Random(seed)
    rules = RuleSet([ConflictRule(f"s.{t}", "NDB$EPOCH2", ()) for t in "tmd"], BUILTIN)
    txns = []
    for t_no in range(rng.randint(1, 4)):
        stmts = [_stmt(rng, rng.choice(["insert", "insert", "update", "delete"]),
                       rng.choice(list(_TABLES)), [rng.randrange(8) for _ in range(6)])
                 for _ in range(rng.randint(1, 3))]
        txns.append(transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=2, trans_id=t_no + 1), epoch=(1 << 32) | 7,
            author=2, commit_timestamp_ns=100 + t_no, statements=stmts))
    rows: dict[bytes, bytes | None] = {}  # the rows before the epoch, wherever they are
    overlay: dict[bytes, bytes | None] = {}  # written by earlier entries of the batch
    cells: dict[bytes, bytes | None] = {}  # the store's cells
    for table, (key_cols, cols) in _TABLES.items():
        for k in range(8):
            rk = keys.row_key("s", table, _key(table, k))
            draw = rng.random()
            author = rng.choice([1, 2])
            row = gateway_pb2.Row(
                epoch=9, author=author,
                key_fields=[_F(name=n, type=ft) for n, ft in key_cols],
                key_values=_key(table, k), fields=[_F(name=n, type=ft) for n, ft in cols],
                values=[_value(rng, ft, k) for _, ft in cols]).SerializeToString()
            if draw < 0.15:  # written by an earlier entry (or deleted by one)
                overlay[rk] = rows[rk] = row if rng.random() < 0.8 else None
            elif draw < 0.7:
                rows[rk] = row
                cells[rk] = format.encode_cell(row, 9, author, 5)
            elif draw < 0.8:
                cells[rk] = format.encode_cell(None, 9, 1, 5)  # a tombstone

    def lookup(k: bytes, values: bool) -> Stored:
        # the store's answer: a deleted row keeps its delete's metadata
        raw = rows.get(k)
        if raw is not None:
            return stored_of_row(raw, None, values)
        if k in overlay or k in cells:
            return stored_of_row(None, (9, 1, 5))
        return Stored.absent()

    def columns(schema: str, table: str) -> dict[str, int]:
        key_cols, cols = _TABLES[table]
        return dict(key_cols + cols)

    def fetch(ks: list[bytes]) -> dict[bytes, bytes | None]:
        out = dict(cells)
        out.update((k, cells.get(k)) for k in ks)
        return out

    def raw(k: bytes) -> bytes | None:
        return conflict_wire.read_row(k, overlay, fetch(list(cells)), lambda _: None)

    ctx = Context(1, Role.PRIMARY, {2: 5})
    runs = []
    in_c = conflict_wire.exception_run
    taken = []

    def counted(*args):  # type: ignore[no-untyped-def]
        got = in_c(*args)  # type: ignore[misc]
        taken.append(got[0] != args[2])
        return got

    for run in (counted, None):
        monkeypatch.setattr(conflict_wire, "exception_run", run)
        monkeypatch.setattr(epoch_judge, "exception_run", run)
        runs.append(judge_unit_fast(txns, rules, ctx, lookup, lambda k: None, overlay, 20, 7,
                                    None, columns, source=2, raw=raw, cells=fetch))
    for module in (conflict_wire, epoch_judge):
        monkeypatch.setattr(module, "exception_run", in_c)
    got, spec = runs
    assert got is not None and spec is not None
    want = judge_unit(txns, rules, ctx, lookup, 20, 7, None, columns, source=2)
    for judged in (got, spec):
        assert [s.SerializeToString() for s in judged.exceptions] == \
            [s.SerializeToString() for s in want.exceptions]
        assert judged.transactions == want.transactions
        assert [(k, t, list(kf), list(kv)) for k, t, kf, kv in judged.refresh] == \
            [(k, t, list(kf), list(kv)) for k, t, kf, kv in want.refresh]
        assert list(judged.counters.items()) == list(want.counters.items())
    assert got.exception_parts == spec.exception_parts
    return any(taken)


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
@pytest.mark.parametrize("seed", range(10))
def test_rows_read_in_c_are_read_row_of_each_key(seed):
    # ``read_rows`` (C): the overlay first, then the store's cells (plain, with metadata,
    # tombstones, None, a cell shorter than its metadata), then ``get``
    rng = random.Random(seed)
    ks = [b"k%d" % i for i in range(60)]
    overlay: dict[bytes, bytes | None] = {}
    cells: dict[bytes, bytes | None] = {}
    for k in ks:
        draw = rng.random()
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
        if draw < 0.2:
            overlay[k] = value if rng.random() < 0.7 else None
        if draw < 0.3 or 0.4 < draw < 0.8:
            cells[k] = rng.choice([format.encode_cell(value), format.encode_cell(value, 9, 2, 3),
                                   format.encode_cell(None, 9, 2, 3), format.encode_cell(None),
                                   None, b"\x02short"])
    asked = [rng.choice(ks) for _ in range(80)]

    def get(k: bytes) -> bytes | None:
        return None if k.endswith(b"7") else b"got " + k

    assert conflict_wire.read_rows(asked, overlay, cells, get) == \
        conflict_wire.read_rows_py(asked, overlay, cells, get) == \
        [conflict_wire.read_row(k, overlay, cells, get) for k in asked]
    with pytest.raises(ValueError):
        conflict_wire.read_rows([b"x"], {}, {b"x": b""}, get)


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_exception_run_takes_malformed_input_without_reading_out_of_bounds():
    run = conflict_wire.exception_run
    assert run is not None
    rng = random.Random(5)
    body = _stmt(rng, "insert", "t", [1, 2, 3]).insert
    data = body.SerializeToString()
    rkeys = [keys.row_key("s", "t", _key("t", k)) for k in (1, 2, 3)]
    shape = conflict_wire.Shape([(f.name, f.type) for f in body.key_fields],
                                [(f.name, f.type) for f in body.fields],
                                dict(_TABLES["t"][0] + _TABLES["t"][1]))
    rows = conflict_wire.ExceptionRows(1, 7)
    assert rows.add("insert", 1, 2, "2:1", body.table, shape,
                    body.records[0].SerializeToString(), None)
    verdicts, flags = bytes([2, 2, 2]), b"\x01\x01\x01"

    def call(data: bytes, **kw: object) -> tuple[int, int, int]:
        out = conflict_wire.ExceptionRows(1, 7)
        args = dict(verdicts=verdicts, flags=flags, i=0, end=3, first=0, body=data,
                    rkeys=rkeys, overlay={}, cells={}, kind="insert", origin=2,
                    transid="2:1", shape=shape, gone=set(), s_no=0, seen=set(), refresh=[],
                    stmt=body, kv_type=epoch_judge._KeyValues)
        args.update(kw)
        return out.add_run(**args)  # type: ignore[arg-type]

    assert call(data) == (-1, 3, 0)
    # rows to refresh: (key, table, key fields, their key values), each key once, with the
    # key values read from the record when used, by a class of slots or any other
    class Called(list):  # type: ignore[type-arg]
        def __init__(self, records, r):  # type: ignore[no-untyped-def]
            super().__init__(records[r].key_values)

    for kv_type in (epoch_judge._KeyValues, Called):
        refresh: list = []
        seen = {rkeys[2]}
        assert call(data, verdicts=bytes([2 | 16, 16, 2 | 16]), refresh=refresh, seen=seen,
                    kv_type=kv_type) == (-1, 2, 0)
        assert [(k, t, list(kf), list(kv)) for k, t, kf, kv in refresh] == [
            (rkeys[r], body.table, list(body.key_fields), list(body.records[r].key_values))
            for r in (0, 1)]
        assert seen == set(rkeys)
    assert call(data, end=2) == (2, 2, 0)  # the next statement's row: the caller's
    # a row whose stored row is not at hand (bit 7, the key in neither map) stops the run
    assert call(data, verdicts=bytes([2, 2 | 128, 2])) == (1, 1, 0)
    for _ in range(2000):  # damaged bytes: an answer, never a crash
        bad = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            if bad and rng.random() < 0.7:
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            else:
                bad = bad[:rng.randrange(len(bad) + 1)]
        nxt, n, _ = call(bytes(bad))
        assert nxt in (-1, 0, 1, 2) and 0 <= n <= 3
    with pytest.raises(ValueError):
        call(data, end=4)  # past the rows
    with pytest.raises(TypeError):
        run(verdicts)  # type: ignore[call-arg]


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_rows_after_the_first_of_a_statement_are_assembled_in_c(monkeypatch):
    taken = []
    in_c = conflict_wire.exception_record
    assert in_c is not None

    def counted(*args):  # type: ignore[no-untyped-def]
        got = in_c(*args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(conflict_wire, "exception_record", counted)
    rng = random.Random(3)
    stmt = _stmt(rng, "insert", "t", list(range(6)))
    body = stmt.insert
    shape = conflict_wire.Shape([(f.name, f.type) for f in body.key_fields],
                                [(f.name, f.type) for f in body.fields],
                                dict(_TABLES["t"][0] + _TABLES["t"][1]))
    rows = conflict_wire.ExceptionRows(1, 7)
    stored = gateway_pb2.Row(fields=[_F(name="v", type=FT.FIELD_TYPE_INTEGER)],
                             values=[value_pb2.Value(int_value=4)]).SerializeToString()
    for rec in body.records:
        assert rows.add("insert", 2, 2, "2:1", body.table, shape, rec.SerializeToString(),
                        stored)
    assert taken == [True] * 5 and rows.count == 6


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_exception_record_takes_malformed_input_without_reading_out_of_bounds():
    record = conflict_wire.exception_record
    assert record is not None
    rng = random.Random(11)
    rec = statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(int_value=3)],
        after_values=[value_pb2.Value(string_value="x"), value_pb2.Value(int_value=1)]
    ).SerializeToString()
    row = gateway_pb2.Row(fields=[_F(name="w", type=FT.FIELD_TYPE_VARCHAR)],
                          values=[value_pb2.Value(string_value="y")]).SerializeToString()
    fkey = (_F(name="w", type=FT.FIELD_TYPE_VARCHAR).SerializeToString(),)
    picks = bytes([1, 0x3A, 0, 0, 0, 0, 0, 0x3A, 0, 0, 0, 0, 2, 0x18, 9, 9, 9, 9])
    args = [rec, 0x12, 1, 2, row, fkey, picks, b"m", 5, b"e", 1, b"o", b"c", b"t", b"\x08\x00"]
    good = record(*args)
    assert good is not None and good.startswith(b"m\x0a\x02\x20\x05e\x0a\x02\x20\x01oct")
    wrong = [(0, rec[:-1]), (2, 2), (3, 1), (3, 3), (4, row[:-1]), (4, None), (5, None),
             (5, ()), (5, (b"x",)), (5, [fkey[0]]), (6, picks[:-1]),
             (6, bytes([1, 0x3A, 1, 0, 0, 0])), (6, bytes([0, 0x3A, 0xFF, 0xFF, 0xFF, 0xFF])),
             (6, bytes([3, 0x3A, 0, 0, 0, 0])), (6, bytes([0, 0x18, 0, 0, 0, 0])),
             (8, -1), (8, 1 << 64), (8, "5"), (10, -3), (2, -1), (3, -1), (1, -1), (1, 0x80),
             (14, b"")]
    for at, value in wrong:
        bad = list(args)
        bad[at] = value
        assert record(*bad) is None, (at, value)
    for _ in range(3000):  # damaged bytes anywhere: an answer, never a crash
        bad = list(args)
        at = rng.choice([0, 4])
        data = bytearray(args[at])
        for _ in range(rng.randint(1, 3)):
            if data and rng.random() < 0.7:
                data[rng.randrange(len(data))] = rng.randrange(256)
            else:
                data = data[:rng.randrange(len(data) + 1)]
        bad[at] = bytes(data)
        got = record(*bad)
        assert got is None or isinstance(got, bytes)
    with pytest.raises(TypeError):
        record(*args[:-1])


@pytest.mark.parametrize("seed", range(80))
def test_transactions_with_records_cut_from_bytes_are_the_specifications(seed):
    # ``without_wire`` cuts the dropped records out of the serialization; ``without``, the
    # specification, copies the message without them: the same transaction, the same bytes
    from gateway.node.state.conflict_apply import without

    rng = random.Random(seed)
    stmts = [_stmt(rng, rng.choice(["insert", "update", "delete"]), rng.choice(list(_TABLES)),
                   list(range(rng.randint(1, 6)))) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.3:
        stmts.insert(rng.randrange(len(stmts) + 1), statement_pb2.Statement(
            sql=statement_pb2.SqlStatement(query="select 1")))
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=2, trans_id=seed + 1), epoch=rng.randrange(1 << 40),
        author=2, commit_timestamp_ns=rng.randrange(1 << 62), segment_id=1,
        end_segment=rng.random() < 0.5, statements=stmts)
    gone = set()
    for s_no, stmt in enumerate(stmts):
        kind = stmt.WhichOneof("kind")
        if kind == "sql":
            continue
        n = len(getattr(stmt, kind).records)
        gone |= {(s_no, r) for r in range(n) if rng.random() < (0.5 if seed % 3 else 1.0)}
    if seed % 7 == 0:  # a field of a newer build, kept as the copy keeps it
        txn = transaction_pb2.Transaction.FromString(txn.SerializeToString() + b"\x60\x05")
    got = conflict_wire.without_wire(txn, gone)
    want = without(txn, gone)
    assert got is not None
    assert got == want and got.SerializeToString() == want.SerializeToString()
    # cut from the bytes the transaction was received as (a replicated epoch's entry), even
    # bytes a parser reads as the same message but protobuf would not write (a field given
    # twice, the later one kept): the same message
    data = txn.SerializeToString()
    if seed % 2:
        data = transaction_pb2.Transaction(epoch=txn.epoch + 1).SerializeToString() + data
    assert transaction_pb2.Transaction.FromString(data) == txn
    from_bytes = conflict_wire.without_wire(txn, gone, bytes((messages.TypeTag.TRANSACTION,))
                                            + data)
    assert from_bytes == want and from_bytes.SerializeToString() == want.SerializeToString()
    # a statement with something else beside its body (a field of a newer build): left to
    # the specification
    odd = transaction_pb2.Transaction.FromString(
        txn.SerializeToString() + b"\x32\x04\x1a\x00\x78\x01")
    assert conflict_wire.without_wire(odd, gone | {(len(stmts), 0)}) is None


@pytest.mark.skipif(not _C, reason="the C accelerator is not loaded")
def test_records_cut_from_a_statement_body_in_c_are_the_pythons():
    # ``records_without`` (C) against ``records_without_py``: real bodies with records
    # dropped at random, bodies cut short or with junk after them, lengths written with
    # longer varints than needed (rewritten minimal by both), drops out of range
    c = conflict_wire._c
    assert c is not None
    rng = random.Random(11)
    bodies = [b"", b"\x22\x00", b"\x22\x82\x00ab\x22\x01x", b"\x08\x96\x01\x22\x00",
              b"\x0a\x80\x01" + b"t" * 128 + b"\x22\x02zz", b"\x22", b"\x80\x01", b"\x23"]
    for _ in range(400):
        kind = rng.choice(["insert", "update", "delete"])
        stmt = _stmt(rng, kind, rng.choice(list(_TABLES)), list(range(rng.randint(0, 8))))
        body = getattr(stmt, kind).SerializeToString()
        cut = rng.randrange(len(body) + 1)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
        bodies += [body, body[:cut], body + junk]
    for body in bodies:
        for _ in range(3):
            drop = sorted(rng.sample(range(-2, 12), rng.randint(0, 6)))
            assert c.records_without(body, drop) == conflict_wire.records_without_py(
                body, drop), (body, drop)
    with pytest.raises(ValueError, match="ascending"):
        c.records_without(b"\x22\x00", [2, 1])
    with pytest.raises(TypeError):
        c.records_without(b"\x22\x00", [1.5])
    with pytest.raises(TypeError):
        c.records_without("x", [])


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_the_c_statement_framing_gives_what_the_python_gives():
    """``statement_bytes`` / ``statements_bytes`` in C against their specifications: empty
    and long heads and records (lengths of one, two and three varint bytes), no records,
    no statements; anything but bytes in a list is refused, not read."""
    rng = random.Random(11)

    def blob() -> bytes:
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 127, 128, 300])))

    for _ in range(300):
        stmts = [(blob(), [blob() for _ in range(rng.randrange(0, 4))])
                 for _ in range(rng.randrange(0, 4))]
        if rng.random() < 0.05:
            stmts.append((b"h", [b"x" * 20000]))
        assert conflict_wire.statements_bytes(stmts) == conflict_wire.statements_bytes_py(stmts)
        for head, records in stmts:
            assert conflict_wire.statement_bytes(head, records) == \
                conflict_wire.statement_bytes_py(head, records)
    for bad in ([(b"h", (b"r",))], [(b"h", [b"r", "s"])], [("h", [])], [(b"h",)], (b"h", [])):
        with pytest.raises(TypeError):
            conflict_wire.statements_bytes(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conflict_wire.statement_bytes(b"h", [1])  # type: ignore[list-item]


@pytest.mark.skipif(not _C, reason="gateway.node._judge is not built")
def test_the_c_refresh_run_adds_what_the_python_adds():
    """``refresh_run`` in C against ``refresh_run_py``: rows of two tables in runs (merged
    into one statement per run, and into the list's last statement when its head is the
    same), rows absent or that do not walk (None, the list maybe changed alike), bad
    arguments refused."""
    rng = random.Random(8)
    tables = [statement_pb2.TableMetadata(schema_name="s", table_name=t).SerializeToString()
              for t in ("a", "b")]

    def row() -> bytes | None:
        raw = gateway_pb2.Row(key_fields=[_F(name="id", type=FT.FIELD_TYPE_INTEGER)],
                              key_values=[value_pb2.Value(int_value=rng.randrange(99))],
                              fields=[_F(name="v", type=FT.FIELD_TYPE_VARCHAR)],
                              values=[_value(rng, FT.FIELD_TYPE_VARCHAR, 3)]).SerializeToString()
        shape = rng.random()
        return None if shape < 0.01 else raw[:rng.randrange(len(raw))] if shape < 0.02 \
            else raw

    for _ in range(500):
        n = rng.randrange(0, 12)
        tbs = [tables[rng.random() < 0.3] for _ in range(n)]
        raws = [row() for _ in range(n)]
        start = []
        if rng.random() < 0.5:
            head, rec = conflict_wire.refresh_parts_py(tables[0], gateway_pb2.Row(
                key_fields=[_F(name="id", type=FT.FIELD_TYPE_INTEGER)],
                key_values=[value_pb2.Value(int_value=1)],
                fields=[_F(name="v", type=FT.FIELD_TYPE_VARCHAR)],
                values=[value_pb2.Value(string_value="x")]).SerializeToString())
            start = [(rng.choice([head, b"other"]), [rec])]
        want_stmts = [(h, list(r)) for h, r in start]
        got_stmts = [(h, list(r)) for h, r in start]
        want = conflict_wire.refresh_run_py(tbs, raws, want_stmts)
        got = conflict_wire.refresh_run(tbs, raws, got_stmts)
        assert got == want
        assert got_stmts == want_stmts
    with pytest.raises(ValueError):
        conflict_wire.refresh_run([tables[0]], [], [])
    with pytest.raises(TypeError):
        conflict_wire.refresh_run(["x"], [b""], [])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        conflict_wire.refresh_run((), [], [])  # type: ignore[arg-type]
