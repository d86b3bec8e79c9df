"""A new applier on a running node is backfilled from the store at an index, then follows the
log after it, under writes; a backfill cut short resumes after its last chunk (issue 54 item
4). Before, a new applier replayed the whole log from its first entry (or stopped, once it
was compacted) and Status said nothing of it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from gateway.appliers.contract import Applier, ApplierFactory, Capabilities
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.durable import reconcile
from gateway.appliers.position import BackfillProgress, PositionStore
from gateway.appliers.sqlite import SqliteApplier
from gateway.cli import main as cli_main
from gateway.client import AsyncGatewayClient, row_delete, row_insert, row_update
from gateway.core.rowops import OpKind, RowOp
from gateway.node import GatewayNode
from gateway.node.appliers import backfill as backfill_mod
from gateway.node.appliers.applier_rebuild import stored_row_ops
from gateway.node.appliers.backfill import _rows, run_backfill, stored_columns, table_order
from gateway.node.appliers.feed import CommittedLogSource
from gateway.node.base.config import ConfigError
from gateway.node.state import keys
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, value_pb2

from .conftest import node_configs, run, running, wait_for
from .test_cluster_appliers import plugins_of

CHUNK = 100


def _store_rows(node: GatewayNode) -> list[tuple[int, str]]:
    with node.sm.store.snapshot() as view:
        return sorted((op.key[0], op.values[0])
                      for op in stored_row_ops(view.scan_prefix(keys.table_prefix("t", "j"))))


def _sqlite_rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute('SELECT id, v FROM "j"').fetchall())


async def _fill(c: AsyncGatewayClient, n: int) -> None:
    for start in range(0, n, 500):
        await c.write([row_insert("t.j", {"id": i}, {"v": f"v{i}"})
                       for i in range(start, min(n, start + 500))])


def test_a_sqlite_sink_added_to_a_running_node_backfills_then_follows_under_writes(
        tmp_path, monkeypatch):
    n = 6000
    cfg = node_configs(tmp_path, 1)[0]
    monkeypatch.setattr(backfill_mod, "CHUNK_ROWS", CHUNK)
    # The backfill waits once its second chunk is applied (not yet saved) until the writer
    # has written: every kind of change lands between the snapshot and the follow, on rows
    # delivered and rows not yet.
    paused, resume = threading.Event(), threading.Event()
    deliver = backfill_mod._Delivery.__call__
    calls = [0]

    def gated(self, chunk, index):
        deliver(self, chunk, index)
        calls[0] += 1
        if calls[0] == 2:
            paused.set()
            assert resume.wait(30)

    monkeypatch.setattr(backfill_mod._Delivery, "__call__", gated)

    async def go() -> None:
        async with running(cfg) as nodes:
            async with AsyncGatewayClient(cfg.api) as c:
                await _fill(c, n)
            filled_at = nodes[0].sm.applied_index
        sink = replace(cfg, appliers={"sqlite": {}})
        async with running(sink) as nodes:
            node = nodes[0]
            await asyncio.to_thread(paused.wait, 30)
            st = node.status().appliers[0]
            assert (st.backfill_state, st.backfill_rows) == ("running", CHUNK)
            assert st.backfill_index >= filled_at and st.backfill_last_key
            shown = await asyncio.to_thread(CliRunner().invoke, cli_main,
                                            ["status", "--target", cfg.api])
            assert shown.exit_code == 0, shown.output
            assert (f"backfill from the store at log index {st.backfill_index}: {CHUNK} rows "
                    f"delivered, last key {st.backfill_last_key}") in shown.output
            async with AsyncGatewayClient(cfg.api) as c:
                for k in range(40):
                    low, high = 7 * k, n - 1 - 7 * k  # delivered already / not yet
                    await c.write([row_update("t.j", {"id": low}, {"v": f"u{k}"}),
                                   row_update("t.j", {"id": high}, {"v": f"u{k}"})])
                    await c.write([row_delete("t.j", {"id": low + 1}),
                                   row_delete("t.j", {"id": high - 1})])
                    await c.write([row_insert("t.j", {"id": n + k}, {"v": "new"})])
                    await c.write([row_insert("t.j", {"id": 2 * n + k}, {"v": "gone"}),
                                   row_update("t.j", {"id": low + 2}, {"v": "x"})])
                    await c.write([row_delete("t.j", {"id": 2 * n + k})])
                resume.set()
                for k in range(40):  # and after the backfill resumed
                    await c.write([row_update("t.j", {"id": 3 * k}, {"v": f"w{k}"})])
            await wait_for(lambda: (a := node.status().appliers[0]).backfill_state == "done"
                           and a.position >= node.sm.applied_index, 60,
                           what="the backfill to finish and the applier to catch up")
            st = node.status().appliers[0]
            assert not st.error
            assert st.backfill_index < node.sm.applied_index  # writes came after it
            rows = _sqlite_rows(Path(cfg.data_dir) / "sqlite" / "gateway.db")
            assert len(rows) == n - 80 + 40
            assert rows == _store_rows(node)

    run(go(), 120)


class _Kill(BaseException):
    """Stands for a kill -9 of the node: nothing after it runs (not an ``Exception``: no
    handler of the applier path may catch it)."""


def _counting(applier: SqliteApplier, seen: list, kill_after: int | None = None) -> None:
    """Count the rows each ``apply_columns`` call of ``applier`` commits; with
    ``kill_after``, die right after the commit of that call (before its position is saved)."""
    real = applier.apply_columns

    def apply_columns(batches, gtids, ops=()):
        batches = list(batches)
        got = real(batches, gtids, ops)
        seen.extend((b.table.name, k) for b in batches for k in b.key[0])
        if kill_after is not None and len(seen) >= kill_after:
            raise _Kill
        return got

    applier.apply_columns = apply_columns  # type: ignore[method-assign]


def test_a_backfill_killed_mid_way_resumes_after_its_last_chunk_and_ends_equal(tmp_path):
    n = 4000
    cfg = node_configs(tmp_path, 1)[0]
    state = tmp_path / "appliers"
    db = tmp_path / "sink.db"
    config = DispatcherConfig(window=64)

    async def go() -> None:
        async with running(cfg) as nodes:
            node = nodes[0]
            source = CommittedLogSource(node.driver)
            async with AsyncGatewayClient(cfg.api) as c:
                await _fill(c, n)
                first = SqliteApplier(db)
                seen1: list = []
                _counting(first, seen1, kill_after=15 * CHUNK)
                d1 = Dispatcher(first, source, state, config=config)
                pos = PositionStore(state, "sqlite")
                try:
                    await asyncio.to_thread(run_backfill, first, d1, pos, node.sm.store,
                                            pos.load(), chunk_rows=CHUNK)
                except _Kill:
                    pass
                else:
                    raise AssertionError("the backfill was not killed")
                first.close()
                # While it is down, rows on both sides of its last key change; one row is
                # inserted before the resumed snapshot and deleted after it, by transactions
                # the dispatcher reduces in one window.
                for k in range(30):
                    await c.write([row_update("t.j", {"id": 11 * k}, {"v": f"u{k}"}),
                                   row_update("t.j", {"id": n - 1 - 11 * k}, {"v": f"u{k}"})])
                    await c.write([row_delete("t.j", {"id": 11 * k + 1}),
                                   row_delete("t.j", {"id": n - 2 - 11 * k})])
                await c.write([row_insert("t.j", {"id": 10 * n}, {"v": "z"}),
                               row_update("t.j", {"id": 5}, {"v": "z5"})])

                second = SqliteApplier(db)
                seen2: list = []
                _counting(second, seen2)
                d2 = Dispatcher(second, source, state, config=config)
                held = reconcile(second, pos, pos.load(), str(db))
                assert held.backfill is not None and not held.backfill.done
                assert held.backfill.rows == 14 * CHUNK  # the chunk in flight was not saved
                final = await asyncio.to_thread(run_backfill, second, d2, pos, node.sm.store,
                                                held, chunk_rows=CHUNK)
                assert final is not None and final.backfill is not None
                assert final.backfill.done and final.backfill.resumes == 1
                assert final.backfill.replay_until > final.backfill.snapshot_index
                await c.write([row_delete("t.j", {"id": 10 * n})])
                await c.write([row_insert("t.j", {"id": 10 * n + 1}, {"v": "after"})])
            await asyncio.to_thread(d2.run, max_index=node.sm.applied_index)
            second.close()
            redone = len(set(seen1) & set(seen2))
            assert 0 < redone < 0.05 * n, redone
            assert len(seen1) + len(seen2) - redone == len(set(seen1) | set(seen2))
            rows = _sqlite_rows(db)
            assert len(rows) == n - 60 + 1
            assert rows == _store_rows(node)

    run(go(), 120)


class _ModelApplier(Applier):
    """A shared external store (cluster scope, no ``reset_target``, no ``columns``): the
    generic row path, on several threads."""

    def __init__(self) -> None:
        self.name = "model"
        self.capabilities = Capabilities(max_batch=50)
        self.lock = threading.Lock()
        self.rows: dict = {}
        self.backfilled: list[int] = []  # the snapshot index of every backfill row
        self.threads: set[str] = set()

    def apply(self, ops) -> None:
        with self.lock:
            self.threads.add(threading.current_thread().name)
            for op in ops:
                assert isinstance(op, RowOp) and op.kind is not OpKind.MOVE
                if op.backfill:
                    assert op.kind is OpKind.UPSERT
                    self.backfilled.append(op.backfill)
                row = dict(zip((c.name for c in op.columns), op.values, strict=True))
                if op.kind in (OpKind.INSERT, OpKind.UPSERT):
                    self.rows[op.key[0]] = row["v"]
                elif op.kind is OpKind.UPDATE and op.key[0] in self.rows:
                    self.rows[op.key[0]] = row.get("v", self.rows[op.key[0]])
                elif op.kind is OpKind.DELETE:
                    self.rows.pop(op.key[0], None)


def test_a_cluster_scoped_sink_gets_the_backfill_through_the_generic_path(
        tmp_path, monkeypatch):
    n = 2000
    monkeypatch.setattr(backfill_mod, "CHUNK_ROWS", CHUNK)
    model = _ModelApplier()
    factory = ApplierFactory("model", lambda _opts: model, "a model of an external store", {},
                             scope="cluster")
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg), AsyncGatewayClient(cfg.api) as c:
            await _fill(c, n)
        async with running(replace(cfg, appliers={"model": {}}),
                           plugins=plugins_of(factory)) as nodes:
            node = nodes[0]
            async with AsyncGatewayClient(cfg.api) as c:
                for k in range(30):
                    await c.write([row_update("t.j", {"id": 60 * k}, {"v": f"u{k}"}),
                                   row_delete("t.j", {"id": 60 * k + 1})])
                    await c.write([row_insert("t.j", {"id": n + k}, {"v": "new"})])
            await wait_for(lambda: (a := node.status().appliers[0]).backfill_state == "done"
                           and a.position >= node.sm.applied_index, 60,
                           what="the backfill to finish and the applier to catch up")
            st = node.status().appliers[0]
            assert not st.error and st.backfill_rows == len(model.backfilled)
            assert set(model.backfilled) == {st.backfill_index}
            assert len(model.threads) > 1  # the dispatcher's worker count, not one thread
            assert sorted(model.rows.items()) == _store_rows(node)
            # the progress is replicated with the position (a new leader resumes from it)
            await wait_for(lambda: node.sm.applier_positions.get("model") is not None
                           and node.sm.applier_positions["model"].backfill.done, 15,
                           what="the finished backfill to be replicated")

    run(go(), 120)


def _row(table: str, key: int, fields: dict) -> tuple[bytes, bytes]:
    """A stored row ``(key, serialized Row)``: ``fields`` maps a name to (type, Value)."""
    ft = value_pb2.FieldType
    row = gateway_pb2.Row(
        table=statement_pb2.TableMetadata(schema_name="s", table_name=table),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=ft.FIELD_TYPE_INTEGER)],
        key_values=[value_pb2.Value(int_value=key)],
        fields=[statement_pb2.FieldMetadata(name=n, type=t) for n, (t, _) in fields.items()],
        values=[v for _, v in fields.values()],
        gtid=gtid_pb2.Gtid(server_id=2, trans_id=key + 10), log_index=key + 20)
    return keys.row_key("s", table, [value_pb2.Value(int_value=key)]), row.SerializeToString()


def test_stored_columns_give_the_rows_stored_row_ops_gives():
    ft = value_pb2.FieldType
    null = value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    chunk = [
        _row("a", 1, {"d": (ft.FIELD_TYPE_DECIMAL, value_pb2.Value(decimal_value="1.50")),
                      "b": (ft.FIELD_TYPE_BLOB, value_pb2.Value(bytes_value=b"\x00"))}),
        _row("a", 2, {"d": (ft.FIELD_TYPE_DECIMAL, null),
                      "b": (ft.FIELD_TYPE_BLOB, value_pb2.Value(bytes_value=b""))}),
        _row("a", 3, {"d": (ft.FIELD_TYPE_DECIMAL, value_pb2.Value(decimal_value="7"))}),
        _row("b", 4, {"u": (ft.FIELD_TYPE_UNSIGNED, value_pb2.Value(uint_value=2**64 - 1))}),
        _row("b", 5, {"u": (ft.FIELD_TYPE_UNSIGNED, value_pb2.Value(uint_value=0))}),
    ]
    batches, gtids = stored_columns(chunk)
    ops = list(stored_row_ops(iter(chunk)))
    got = [(b.table, b.kind, b.key_columns, b.columns, tuple(k[r] for k in b.key),
            tuple(v[r] for v in b.values)) for b in batches for r in range(len(b))]
    assert got == [(o.table, o.kind, o.key_columns, o.columns, o.key, o.values) for o in ops]
    assert [len(b) for b in batches] == [2, 1, 2]  # a run per table and set of columns
    assert gtids == [tuple(o.gtid) for o in ops]
    bad = _row("a", 6, {"d": (ft.FIELD_TYPE_DECIMAL, value_pb2.Value(int_value=3))})
    for decode in (stored_columns, lambda c: list(stored_row_ops(iter(c)))):
        try:
            decode([bad])
        except ValueError as exc:
            assert "int_value" in str(exc)
        else:
            raise AssertionError("a value its column cannot hold was accepted")


def test_tables_of_one_name_are_read_in_the_order_the_log_created_them_and_resumed_so(
        tmp_path):
    """The SQLite applier keeps the first table of a name and refuses the others: key order
    (schema ``a`` before ``b``) would keep the wrong one. The order is saved in the progress
    and a resumed backfill continues in it from the table of its last key."""
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,), AsyncGatewayClient(cfg.api) as c:
            for table in ("b.items", "a.items", "c.t"):  # the log creates b.items first
                await c.write([row_insert(table, {"id": i}, {"v": table}) for i in range(30)])
            prefix = {t: keys.table_prefix(*t.split(".")) for t in ("a.items", "b.items", "c.t")}
            with node.sm.store.snapshot() as view:
                order = table_order(view)
                assert order == (prefix["b.items"], prefix["a.items"], prefix["c.t"])
                last = [k for k, _ in view.scan_prefix(prefix["a.items"])][19]
                rest = [k for k, _ in _rows(view, BackfillProgress(1, last, tables=order))]
                assert rest == [k for t in ("a.items", "c.t")
                                for k, _ in view.scan_prefix(prefix[t])][20:]
                fresh = [k for k, _ in _rows(view, BackfillProgress(1, tables=order))]
                assert fresh == [k for p in order for k, _ in view.scan_prefix(p)]
            await c.write([row_insert("d.t", {"id": 1}, {"v": "x"})])
            await c.write([row_insert("d.items", {"id": 1}, {"v": "x"})])
            with node.sm.store.snapshot() as view:  # tables made after the list: at its end
                last = [k for k, _ in view.scan_prefix(prefix["c.t"])][-1]
                rest = [k for k, _ in _rows(view, BackfillProgress(1, last, tables=order))]
                assert len(rest) == 2 and rest[0].startswith(keys.table_prefix("d", "items"))
                assert rest[1].startswith(keys.table_prefix("d", "t"))

    run(go(), 60)


def test_a_bad_backfill_chunk_size_is_a_config_error_naming_the_key(tmp_path):
    for bad in ("0", "-3", "many"):
        try:
            node_configs(tmp_path, 1, appliers={"sqlite": {"backfill_chunk_rows": bad}})
        except ConfigError as exc:
            assert str(exc).startswith("appliers.sqlite.backfill_chunk_rows: must be a "
                                       "positive integer") and repr(bad) in str(exc)
        else:
            raise AssertionError(f"backfill_chunk_rows={bad!r} was accepted")
    (cfg,) = node_configs(tmp_path, 1, appliers={"sqlite": {"backfill_chunk_rows": "64"}})
    assert cfg.backfill_chunk_rows("sqlite") == 64
    assert cfg.applier_settings("sqlite") == (None, {})  # not an option of the factory
