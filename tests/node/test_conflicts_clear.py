"""Operators delete handled conflicts from ``schema.table$EX`` with ``gateway conflicts clear``
and an admin token; a write-only token cannot, and nothing else may write the table."""

from __future__ import annotations

import asyncio
import dataclasses

from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, row_insert, row_update

from .conftest import leader_of, run, running, wait_for
from .test_conflicts_between_clusters import _exceptions, _pair, _rows

_TOKENS = ('[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["read", "write", "admin"]\n')


def test_an_admin_clears_a_handled_conflict_and_a_writer_cannot(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    a, b = _pair(tmp_path, "NDB$EPOCH")
    a = dataclasses.replace(a, tokens_file=str(tokens))
    b = dataclasses.replace(b, channels=(dataclasses.replace(b.channels[0], token="w"),))

    async def write(cfg, stmts, token=""):
        async with AsyncGatewayClient(cfg.api, token=token) as c:
            await c.write(stmts)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await write(a, [row_insert("shop.items", {"id": 1}, {"v": "base"})], "w")
            await wait_for(lambda: len(_rows(nb)) == 1, 20, "B has the row")
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >=
                           max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])), 20,
                           "A knows B applied it")
            ca = GatewayClient(a.api, timeout=20, token="a")
            cb = GatewayClient(b.api, timeout=20)
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "pause"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
            await wait_for(lambda: na.status().channels[0].state == "paused"
                           and nb.status().channels[0].state == "paused", 10, "paused")
            await write(a, [row_update("shop.items", {"id": 1}, {"v": "A1"})], "w")
            await write(b, [row_update("shop.items", {"id": 1}, {"v": "B1"})])
            await asyncio.to_thread(lambda: ca.channel_action("fromB", "resume"))
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
            await wait_for(lambda: len(_exceptions(na)) == 1, 30, "the conflict recorded")

            def cli(*args: str):
                return CliRunner().invoke(main, list(args))

            res = await asyncio.to_thread(cli, "conflicts", "list", "--target", a.api,
                                          "--token", "a", "shop.items")
            ident = res.output.strip().splitlines()[-1].split("\t")[1]
            res = await asyncio.to_thread(cli, "conflicts", "clear", "--target", a.api,
                                          "--token", "w", "shop.items", ident)
            assert res.exit_code == 2 and "needs the admin permission" in res.output, \
                res.output
            assert len(_exceptions(na)) == 1
            res = await asyncio.to_thread(cli, "conflicts", "clear", "--target", a.api,
                                          "--token", "a", "shop.items", ident)
            assert res.exit_code == 0, res.output
            assert "deleted 1 conflict(s) of shop.items" in res.output
            assert _exceptions(na) == []

    run(go(), 90)
