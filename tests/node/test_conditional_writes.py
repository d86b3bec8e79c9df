"""Conditional writes (docs/node.md, "Conditional writes"): a write carries the row states it
was computed from; every replica checks them when it applies the entry and refuses the whole
transaction with FAILED_PRECONDITION naming the condition, its table and key."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from gateway.client import (
    AsyncGatewayClient,
    Condition,
    GatewayError,
    PreconditionFailed,
    row_delete,
    row_insert,
    row_update,
)
from gateway.node.base.errors import PreconditionFailed as NodePreconditionFailed
from gateway.node.replication.channels import _record
from gateway.node.state import keys
from gateway.node.state.conditions import conditions_field
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction, encode_transaction_wire, frame_statements
from gateway.raft import Entry, EntryType
from gateway.v1 import gateway_pb2, gtid_pb2, transaction_pb2

from .conftest import leader_of, node_configs, run, running, wait_for

T0 = 1_700_000_000 * 10**9


def _entry(index: int, stmts: list, conditions: list | None = None, key: str = "") -> Entry:
    """A transaction entry with trans id ``index`` (as the leader builds it)."""
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=index), epoch=1 << 32 | 1, author=1,
        start_timestamp_ns=T0 + index, commit_timestamp_ns=T0 + index, segment_id=1,
        end_segment=True, statements=stmts, conditions=conditions or [])
    return Entry(term=1, index=index, type=EntryType.NORMAL, data=encode_transaction(txn, key))


def _acct(i: int, balance: int) -> list:
    return [row_insert("bank.acct", {"id": i}, {"balance": balance})]


def _balance(sm: StoreStateMachine, i: int) -> int | None:
    from gateway.client import python_row
    from gateway.v1 import value_pb2

    row = sm.get_row("bank", "acct", [value_pb2.Value(int_value=i)])
    return None if row is None else python_row(row)["balance"]


# -- the state machine ---------------------------------------------------------------------


def test_each_condition_kind_holds_or_refuses_the_whole_transaction(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "s"))
    sm.apply([_entry(1, _acct(1, 100))])
    new_row = _acct(2, 5)
    both = [row_update("bank.acct", {"id": 1}, {"balance": 90}), *new_row]
    cases = [  # (conditions, holds)
        ([Condition.absent("bank.acct", 2)], True),
        ([Condition.absent("bank.acct", 1)], False),
        ([Condition.gtid("bank.acct", 1, (1, 1))], True),
        ([Condition.gtid("bank.acct", 1, (1, 7))], False),
        ([Condition.gtid("bank.acct", 9, (1, 1))], False),        # no such row
        ([Condition.values("bank.acct", 1, {"balance": 100})], True),
        ([Condition.values("bank.acct", 1, {"balance": 99})], False),
        ([Condition.values("bank.acct", 1, {"id": 1, "note": None})], True),  # never written
        ([Condition.values("bank.acct", 1, {"balance": None})], False),
        ([Condition.absent("bank.acct", 2), Condition.absent("bank.acct", 1)], False),
    ]
    index = 1
    for conds, holds in cases:
        index += 1
        sm2 = StoreStateMachine(str(tmp_path / f"c{index}"))
        sm2.apply([_entry(1, _acct(1, 100))])
        [out] = sm2.apply([_entry(index, both, conds)])
        assert sm2.last_trans_id == index  # a refused transaction consumes its GTID too
        if holds:
            assert out.error is None and not sm2.skipped(index), conds
            assert (_balance(sm2, 1), _balance(sm2, 2)) == (90, 5)
        else:
            assert isinstance(out.error, NodePreconditionFailed), conds
            assert sm2.skipped(index)  # appliers, subscribers and channels pass it over
            assert (_balance(sm2, 1), _balance(sm2, 2)) == (100, None)  # nothing applied
        sm2.close()
    sm.close()


def test_a_refusal_names_the_condition_its_table_and_key_and_creates_no_table(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "s"))
    sm.apply([_entry(1, _acct(1, 100))])
    [out] = sm.apply([_entry(2, [row_insert("bank.log", {"id": 1}, {"x": 1})], [
        Condition.values("bank.acct", 1, {"balance": 100}),
        Condition.values("bank.acct", 1, {"balance": 50})])])
    err = out.error
    assert isinstance(err, NodePreconditionFailed)
    assert err.field == "conditions[1]"
    assert str(err) == ("conditions[1]: bank.acct key (1): expected balance = 50, "
                        "found 100")
    assert "bank.log" not in sm.schemas  # the refused write's new table is not created
    [gone] = sm.apply([_entry(3, [row_delete("bank.acct", {"id": 1})],
                              [Condition.gtid("bank.acct", 1, (1, 2))])])
    assert str(gone.error) == ("conditions[0]: bank.acct key (1): expected the row last "
                               "written by 1:2, but 1:1 wrote it last")
    sm.close()


def test_a_condition_sees_a_row_written_earlier_in_the_same_apply_batch(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "s"))
    sm.apply([_entry(1, _acct(1, 100))])
    outs = sm.apply([
        _entry(2, [row_update("bank.acct", {"id": 1}, {"balance": 80})],
               [Condition.values("bank.acct", 1, {"balance": 100})]),
        # computed from the same read (balance 100): refused, the row changed at entry 2
        _entry(3, [row_update("bank.acct", {"id": 1}, {"balance": 70})],
               [Condition.values("bank.acct", 1, {"balance": 100})]),
        # computed from entry 2's result: holds
        _entry(4, [row_update("bank.acct", {"id": 1}, {"balance": 60})],
               [Condition.gtid("bank.acct", 1, (1, 2))]),
        _entry(5, _acct(7, 1), [Condition.absent("bank.acct", 7)]),
        _entry(6, _acct(7, 2), [Condition.absent("bank.acct", 7)]),  # inserted at 5
    ])
    assert [o.error is None for o in outs] == [True, False, True, True, False]
    assert (_balance(sm, 1), _balance(sm, 7)) == (60, 1)
    sm.close()


def test_a_retry_of_a_refused_write_gets_the_same_refusal_even_once_it_would_hold(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "s"))
    sm.apply([_entry(1, _acct(1, 100))])
    cond = [Condition.values("bank.acct", 1, {"balance": 90})]
    upd = [row_update("bank.acct", {"id": 1}, {"balance": 0})]
    [first] = sm.apply([_entry(2, upd, cond, key="k")])
    assert isinstance(first.error, NodePreconditionFailed)
    sm.apply([_entry(3, [row_update("bank.acct", {"id": 1}, {"balance": 90})])])
    [retry] = sm.apply([_entry(4, upd, cond, key="k")])  # the condition holds now
    assert str(retry.error) == str(first.error) and _balance(sm, 1) == 90
    assert sm.skipped(4)
    # the leader answers a retry without proposing it from the same record
    res = sm.idempotent_result("k", T0 + 10)
    assert res is not None and str(sm.refusal_at(res.log_index)) == str(first.error)
    # in one batch: the refusal and its retry
    outs = sm.apply([_entry(5, upd, [Condition.absent("bank.acct", 1)], key="k2"),
                     _entry(6, upd, [Condition.absent("bank.acct", 1)], key="k2")])
    assert [str(o.error) for o in outs] == [str(outs[0].error)] * 2
    assert outs[0].error is not None and _balance(sm, 1) == 90
    sm.close()


def test_replaying_the_log_in_other_batches_decides_and_stores_the_same(tmp_path):
    log = [_entry(1, _acct(1, 100))]
    for i in range(2, 40):  # pairs of increments computed from one read: one of each fails
        prev = 100 + (i - 2) // 2
        log.append(_entry(i, [row_update("bank.acct", {"id": 1}, {"balance": prev + 1})],
                          [Condition.values("bank.acct", 1, {"balance": prev})],
                          key=f"k{i % 5}"))
    outcomes = []
    stores = []
    for n, cut in enumerate(([len(log)], [1] * len(log), [3, 7, 1, 20, 8])):
        sm = StoreStateMachine(str(tmp_path / f"r{n}"))
        got, at = [], 0
        for size in cut:
            got += [str(o.error) if o.error else o.result.log_index
                    for o in sm.apply(log[at:at + size])]
            at += size
        got += [str(o.error) if o.error else o.result.log_index for o in sm.apply(log[at:])]
        sm.flush()
        outcomes.append(got)
        stores.append(sorted(sm.store.scan(b"", b"\xff")))
        sm.close()
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert stores[0] == stores[1] == stores[2]
    assert any(isinstance(o, str) for o in outcomes[0]) and any(
        isinstance(o, int) for o in outcomes[0])


def test_a_conditional_entry_is_the_serialized_transaction_and_plain_ones_unchanged():
    stmts = _acct(1, 5)
    conds = [Condition.absent("bank.acct", 1), Condition.gtid("bank.acct", 2, (1, 3))]
    raw = frame_statements(stmts)
    plain = encode_transaction_wire(1, 9, 4, 1, T0, T0 + 1, raw, "k")
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=9), epoch=4, author=1, start_timestamp_ns=T0,
        commit_timestamp_ns=T0 + 1, statements=stmts, segment_id=1, end_segment=True,
        idempotency_key="k")
    assert plain == encode_transaction(txn)
    txn.conditions.extend(conds)
    assert plain + conditions_field(conds) == encode_transaction(txn)


def test_a_channel_strips_conditions_from_replicated_transactions():
    txn = transaction_pb2.Transaction(statements=_acct(1, 5),
                                      conditions=[Condition.absent("bank.acct", 1)])
    rec = _record(gateway_pb2.ChangeEvent(log_index=3, transaction=txn))
    assert not rec.item.transaction.conditions
    assert list(rec.item.transaction.statements) == list(txn.statements)


# -- through the API ---------------------------------------------------------------------------


async def _increment(c: AsyncGatewayClient, times: int) -> int:
    """Read-modify-write ``times`` increments of bank.acct 1, retrying refused ones."""
    refused = 0
    for _ in range(times):
        while True:
            resp = await c.read("bank.acct", 1)
            row = resp.row
            value = row.values[0].int_value
            try:
                await c.write([row_update("bank.acct", {"id": 1}, {"balance": value + 1})],
                              conditions=[Condition.gtid("bank.acct", 1, row.gtid)])
                break
            except PreconditionFailed as exc:
                assert exc.table == "bank.acct" and exc.key == [1]
                refused += 1
    return refused


def test_two_clients_incrementing_one_row_lose_no_update(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            await leader_of(nodes)
            async with AsyncGatewayClient(cfgs[0].api) as a, \
                    AsyncGatewayClient(cfgs[1].api) as b:
                await a.write(_acct(1, 0))
                refused = await asyncio.gather(_increment(a, 25), _increment(b, 25))
                got = await a.get("bank.acct", 1)
                assert got == {"id": 1, "balance": 50}, (got, refused)

    run(go(), timeout=120)


async def _transfers(c: AsyncGatewayClient, moves: list[tuple[int, int, int]]) -> None:
    """Each ``(from, to, amount)`` as a read-modify-write of both accounts, conditioned on
    the GTIDs read, retried when refused."""
    for src, dst, amount in moves:
        while True:
            a = (await c.read("bank.acct", src)).row
            b = (await c.read("bank.acct", dst)).row
            debit = a.values[0].int_value - amount
            credit = b.values[0].int_value + amount
            try:
                await c.write([
                    row_update("bank.acct", {"id": src}, {"balance": debit}),
                    row_update("bank.acct", {"id": dst}, {"balance": credit}),
                ], conditions=[Condition.gtid("bank.acct", src, a.gtid),
                               Condition.gtid("bank.acct", dst, b.gtid)])
                break
            except PreconditionFailed:
                continue


def test_concurrent_transfers_keep_the_total(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            await leader_of(nodes)
            async with AsyncGatewayClient(cfgs[0].api) as a, \
                    AsyncGatewayClient(cfgs[2].api) as b:
                await a.write_batch([_acct(i, 200) for i in range(3)])
                moves_a = [(i % 3, (i + 1) % 3, 7) for i in range(15)]
                moves_b = [((i + 1) % 3, i % 3, 5) for i in range(15)]
                await asyncio.gather(_transfers(a, moves_a), _transfers(b, moves_b))
                got = [(await a.get("bank.acct", i))["balance"] for i in range(3)]
                assert sum(got) == 600, got
                # every transfer applied once: account 0 sent 7 five times and got 7 five
                # times, got 5 five times and sent 5 five times, ...
                assert got == [200, 200, 200], got

    run(go(), timeout=120)


def test_refusals_through_write_batch_stream_and_a_follower(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            async with AsyncGatewayClient(follower.config.api) as c:
                await c.write(_acct(1, 100))
                with pytest.raises(PreconditionFailed) as info:
                    await c.write([row_update("bank.acct", {"id": 1}, {"balance": 1})],
                                  conditions=[Condition.absent("bank.acct", 2),
                                              Condition.values("bank.acct", 1, {"balance": 7})])
                err = info.value
                assert err.code == grpc.StatusCode.FAILED_PRECONDITION
                assert (err.field, err.condition_index, err.table, err.key) == (
                    "conditions[1]", 1, "bank.acct", [1])
                assert "bank.acct key (1): expected balance = 7, found 100" in err.details
                # a batch: only the refused write fails
                with pytest.raises(PreconditionFailed) as info:
                    await c.write_batch(
                        [_acct(2, 1), _acct(3, 1), _acct(4, 1)],
                        conditions=[[], [Condition.absent("bank.acct", 1)], []])
                err = info.value
                assert err.index == 1 and err.table == "bank.acct" and len(err.errors) == 1
                assert err.results[1] is None
                assert err.results[0].log_index and err.results[2].log_index
                assert await c.get("bank.acct", 2) == {"id": 2, "balance": 1}
                assert await c.get("bank.acct", 3) is None
                assert await c.get("bank.acct", 4) == {"id": 4, "balance": 1}
                # an invalid condition is refused before anything is proposed
                with pytest.raises(GatewayError) as bad:
                    await c.write(_acct(5, 1), conditions=[
                        Condition.values("bank.acct", 1, {"nope": 1})])
                assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert bad.value.field == "conditions[0].values.fields[0]"
            async with AsyncGatewayClient(leader.config.api) as c, c.stream() as s:
                ok = await s.send(_acct(6, 1), conditions=[Condition.absent("bank.acct", 6)])
                no = await s.send(_acct(7, 1), conditions=[Condition.absent("bank.acct", 6)])
                assert (await ok).log_index
                with pytest.raises(PreconditionFailed) as info:
                    await no
                assert info.value.field == "conditions[0]" and info.value.key == [6]

    run(go(), timeout=120)


def test_a_refused_write_is_decided_alike_after_a_restart_replays_it(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write(_acct(1, 100))
                await c.write([row_update("bank.acct", {"id": 1}, {"balance": 90})],
                              conditions=[Condition.values("bank.acct", 1, {"balance": 100})])
                with pytest.raises(PreconditionFailed) as first:
                    await c.write([row_update("bank.acct", {"id": 1}, {"balance": 80})],
                                  conditions=[Condition.values("bank.acct", 1,
                                                               {"balance": 100})],
                                  idempotency_key="retry-me")
            refused_at = node.sm.idempotent_result("retry-me", time.time_ns()).log_index
            last = node.sm.last_trans_id
            # crash-like stop: the store's memtable is lost, the log replays every entry
            node.sm.store.abandon()
            node.sm.close = lambda: None  # type: ignore[method-assign]
            node.sm.flush = lambda: None  # type: ignore[method-assign]
        async with running(cfg) as (node2,):
            await leader_of([node2])
            await wait_for(lambda: node2.sm.applied_index >= refused_at)
            assert node2.sm.skipped(refused_at)
            # the appliers' and Subscribe's feed: no transaction at the refused entry
            from gateway.node.appliers.feed import CommittedLogSource

            fed = {e.index: e for e in CommittedLogSource(node2.driver).read(refused_at - 1, 2)}
            assert fed[refused_at].transaction is None and not fed[refused_at].replicated
            assert fed[refused_at - 1].transaction is not None  # the update that held
            assert str(node2.sm.refusal_at(refused_at)) == f"{first.value.details}"
            assert node2.sm.last_trans_id >= last
            assert node2.sm.get_row("bank", "acct", [keys_value(1)]).values[0].int_value == 90
            async with AsyncGatewayClient(cfg.api) as c:
                with pytest.raises(PreconditionFailed) as again:
                    await c.write([row_update("bank.acct", {"id": 1}, {"balance": 80})],
                                  conditions=[Condition.values("bank.acct", 1,
                                                               {"balance": 100})],
                                  idempotency_key="retry-me")
                assert again.value.details == first.value.details
                r = await c.write([row_insert("bank.acct", {"id": 2}, {"balance": 0})])
                assert r.gtid.trans_id == last + 1  # the refused write's GTID stays used

    run(go(), timeout=120)


def keys_value(i: int):  # type: ignore[no-untyped-def]
    from gateway.v1 import value_pb2

    return value_pb2.Value(int_value=i)


def test_store_key_of_a_refusal_marker_is_the_entry_outcome(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "s"))
    [out] = sm.apply([_entry(1, _acct(1, 1), [Condition.gtid("bank.acct", 1, (1, 1))])])
    assert sm.store.get(keys.entry_outcome_key(1)) == \
        b"refused: conditions[0]: bank.acct key (1): the row does not exist"
    assert out.error is not None
    sm.close()


# -- gateway sql -------------------------------------------------------------------------------


def test_sql_update_where_on_non_key_columns_is_a_condition():
    from gateway.cli.sql import SqlError, sql_to_statements, sql_to_write

    keys_of = {"bank.acct": ["id"], "bank.pair": ["a", "b"]}.get
    stmts, conds = sql_to_write("UPDATE bank.acct SET balance = 90 WHERE id = 1 AND "
                                "balance = 100", key_of=keys_of)
    assert [f.name for f in stmts[0].update.key_fields] == ["id"]
    assert [v.int_value for v in stmts[0].update.records[0].key_values] == [1]
    assert conds == [Condition.values("bank.acct", [1], {"balance": 100})]
    stmts, conds = sql_to_write("DELETE FROM bank.pair WHERE b = 2 AND a = 1 AND x = 'y'",
                                key_of=keys_of)
    assert [v.int_value for v in stmts[0].delete.records[0].key_values] == [1, 2]
    assert conds == [Condition.values("bank.pair", [1, 2], {"x": "y"})]
    assert sql_to_write("UPDATE bank.acct SET a = 1 WHERE id = 1", key_of=keys_of)[1] == []
    with pytest.raises(SqlError, match=r"every key column of bank\.pair \(a, b\): 'b' is missing"):
        sql_to_write("UPDATE bank.pair SET x = 1 WHERE a = 1 AND x = 2", key_of=keys_of)
    # without a known key every WHERE column is a key column, as before
    assert len(sql_to_statements("UPDATE bank.acct SET a = 1 WHERE id = 1 AND balance = 2")[0]
               .update.key_fields) == 2


def test_gateway_sql_update_with_a_stale_where_is_refused(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from .conftest import free_ports

    gw = [sys.executable, "-m", "gateway.cli"]
    env = dict(os.environ)  # PYTHONPATH names this checkout (tests/conftest.py)
    api, peer = free_ports(2)
    target = f"127.0.0.1:{api}"
    proc = subprocess.Popen(
        [*gw, "run", "--api", target, "--listen", f"127.0.0.1:{peer}", "--data-dir",
         str(tmp_path / "data"), "--appliers", ""], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*gw, *args], capture_output=True, text=True, timeout=60,
                              env=env)

    try:
        deadline = time.monotonic() + 60
        while cli("sql", "-t", target, "INSERT INTO bank.acct (id, balance) VALUES (1, 100)"
                  ).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        ok = cli("sql", "-t", target,
                 "UPDATE bank.acct SET balance = 90 WHERE id = 1 AND balance = 100")
        assert ok.returncode == 0, ok.stderr
        stale = cli("sql", "-t", target,
                    "UPDATE bank.acct SET balance = 80 WHERE id = 1 AND balance = 100")
        assert stale.returncode == 1
        assert ("FAILED_PRECONDITION: conditions[0]: bank.acct key (1): expected balance = "
                "100, found 90") in stale.stderr and "Traceback" not in stale.stderr
        got = cli("get", "-t", target, "bank.acct", "1")
        assert '"balance": 90' in got.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_the_sqlite_applier_gets_held_conditional_writes_and_not_refused_ones(tmp_path):
    import sqlite3
    from pathlib import Path

    cfg = node_configs(tmp_path, 1, appliers={"sqlite": {}})[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write(_acct(1, 100), conditions=[Condition.absent("bank.acct", 1)])
                with pytest.raises(PreconditionFailed):
                    await c.write([row_update("bank.acct", {"id": 1}, {"balance": 5})],
                                  conditions=[Condition.absent("bank.acct", 1)],
                                  idempotency_key="refused")
            refused_at = node.sm.idempotent_result("refused", time.time_ns()).log_index
            path = Path(cfg.data_dir) / "sqlite" / "gateway.db"

            def balance() -> int | None:
                try:
                    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                        got = db.execute("SELECT balance FROM acct WHERE id = 1"
                                         ).fetchone()
                        return got[0] if got else None
                except sqlite3.Error:
                    return None

            def position() -> int:
                return next(a.position for a in node.applier_status() if a.name == "sqlite")

            await wait_for(lambda: position() >= refused_at, 20, "the applier past the refusal")
            assert balance() == 100  # the refused update never reached SQLite
            async with AsyncGatewayClient(cfg.api) as c:
                last = await c.write([row_update("bank.acct", {"id": 1}, {"balance": 7})],
                                     conditions=[Condition.values("bank.acct", 1,
                                                                  {"balance": 100})])
            await wait_for(lambda: balance() == 7, 20, "the held update in SQLite")
            assert not any(s.dead_letters for s in node.applier_status())
            assert last.gtid.trans_id == 3  # the refused write consumed trans id 2

    run(go())


def test_log_dump_shows_a_conditional_writes_conditions():
    from gateway.cli import logtool
    from gateway.core.messages import TypeTag

    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=5), epoch=2, author=1, segment_id=1,
        end_segment=True, statements=_acct(9, 1), conditions=[
            Condition.absent("bank.acct", 9), Condition.gtid("bank.acct", 1, (1, 4)),
            Condition.values("bank.acct", [1], {"balance": 100, "note": None})])
    lines = logtool.render_text(logtool.LogEntry(offset=2, tag=TypeTag.TRANSACTION,
                                                 message=txn))
    assert lines[3:6] == ["# Condition: bank.acct key (9): absent",
                          "# Condition: bank.acct key (1): gtid (1,4)",
                          "# Condition: bank.acct key (1): balance = 100, note = NULL"]
