"""Windows of plain inserts go to an applier column by column (``gateway.core.insert_columns``):
the rows are exactly those ``statement_ops`` gives, every other window is left to the row path,
and the dispatcher leaves the same SQLite store with the columns path on or off."""

from __future__ import annotations

import dataclasses
import random
import sqlite3

import pytest

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import CommittedEntry, MemorySource
from gateway.appliers.sqlite import SqliteApplier
from gateway.core import insert_columns as insert_columns_module
from gateway.core.insert_columns import WIRES_IN_C, insert_columns, insert_columns_of_wires
from gateway.core.reducer import AssembledTransaction
from gateway.core.rowops import Gtid, MalformedTransactionError, OpKind, statement_ops
from gateway.v1 import statement_pb2, value_pb2
from tests.reducer.model import delete, insert, sql, txn, update

FT = value_pb2.FieldType


def assembled(t) -> AssembledTransaction:
    return AssembledTransaction(Gtid(t.gtid.server_id, t.gtid.trans_id), (t.gtid.trans_id,), (t,))


def insert_only(rng: random.Random, n: int, first_id: int = 1) -> list:
    """``n`` transactions of inserts of distinct rows into a few tables, some values null,
    statements of one to several records, two column sets for table ``t``."""
    out, next_key = [], first_id * 1000
    for i in range(n):
        stmts = []
        for _ in range(rng.randint(1, 3)):
            table = rng.choice(["t", "u"])
            cols = rng.choice([("a", "b"), ("b",)]) if table == "t" else ("a",)
            rows = []
            for _ in range(rng.randint(1, 4)):
                next_key += 1
                row = {"id": next_key}
                for c in cols:
                    row[c] = None if rng.random() < 0.2 else (
                        rng.randrange(100) if c == "a" else f"s{rng.randrange(100)}")
                rows.append(row)
            stmts.append(insert(table, rows))
        out.append(txn(first_id + i, *stmts, commit_ts_ns=first_id + i))
    return out


def as_rows(ops) -> set:
    return {(op.table, op.kind, op.key, tuple(zip((c.name for c in op.columns), op.values,
                                                  strict=True))) for op in ops}


def column_rows(window) -> set:
    out = set()
    for b in window.batches:
        names = [c.name for c in b.columns]
        for r in range(len(b)):
            out.add((b.table, b.kind, tuple(k[r] for k in b.key),
                     tuple(zip(names, (v[r] for v in b.values), strict=True))))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_a_window_of_plain_inserts_becomes_the_rows_statement_ops_gives(seed):
    txns = insert_only(random.Random(seed), 12)
    window = insert_columns([assembled(t) for t in txns])
    assert window is not None
    want = [op for t in txns for op in statement_ops(t)]
    assert window.rows == len(want)
    assert column_rows(window) == as_rows(want)
    assert all(b.kind is OpKind.INSERT for b in window.batches)
    assert window.gtids == [Gtid(1, t.gtid.trans_id) for t in txns]


def _decimal_insert() -> statement_pb2.Statement:
    st = insert("t", [{"id": 1, "a": 5}])
    st.insert.fields[0].type = FT.FIELD_TYPE_DECIMAL
    st.insert.records[0].after_values[0].CopyFrom(value_pb2.Value(decimal_value="1.5"))
    return st


def _wrong_case() -> statement_pb2.Statement:
    st = insert("t", [{"id": 1, "a": 5}])
    st.insert.records[0].after_values[0].CopyFrom(value_pb2.Value(string_value="five"))
    return st


def _extra_value() -> statement_pb2.Statement:
    st = insert("t", [{"id": 1, "a": 5}])
    st.insert.records[0].after_values.add(int_value=6)
    return st


def _no_key_fields() -> statement_pb2.Statement:
    st = insert("t", [{"id": 1, "a": 5}])
    del st.insert.key_fields[:]
    del st.insert.records[0].key_values[:]
    return st


def _window_parts(window) -> tuple:
    return (column_rows(window), window.gtids, window.rows,
            sorted(repr((b.table, b.key_columns, b.columns)) for b in window.batches))


def _of_wires(txns) -> object:
    return insert_columns_of_wires([t.SerializeToString() for t in txns],
                                   [Gtid(t.gtid.server_id, t.gtid.trans_id) for t in txns])


@pytest.mark.parametrize("stmt", [
    lambda: insert("t", [{"id": 7, "a": 1}]),                  # the same row again
    lambda: update("t", ["a"], [(1, [2])]),
    lambda: delete("t", [1]),
    lambda: sql("SELECT 1"),
    _decimal_insert, _wrong_case, _extra_value, _no_key_fields,
], ids=["duplicate-row", "update", "delete", "sql", "decimal", "wrong-case", "extra-value",
        "no-key-fields"])
def test_windows_the_row_path_must_take_are_left_to_it(stmt):
    """By ``insert_columns`` and by ``insert_columns_of_wires`` alike (the same window from
    the transactions' bytes)."""
    txns = [txn(1, insert("t", [{"id": 7, "a": 0}])), txn(2, stmt())]
    assert insert_columns([assembled(t) for t in txns]) is None
    assert _of_wires(txns) is None  # always None without the C reader


needs_c = pytest.mark.skipif(not WIRES_IN_C, reason="the C reader is not built")


@needs_c
@pytest.mark.parametrize("seed", range(20))
def test_a_window_read_from_bytes_is_the_window_of_its_transactions(seed):
    rng = random.Random(seed)
    txns = insert_only(rng, 12)
    # a transaction whose statements carry no records inserts nothing: no GTID for it
    empty = insert("t", [{"id": 1, "a": 1}])
    del empty.insert.records[:]
    txns.insert(rng.randrange(len(txns)), txn(99, empty))
    if seed % 2:  # specs never seen: learned from the bytes on the way
        insert_columns_module._SPECS.clear()
    got = _of_wires(txns)
    want = insert_columns([assembled(t) for t in txns])
    assert got is not None and want is not None
    assert _window_parts(got) == _window_parts(want)
    assert Gtid(1, 99) not in got.gtids


def test_the_same_key_in_two_tables_is_two_rows():
    txns = [txn(1, insert("t", [{"id": 7, "a": 0}])), txn(2, insert("u", [{"id": 7, "a": 0}]))]
    window = insert_columns([assembled(t) for t in txns])
    assert window is not None and window.rows == 2


def mixed_workload(seed: int) -> list:
    """Stretches of plain inserts, stretches with updates/deletes/SQL of those rows and of
    repeated keys, and a malformed transaction (dead-lettered by both paths)."""
    rng = random.Random(seed)
    txns = insert_only(rng, 40, first_id=1)
    tid = 41
    for _ in range(10):
        k = rng.randint(1001, 1040)
        txns.append(txn(tid, rng.choice([update("t", ["a"], [(k, [tid])]), delete("t", [k]),
                                         insert("t", [{"id": 1, "a": tid}]),
                                         sql(f"-- {tid}")]), commit_ts_ns=tid))
        tid += 1
    txns.append(txn(tid, _wrong_case(), commit_ts_ns=tid))
    txns += insert_only(rng, 40, first_id=tid + 1)
    return txns


def dump(path) -> dict:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr)
                for n in names}


def run_into_sqlite(where, source, config: DispatcherConfig, *, columns: bool = True
                    ) -> tuple[dict, object, dict]:
    """Run a dispatcher from ``source`` into a new SQLite file under ``where`` (the columns
    path on or off): the file's tables (``dump``), the final position, the counters."""
    where.mkdir()
    applier = SqliteApplier(where / "out.db")
    applier.capabilities = dataclasses.replace(applier.capabilities, columns=columns)
    d = Dispatcher(applier, source, where / "state", config=config)
    try:
        position = d.run()
    finally:
        applier.close()
    return dump(where / "out.db"), position, d.metrics.snapshot()


def last_changes(txns) -> dict:
    """Each row's GTID of its last change in the workload (dead letters excluded)."""
    out = {}
    for t in txns:
        try:
            ops = statement_ops(t)
        except MalformedTransactionError:  # dead-lettered whole
            continue
        for op in ops:
            if not op.is_barrier:
                out[(op.table.name, op.key)] = (t.gtid.server_id, t.gtid.trans_id)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_dispatcher_leaves_the_same_sqlite_store_with_the_columns_path_on_or_off(
        tmp_path, seed):
    """The same rows with the columns path on (read batches held, runs of plain inserts as
    columns windows) or off (the row path in windows of 8). The applied GTIDs hold the
    GTID of every row's last change either way; beyond that it depends on which changes the
    reduction windows folded away, and the windows differ between the two runs."""
    txns = mixed_workload(seed)
    stores, positions, metrics = {}, {}, {}
    for columns in (True, False):
        stores[columns], positions[columns], metrics[columns] = run_into_sqlite(
            tmp_path / str(columns), MemorySource(txns),
            DispatcherConfig(threads=1, window=8, save_interval=0.0), columns=columns)
    ranges = {c: stores[c].pop("_gateway_applied_ranges") for c in stores}
    applied = {c: {(s, t) for s, first, last in ranges[c] for t in range(first, last + 1)}
               for c in stores}
    assert stores[True] == stores[False]
    rows = {(name, (row[0],)) for name, table in stores[True].items()
            if not name.startswith("_gateway") for row in table}
    last = last_changes(txns)
    everything = {(t.gtid.server_id, t.gtid.trans_id) for t in txns}
    for c in (True, False):
        assert {last[r] for r in rows} <= applied[c] <= everything
    assert positions[True].log_index == positions[False].log_index == len(txns)
    assert positions[True].applied == positions[False].applied
    assert metrics[True]["dead_letters"] == metrics[False]["dead_letters"] == 1
    # the two stretches of plain inserts at least went column by column, in few windows
    assert 2 <= metrics[True]["column_windows"] < 20 and metrics[False]["column_windows"] == 0


class _LogSource:
    """The node's source as the dispatcher sees it: entries read from the log's payloads by
    ``gateway.node.appliers.feed.transaction_entry`` (whole transactions with a head, unparsed)."""

    def __init__(self, txns) -> None:
        """``txns``: transactions, or None for an entry holding none (an epoch marker)."""
        self.payloads = [None if t is None else b"\x01" + t.SerializeToString() for t in txns]

    def read(self, from_index: int, max_entries: int) -> list:
        from gateway.node.appliers.feed import transaction_entry

        start = max(from_index, 1) - 1
        return [CommittedEntry(start + 1 + i, None) if p is None
                else transaction_entry(start + 1 + i, p)
                for i, p in enumerate(self.payloads[start:start + max_entries])]

    def last_index(self) -> int:
        return len(self.payloads)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("read_batch", [7, 256])
def test_entries_read_from_the_log_leave_the_store_parsed_transactions_leave(tmp_path, seed,
                                                                            read_batch):
    """The mixed workload through the dispatcher from the log's bytes (runs of whole
    transactions go straight from their bytes to one columns window each) and from parsed
    transactions (``MemorySource``): the same store, applied GTIDs, position and dead
    letters."""
    txns = mixed_workload(seed)
    stores, positions, metrics = {}, {}, {}
    for name, source in (("log", _LogSource(txns)), ("parsed", MemorySource(txns))):
        stores[name], positions[name], metrics[name] = run_into_sqlite(
            tmp_path / name, source,
            DispatcherConfig(threads=2, read_batch=read_batch, save_interval=0.0))
    assert stores["log"] == stores["parsed"]
    assert positions["log"] == positions["parsed"]
    assert positions["log"].log_index == len(txns)
    for key in ("dead_letters", "transactions", "entries_read", "applied_ops"):
        assert metrics["log"][key] == metrics["parsed"][key], key


def _count_whole(monkeypatch) -> list:
    """The GTIDs ``AssembledTransaction.whole`` is called with from now on."""
    built: list = []
    whole = AssembledTransaction.whole.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(AssembledTransaction, "whole",
                        classmethod(lambda cls, g, e: (built.append(g), whole(cls, g, e))[1]))
    return built


def test_a_run_with_a_row_twice_read_from_the_log_is_admitted_entry_by_entry(
        tmp_path, monkeypatch):
    """Not a columns window from the bytes: the run goes entry by entry, as before the
    whole-run path (an ``AssembledTransaction`` each), and the later value wins."""
    built = _count_whole(monkeypatch)
    txns = [txn(1, insert("t", [{"id": 1, "a": 0}])), txn(2, insert("t", [{"id": 1, "a": 5}]))]
    applier = SqliteApplier(tmp_path / "t.db")
    d = Dispatcher(applier, _LogSource(txns), tmp_path / "state",
                   config=DispatcherConfig(threads=2, read_batch=64, save_interval=0.0))
    try:
        assert d.run().log_index == 2
        assert applier.rows("t") == [{"id": 1, "a": 5}]
    finally:
        applier.close()
    assert built == [Gtid(1, 1), Gtid(1, 2)]


@pytest.mark.parametrize("read_batch", [1, 2, 64])
def test_entries_read_from_the_log_skip_what_was_applied_and_refuse_a_reused_open_gtid(
        tmp_path, read_batch):
    """From the log's bytes into SQLite: a whole transaction the saved position holds is not
    applied again, and a whole transaction reusing the GTID of a transaction whose segments
    are still open is refused (dead-lettered with them) -- whatever the read batch, so
    whether or not the entries come in a run of whole transactions."""
    from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore

    txns = [txn(1, insert("t", [{"id": 1, "a": 1}])),                     # applied before
            txn(2, insert("t", [{"id": 2, "a": 2}]), end_segment=False),  # open
            txn(2, insert("t", [{"id": 20, "a": 20}])),                   # whole, same GTID
            txn(3, insert("t", [{"id": 3, "a": 3}])),
            txn(4, insert("t", [{"id": 4, "a": 4}]))]
    applier = SqliteApplier(tmp_path / "t.db")
    PositionStore(tmp_path / "state", applier.name).save(ApplierPosition(0, GtidSet([Gtid(1, 1)])))
    d = Dispatcher(applier, _LogSource(txns), tmp_path / "state",
                   config=DispatcherConfig(threads=1, read_batch=read_batch, save_interval=0.0))
    try:
        pos = d.run()
        rows = {r["id"] for r in applier.rows("t")}
    finally:
        applier.close()
    assert rows == {3, 4}
    assert pos.log_index == len(txns)
    assert Gtid(1, 3) in pos.applied and Gtid(1, 4) in pos.applied
    snap = d.metrics.snapshot()
    assert snap["skipped"] == 1 and snap["dead_letters"] >= 1


@pytest.mark.parametrize(("source", "bare"), [("parsed", False), ("log", False), ("log", True)])
def test_one_row_transactions_of_a_read_batch_go_in_one_columns_window(tmp_path, monkeypatch,
                                                                       source, bare):
    """With ``window=1`` (the default) the columns path still takes a whole read batch of
    insert-only transactions at once: one ``apply_columns`` call, one SQLite transaction,
    the rows and positions of one call per transaction -- from parsed transactions, and from
    the log's bytes as the node reads them (then without an ``AssembledTransaction`` per
    transaction: the whole-run path). Entries holding no transaction among them (``bare``:
    the node's epoch markers and positions) ride along: still one window per read batch,
    and the position covers every entry."""
    built = _count_whole(monkeypatch)
    entries: list = [None] if bare else []
    for i in range(1, 101):
        entries.append(txn(i, insert("t", [{"id": i, "a": i}]), commit_ts_ns=i))
        if bare and i % 10 == 3:
            entries.append(None)
    applier = SqliteApplier(tmp_path / "one.db")
    calls = []
    apply_columns = applier.apply_columns
    applier.apply_columns = lambda b, g, *a: (calls.append(len(g)), apply_columns(b, g, *a))[1]
    d = Dispatcher(applier, (_LogSource if source == "log" else MemorySource)(entries),
                   tmp_path / "state",
                   config=DispatcherConfig(threads=2, read_batch=64, save_interval=0.0))
    try:
        pos = d.run()
        assert list(applier.applied_gtids().ranges()) == [(1, 1, 100)]
    finally:
        applier.close()
    assert pos.log_index == len(entries) == (111 if bare else 100)
    assert sorted(dump(tmp_path / "one.db")["t"]) == [(i, i) for i in range(1, 101)]
    if WIRES_IN_C or source == "parsed":
        assert calls == ([57, 43] if bare else [64, 36]) and built == []
        assert d.metrics.snapshot()["column_windows"] == 2


class _EpochSource:
    """Replicated epochs as the node's feed gives them: one entry holding several whole
    transactions of another cluster (``CommittedEntry.replicated``)."""

    def __init__(self, epochs: list[list]) -> None:
        self.epochs = epochs

    def read(self, from_index: int, max_entries: int) -> list:
        start = max(from_index, 1) - 1
        return [CommittedEntry(start + 1 + i, None, tuple(e))
                for i, e in enumerate(self.epochs[start:start + max_entries])]

    def last_index(self) -> int:
        return len(self.epochs)


def test_a_replicated_epochs_inserts_go_in_one_columns_window(tmp_path):
    """A replicated epoch's insert-only transactions take the columns path as a run of local
    ones does (one ``apply_columns`` call per epoch), and one the columns path cannot take
    (an update) the row path: the same store, applied GTIDs and position as the row path
    alone (an applier without ``apply_columns``)."""
    epochs = [[txn(10 * e + t, insert("t", [{"id": 10 * e + t, "a": e}]), server_id=2,
                   commit_ts_ns=10 * e + t) for t in range(3)] for e in range(4)]
    epochs[2].append(txn(99, update("t", ["a"], [(1, [7])]), server_id=2))
    got = {}
    for name in ("columns", "rows"):
        applier = SqliteApplier(tmp_path / f"{name}.db")
        calls: list[int] = []
        if name == "columns":
            apply_columns = applier.apply_columns
            applier.apply_columns = lambda b, g, *a, _f=apply_columns, _c=calls: (  # type: ignore
                _c.append(len(g)), _f(b, g, *a))[1]
        else:
            applier.capabilities = dataclasses.replace(applier.capabilities, columns=False)
        d = Dispatcher(applier, _EpochSource(epochs), tmp_path / f"{name}.state",
                       config=DispatcherConfig(threads=2, read_batch=8, save_interval=0.0))
        try:
            pos = d.run()
            got[name] = (dump(tmp_path / f"{name}.db"), list(applier.applied_gtids().ranges()),
                         pos.log_index)
        finally:
            applier.close()
        if name == "columns":
            assert calls == [3, 3, 3]  # the epoch with an update went by rows
    assert got["columns"] == got["rows"]
    assert got["rows"][2] == 4 and dict(got["rows"][0]["t"])[1] == 7
