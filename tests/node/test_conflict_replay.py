"""Conflicts of every table at once (counts per table and cause, then rows) and replaying
chosen exception rows: ``ConflictsList`` / ``ConflictsReplay`` and ``gateway conflicts
list|replay`` (docs/conflicts.md, "Listing and replaying conflicts")."""

from __future__ import annotations

import asyncio

from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, row_insert, row_update

from .conftest import leader_of, run, running, wait_for
from .test_conflicts_between_clusters import _pair, _rows


def _count(node, table):
    return sum(1 for _ in node.sm.scan_rows("shop", f"{table}$EX", [], []))


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


async def _write(cfg, stmts) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write(stmts)


async def make_conflicts(a, b, na, nb, many: int = 1000, few: int = 10) -> None:
    """``many`` conflicting updates of shop.items and ``few`` of shop.other, recorded on A
    (the PRIMARY): both channels paused, each side updates every row in one transaction,
    then both resume (tests/cli/test_console_browser_conflicts.py uses it too)."""
    await _write(a, [row_insert("shop.items", {"id": k}, {"v": f"base{k}"})
                     for k in range(many)])
    await _write(a, [row_insert("shop.other", {"id": k}, {"v": f"base{k}"})
                     for k in range(few)])
    await wait_for(lambda: len(_rows(nb)) == many and len(_rows(nb, "other")) == few,
                   60, "B has the base rows")
    newest = max(r.epoch for t in ("items", "other")
                 for r in na.sm.scan_rows("shop", t, [], []))
    await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >= newest, 30,
                   "A knows B applied them")
    ca, cb = GatewayClient(a.api, timeout=20), GatewayClient(b.api, timeout=20)
    await asyncio.to_thread(lambda: ca.channel_action("fromB", "pause"))
    await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
    await wait_for(lambda: na.status().channels[0].state == "paused"
                   and nb.status().channels[0].state == "paused", 10, "paused")
    for cfg, who in ((a, "A"), (b, "B")):
        await _write(cfg, [row_update("shop.items", {"id": k}, {"v": f"{who}{k}"})
                           for k in range(many)])
        await _write(cfg, [row_update("shop.other", {"id": k}, {"v": f"{who}{k}"})
                           for k in range(few)])
    await asyncio.to_thread(lambda: ca.channel_action("fromB", "resume"))
    await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
    await wait_for(lambda: _count(na, "items") == many and _count(na, "other") == few,
                   90, "the conflicts recorded")


def test_a_thousand_conflicts_list_per_table_survive_a_restart_and_replay_once(tmp_path):
    a, b = _pair(tmp_path, "NDB$EPOCH")
    many, few = 1000, 10

    async def conflicts():
        """1,000 conflicting updates of shop.items and 10 of shop.other on both clusters."""
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await make_conflicts(a, b, na, nb, many, few)

    async def after_restart():
        async with running(a, b) as (na, _nb):
            await leader_of([na])
            ca = GatewayClient(a.api, timeout=30)
            res = await asyncio.to_thread(lambda: ca.conflicts_list(limit=5))
            assert [(n.table, n.cause, n.count) for n in res.counts] == [
                ("shop.items", "DATA_IN_CONFLICT", many), ("shop.other", "DATA_IN_CONFLICT", few)]
            assert [r.table for r in res.rows] == ["shop.items"] * 5 and res.next_page_token
            page2 = await asyncio.to_thread(
                lambda: ca.conflicts_list(limit=5, page_token=res.next_page_token))
            assert not {r.id for r in res.rows} & {r.id for r in page2.rows}
            only = await asyncio.to_thread(lambda: ca.conflicts_list("shop.o*", limit=100))
            assert [(n.table, n.count) for n in only.counts] == [("shop.other", few)]
            assert len(only.rows) == few and not only.next_page_token

            out = await asyncio.to_thread(_cli, "conflicts", "list", "--target", a.api,
                                          "--limit", "3")
            assert out.exit_code == 0, out.output
            lines = out.output.splitlines()
            assert lines[:3] == [f"shop.items\tDATA_IN_CONFLICT\t{many}",
                                 f"shop.other\tDATA_IN_CONFLICT\t{few}",
                                 f"{many + few} conflict(s) in 2 table(s)"]
            assert len([x for x in lines if x.startswith("shop.items\t1/")]) == 3
            bad = await asyncio.to_thread(_cli, "conflicts", "list", "--target", a.api, "shop")
            assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
            assert "give a table as schema.table" in bad.output, bad.output
            bad = await asyncio.to_thread(_cli, "conflicts", "replay", "--target", a.api,
                                          "shop.other", "1/2/3")
            assert bad.exit_code == 2 and "ids[0]" in bad.output, bad.output
            status = await asyncio.to_thread(_cli, "status", "--target", a.api)
            assert f"conflict_fn_epoch {many + few}" in status.output, status.output

            # replay 10 chosen rows of shop.other: one of them changed since the conflict
            ids = [r.id for r in only.rows]
            keys = {r.id: r.row for r in only.rows}
            assert _rows(na, "other")[(0,)] == "A0"
            await _write(a, [row_update("shop.other", {"id": 0}, {"v": "later"})])
            first = await asyncio.to_thread(
                _cli, "conflicts", "replay", "--target", a.api, "shop.other", *ids)
            assert first.exit_code == 0, first.output
            assert "9 applied, 1 not applied" in first.output, first.output
            changed = [x for x in first.output.splitlines() if "changed-since" in x]
            assert len(changed) == 1, first.output
            assert "expected v = 'A0', found 'later'" in changed[0]
            held = _rows(na, "other")
            assert held[(0,)] == "later"  # reported, not overwritten
            assert {k: held[k] for k in held if k != (0,)} == {
                (k,): f"B{k}" for k in range(1, few)}
            marks = await asyncio.to_thread(lambda: ca.conflicts_list("shop.other"))
            assert sorted(r.replayed.split(" ")[0] for r in marks.rows) == \
                ["applied"] * 9 + ["changed-since"]
            listed = await asyncio.to_thread(_cli, "conflicts", "list", "--target", a.api,
                                             "shop.other")
            assert listed.output.count("\treplayed: applied ") == 9, listed.output
            async with AsyncGatewayClient(a.api, timeout=30) as ac:
                second = await ac.conflicts_replay("shop.other", ids)
            assert second.applied == 0 and second.skipped == few
            assert sorted(o.outcome for o in second.outcomes) == \
                ["already-applied"] * 9 + ["changed-since"]
            assert _rows(na, "other") == held
            assert len(keys) == few

    run(conflicts(), 240)
    run(after_restart(), 180)
