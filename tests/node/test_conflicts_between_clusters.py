"""Conflict detection between two clusters replicating both ways, in process: concurrent
changes to the same rows are found on the PRIMARY, recorded in the exceptions table (on both
clusters, and on the change stream like any table), counted per channel, and the PRIMARY's
refresh realigns the SECONDARY: both end equal, on the primary's version."""

from __future__ import annotations

import asyncio
import dataclasses

from gateway.client import AsyncGatewayClient, GatewayClient, row_insert, row_update
from gateway.conflict import ConflictRule, parse_function
from gateway.node.base.config import ChannelConfig
from gateway.node.loop.write_proposal import WriteProposal

from .conftest import leader_of, node_configs, run, running, wait_for


def _rows(node, table="items"):
    return {tuple(v.int_value for v in r.key_values): r.values[0].string_value
            for r in node.sm.scan_rows("shop", table, [], [])}


def _exceptions(node):
    return [{f.name: v for f, v in zip(r.key_fields, r.key_values, strict=True)}
            | {f.name: v for f, v in zip(r.fields, r.values, strict=True)}
            for r in node.sm.scan_rows("shop", "items$EX", [], [])]


async def _write(cfg, stmts) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write(stmts)


def _pair(tmp_path, function: str):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    rule = (ConflictRule("shop.*", *parse_function(function)),)
    a = dataclasses.replace(a, channels=(ChannelConfig("fromB", (b.api,)),),
                            conflict_role="PRIMARY", conflicts=rule)
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),),
                            conflict_role="SECONDARY", conflicts=rule)
    return a, b


def test_epoch_conflicts_are_recorded_and_the_primary_realigns_the_secondary(tmp_path):
    a, b = _pair(tmp_path, "NDB$EPOCH")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for k in range(3):
                await _write(a, [row_insert("shop.items", {"id": k}, {"v": f"base{k}"})])
            await wait_for(lambda: len(_rows(nb)) == 3, 20, "B has the base rows")
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >=
                           max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])), 20,
                           "A knows B applied them")
            ca, cb = GatewayClient(a.api, timeout=20), GatewayClient(b.api, timeout=20)
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "pause"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
            await wait_for(lambda: na.status().channels[0].state == "paused"
                           and nb.status().channels[0].state == "paused", 10, "paused")
            # concurrent: both change row 1; only B changes row 2; only A row 0
            await _write(a, [row_update("shop.items", {"id": 1}, {"v": "A1"})])
            await _write(b, [row_update("shop.items", {"id": 1}, {"v": "B1"})])
            await _write(b, [row_update("shop.items", {"id": 2}, {"v": "B2"})])
            await _write(a, [row_update("shop.items", {"id": 0}, {"v": "A0"})])
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "resume"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
            want = {(0,): "A0", (1,): "A1", (2,): "B2"}
            await wait_for(lambda: _rows(na) == want and _rows(nb) == want, 30,
                           "both clusters on the primary's version")
            ex = _exceptions(na)
            assert len(ex) == 1
            e = ex[0]
            assert e["server_id"].uint_value == 1 and e["source_server_id"].uint_value == 2
            assert e["NDB$OP_TYPE"].string_value == "UPDATE_ROW"
            assert e["NDB$CFT_CAUSE"].string_value == "DATA_IN_CONFLICT"
            assert e["NDB$ORIG_TRANSID"].string_value.startswith("2:")
            assert e["id"].int_value == 1
            assert e["v$OLD"].string_value == "A1" and e["v$NEW"].string_value == "B1"
            await wait_for(lambda: len(_exceptions(nb)) == 1, 20, "B has A's exception row")
            from click.testing import CliRunner

            from gateway.cli import main

            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "list", "--target", a.api, "shop.items"]))
            assert res.exit_code == 0, res.output
            counts, total, blank, line = res.output.splitlines()
            assert counts == "shop.items\tDATA_IN_CONFLICT\t1" and not blank
            assert total == "1 conflict(s) in 1 table(s)"
            table, ident, op, cause, orig, key = line.split("\t")
            assert table == "shop.items"
            assert ident.startswith("1/2/") and ident.endswith("/1")
            assert (op, cause, key) == ("UPDATE_ROW", "DATA_IN_CONFLICT", "id=1")
            assert orig.startswith("2:")
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "show", "--target", a.api, "shop.items", ident]))
            assert res.exit_code == 0, res.output
            assert "v: 'A1' here, 'B1' in the change" in res.output
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "list", "--target", a.api, "shop.other"]))
            assert res.exit_code == 0 and "no conflicts recorded" in res.output, res.output
            counters = dict(na.status().channels[0].conflicts)
            assert counters["conflict_fn_epoch"] == 1 and counters["refresh_op_count"] == 1
            assert counters["last_conflict_epoch"] > 0
            # every MySQL counter is reported (0 until counted), with the source's max
            # replicated epoch: cluster B had applied A's epochs before this one
            from gateway.conflict.resolve import COUNTERS
            assert set(COUNTERS) | {"max_replicated_epoch"} == set(counters)
            assert 0 < counters["max_replicated_epoch"] < (1 << 64)
            assert not dict(nb.status().channels[0].conflicts).get("conflict_fn_epoch")
            ca.close()
            cb.close()

    run(go(), 90)


def test_ndb_max_keeps_the_greater_timestamp_on_both_clusters(tmp_path):
    a, b = _pair(tmp_path, "NDB$MAX(ts)")
    a = dataclasses.replace(a, conflict_role="")
    b = dataclasses.replace(b, conflict_role="")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, [row_insert("shop.items", {"id": 1}, {"v": "base", "ts": 1})])
            await wait_for(lambda: len(_rows(nb)) == 1, 20, "B has the row")
            ca, cb = GatewayClient(a.api, timeout=20), GatewayClient(b.api, timeout=20)
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "pause"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
            await wait_for(lambda: na.status().channels[0].state == "paused"
                           and nb.status().channels[0].state == "paused", 10, "paused")
            await _write(a, [row_update("shop.items", {"id": 1}, {"v": "A", "ts": 10})])
            await _write(b, [row_update("shop.items", {"id": 1}, {"v": "B", "ts": 20})])
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "resume"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
            await wait_for(lambda: _rows(na) == {(1,): "B"} and _rows(nb) == {(1,): "B"}, 30,
                           "both on the greater ts")
            await wait_for(lambda: len(_exceptions(nb)) == 1, 20, "B recorded A's change")
            e = _exceptions(nb)[0]
            # B's change won at A: A recorded nothing, and holds B's record once the channel
            # brought it (exceptions tables replicate like any table)
            await wait_for(lambda: _exceptions(na) == [e], 20, "A holds B's exception row")
            assert e["server_id"].uint_value == 2 and e["source_server_id"].uint_value == 1
            assert e["ts$OLD"].int_value == 20 and e["ts$NEW"].int_value == 10
            assert dict(nb.status().channels[0].conflicts)["conflict_fn_max"] == 1
            ca.close()
            cb.close()

    run(go(), 90)


def test_an_epoch_rule_without_a_role_stops_the_channel_with_the_reason(tmp_path):
    a, b = _pair(tmp_path, "NDB$EPOCH")
    b = dataclasses.replace(b, conflict_role="")  # B has the rule but no role

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, [row_insert("shop.items", {"id": 1}, {"v": "x"})])
            await wait_for(lambda: any("needs this cluster's conflict role" in ch.last_error
                                       for ch in nb.status().channels), 20,
                           "the refusal reported")
            assert _rows(nb) == {}  # nothing applied in part
            await asyncio.to_thread(
                lambda: GatewayClient(b.api, timeout=20).set_conflict_role("SECONDARY"))
            await wait_for(lambda: _rows(nb) == {(1,): "x"}, 20, "applied once a role is set")

    run(go(), 60)


def test_bank_transfers_under_epoch_trans_keep_the_total_and_record_every_rejection(tmp_path):
    """MySQL's ndb_rpl_bank in small: transfers between accounts written in both clusters at
    once (each a transaction setting two balances it read), NDB$EPOCH_TRANS on the primary.
    After quiescence both clusters hold the same balances, the total is what it was, and
    every transfer of the secondary that did not survive is in the exceptions table."""
    import random

    a, b = _pair(tmp_path, "NDB$EPOCH_TRANS")
    rng = random.Random(3)
    accounts = 6

    def balances(node) -> dict[int, int]:
        return {r.key_values[0].int_value: r.values[0].int_value
                for r in node.sm.scan_rows("shop", "acct", [], [])}

    def settled(node) -> bool:
        """Nothing of the cluster's log in flight: every entry applied, no write and no
        replicated epoch waiting to be proposed."""
        drv = node.driver
        return (not drv._writes and not drv._units
                and node.sm.applied_index >= drv.storage.last_index())

    async def transfer(node) -> None:
        # A transfer reads two balances and writes both: it keeps the total only if no
        # replicated epoch is applied between its read and its write (ndb_rpl_bank's
        # transactions hold row locks for that; a client's read-then-write here has none, and
        # under load an epoch landed in between now and then: 598 or 604 instead of 600). So
        # the read and the proposal happen in one step of the loop, once nothing is in
        # flight: an epoch arriving later is applied after the write, where the conflict
        # detection the test is about meets it.
        await wait_for(lambda: settled(node), 20, "nothing in flight")
        src, dst = rng.sample(range(accounts), 2)
        have = balances(node)
        amount = rng.randint(1, 5)
        await node.driver.submit_write(WriteProposal([
            row_update("shop.acct", {"id": src}, {"bal": have[src] - amount}),
            row_update("shop.acct", {"id": dst}, {"bal": have[dst] + amount})]))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, [row_insert("shop.acct", {"id": i}, {"bal": 100})
                             for i in range(accounts)])
            await wait_for(lambda: len(balances(nb)) == accounts, 20, "B has the accounts")
            for _ in range(40):  # both clusters at once, each on its own view
                await asyncio.gather(transfer(na), transfer(nb))
                await asyncio.sleep(rng.choice([0, 0.02, 0.1]))
            await wait_for(lambda: balances(na) == balances(nb), 30, "converged")
            # quiescent: no epoch in flight either way
            await asyncio.sleep(1.0)
            assert balances(na) == balances(nb)
            assert sum(balances(na).values()) == 100 * accounts
            ex = [r for r in na.sm.scan_rows("shop", "acct$EX", [], [])]
            counters = dict(na.status().channels[0].conflicts)
            assert counters.get("trans_reject_count", 0) > 0, "no conflict met: test too calm"
            assert counters["trans_row_reject_count"] == len(ex)
            causes = {f.name: v.string_value for r in ex for f, v in zip(r.fields, r.values,
                                                                         strict=True)
                      if f.name == "NDB$CFT_CAUSE"}
            assert causes  # the rows say why
            # gateway conflicts list pages through them all (one row per Scan here)
            import importlib

            cli_conflicts = importlib.import_module("gateway.cli.conflicts")

            cli_conflicts._PAGE = 1
            try:
                listed = await asyncio.to_thread(cli_conflicts._exception_rows, a.api, None,
                                                 None, "shop.acct")
            finally:
                cli_conflicts._PAGE = 1000
            assert len(listed) == len(ex) > 1
            assert len({(r["source_epoch"], r["count"]) for r in listed}) == len(ex)

    run(go(), 120)
