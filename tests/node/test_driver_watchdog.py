"""A Raft loop that dies (a bug, a disk failing under the log) stops the node with the reason:
never a node that answers Status and health checks while no write can ever commit."""

from __future__ import annotations

import asyncio

import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_insert

from .conftest import leader_of, node_configs, run, running


def test_a_failed_raft_loop_fails_the_waiting_write_and_stops_the_node(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_insert("t.items", {"id": 1}, {"v": "ok"})])

            def broken(entries):  # type: ignore[no-untyped-def]
                raise OSError(5, "Input/output error")

            node.sm.apply = broken  # type: ignore[method-assign]
            async with AsyncGatewayClient(cfg.api, timeout=3, attempt_timeout=2) as c:
                with pytest.raises(GatewayError):
                    await c.write([row_insert("t.items", {"id": 2}, {"v": "lost?"})])
            await asyncio.wait_for(node.wait_stopped(), 10)
            assert node.failure is not None
            assert "Raft loop failed" in node.failure and "Input/output error" in node.failure
            assert isinstance(node.driver.failure, OSError)

    run(go(), 30)
