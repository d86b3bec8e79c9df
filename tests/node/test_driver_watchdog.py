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
            # one line, no class names: the disk failed (docs/node.md, "Disk full and fsync
            # failure")
            assert "storage failed" in node.failure and "Input/output error" in node.failure
            assert "OSError" not in node.failure
            assert isinstance(node.driver.failure, OSError)

    run(go(), 30)


def test_a_full_log_disk_fails_the_write_resource_exhausted_naming_the_segment(tmp_path, caplog):
    """ENOSPC under the Raft log (the alarm did not come in time: another process filled the
    disk): the waiting write ends RESOURCE_EXHAUSTED naming the segment relative to the data
    directory, and the node stops with one line (no traceback), to recover on restart."""
    import errno

    import grpc

    cfg = node_configs(tmp_path, 1, min_free_bytes=0)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_insert("t.items", {"id": 1}, {"v": "ok"})])
            writer = node.storage.wal._segments[-1].writer
            path = writer.path

            def full(parts):  # type: ignore[no-untyped-def]
                raise OSError(errno.ENOSPC, "No space left on device", path)

            writer.write_parts = full
            async with AsyncGatewayClient(cfg.api, timeout=3, attempt_timeout=2) as c:
                with pytest.raises(GatewayError) as ei:
                    await c.write([row_insert("t.items", {"id": 2}, {"v": "x"})])
            assert ei.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            rel = path[len(cfg.data_dir) + 1:]
            assert ei.value.details == f"node 1: out of space: {rel}"
            await asyncio.wait_for(node.wait_stopped(), 10)
            assert node.failure == f"node 1: out of space: {rel}"
        lines = [r for r in caplog.records if "this node stops" in r.getMessage()]
        assert len(lines) == 1 and lines[0].exc_info is None
        async with running(cfg) as (node,):  # recovers from what is durable
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                assert await c.get("t.items", 1) == {"id": 1, "v": "ok"}
                await c.write([row_insert("t.items", {"id": 3}, {"v": "after"})])

    run(go(), 40)

