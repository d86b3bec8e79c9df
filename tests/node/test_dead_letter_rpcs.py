"""Dead letters of a running node through its RPCs (``DeadLetters``, ``DeadLetterAction``)
and ``gateway deadletter list|replay|discard --target``: an applier that fails, then is
fixed, gets its letters replayed through the applier the node runs."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, row_insert

from .conftest import leader_of, node_configs, run, running, wait_for

_TOKENS = ('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["read", "write", "admin"]\n')


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_dead_letters_are_listed_replayed_once_fixed_and_discarded_over_rpc(tmp_path):
    import dataclasses

    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfg = dataclasses.replace(node_configs(tmp_path, 1, appliers={"sqlite": {}})[0],
                              tokens_file=str(tokens))
    db = Path(cfg.data_dir) / "sqlite" / "gateway.db"

    def held() -> set[int]:
        with sqlite3.connect(db) as c:
            try:
                return {r[0] for r in c.execute("SELECT id FROM items")}
            except sqlite3.OperationalError:  # not created yet
                return set()

    async def go():
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, token="a") as c:
                await c.write([row_insert("shop.items", {"id": 1}, {"v": "a"})])
                await wait_for(lambda: db.exists() and held() == {1}, 30, "row 1 applied")
                with sqlite3.connect(db) as con:  # the target refuses ids 98 and 99
                    con.execute("CREATE TRIGGER refuse BEFORE INSERT ON items WHEN NEW.id "
                                "IN (98, 99) BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
                await c.write([row_insert("shop.items", {"id": 98}, {"v": "b"})])
                await c.write([row_insert("shop.items", {"id": 99}, {"v": "c"})])
                await c.write([row_insert("shop.items", {"id": 2}, {"v": "d"})])
            await wait_for(lambda: node.status().appliers[0].dead_letters == 2
                           and 2 in held(), 60, "two dead letters")

            reader = GatewayClient(cfg.api, timeout=30, token="r")
            admin = GatewayClient(cfg.api, timeout=30, token="a")
            res = await asyncio.to_thread(lambda: reader.dead_letters())
            assert [(d.applier, d.id, d.state, d.kind, d.table) for d in res.letters] == [
                ("sqlite", 1, "open", "INSERT", "shop.items"),
                ("sqlite", 2, "open", "INSERT", "shop.items")]
            assert "refused by test" in res.letters[0].error
            assert [(n.applier, n.open, n.total) for n in res.counts] == [("sqlite", 2, 2)]
            page = await asyncio.to_thread(lambda: reader.dead_letters("sqlite", limit=1))
            assert [d.id for d in page.letters] == [1] and page.next_after_id == 1
            try:
                await asyncio.to_thread(lambda: reader.dead_letter_action("sqlite", "discard",
                                                                          [2]))
                raise AssertionError("a read token discarded a dead letter")
            except GatewayError as exc:
                assert "admin" in str(exc)

            # without a token, none of the four operator RPCs answers (nothing acted on)
            anonymous = GatewayClient(cfg.api, timeout=30)
            for call in (lambda: anonymous.dead_letters(),
                         lambda: anonymous.dead_letter_action("sqlite", "discard", [2]),
                         lambda: anonymous.conflicts_list(),
                         lambda: anonymous.conflicts_replay("shop.items", ["1/2/3/4"])):
                try:
                    await asyncio.to_thread(call)
                    raise AssertionError("an operator RPC answered a call without a token")
                except GatewayError as exc:
                    assert exc.code == grpc.StatusCode.UNAUTHENTICATED, exc
            assert node.status().appliers[0].dead_letters == 2

            # conflicts: a read token lists them, only an admin may replay
            listed = await asyncio.to_thread(lambda: reader.conflicts_list())
            assert list(listed.counts) == [] and list(listed.rows) == []
            try:
                await asyncio.to_thread(lambda: reader.conflicts_replay("shop.items", ["1/2/3/4"]))
                raise AssertionError("a read token replayed a conflict")
            except GatewayError as exc:
                assert "admin" in str(exc)

            # still failing: the letter stays open
            out = await asyncio.to_thread(_cli, "deadletter", "replay", "1", "--target",
                                          cfg.api, "--token", "a")
            assert out.exit_code == 1 and "#1: still failing" in out.output, out.output
            with sqlite3.connect(db) as con:  # fixed
                con.execute("DROP TRIGGER refuse")
            out = await asyncio.to_thread(_cli, "deadletter", "replay", "1", "--target",
                                          cfg.api, "--token", "a")
            assert out.exit_code == 0 and "#1: replayed" in out.output, out.output
            assert held() == {1, 2, 98}
            again = await asyncio.to_thread(_cli, "deadletter", "replay", "1", "--target",
                                            cfg.api, "--token", "a")
            assert again.exit_code == 2 and "dead letter 1 is not open" in again.output
            done = await asyncio.to_thread(lambda: admin.dead_letter_action(
                "sqlite", "discard", [2], note="obsolete"))
            assert [(o.id, o.outcome) for o in done.outcomes] == [(2, "discarded")]
            assert held() == {1, 2, 98}
            listed = await asyncio.to_thread(_cli, "deadletter", "list", "--all", "--target",
                                             cfg.api, "--token", "r")
            assert listed.exit_code == 0, listed.output
            assert "#1 [replayed] sqlite" in listed.output
            assert "#2 [discarded] sqlite" in listed.output
            res = await asyncio.to_thread(lambda: reader.dead_letters())
            assert list(res.letters) == [] and res.counts[0].open == 0

    run(go(), 120)
