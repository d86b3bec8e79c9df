"""Read-your-writes regressions: a linearizable read that waits for the apply of the table's
first write, and read-index contexts that must not collide between nodes."""

from __future__ import annotations

import asyncio

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node import GatewayNode

from .conftest import leader_of, node_configs, run, running


def test_read_waiting_for_the_tables_first_write_sees_it(tmp_path):
    """The table's shape is looked up after the read point: a read whose read index covers the
    table's first write (applied while the read waits) finds the row instead of answering
    not-found from the shape it saw before waiting."""
    cfgs = node_configs(tmp_path, 1)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            node = nodes[0]
            await leader_of(nodes)
            real = node.driver.read_index

            async def read_index(lease: bool, timeout: float) -> int:
                # The write completes (committed and applied) while the read waits.
                await node.driver.submit_write(
                    [row_insert("t.first", {"id": 1}, {"v": "a"})], "", 0)
                return await real(lease, timeout)

            node.driver.read_index = read_index  # type: ignore[method-assign]
            async with AsyncGatewayClient(node.config.api) as c:
                assert await c.get("t.first", 1) == {"id": 1, "v": "a"}

    run(go(), 60)


def test_first_reads_on_every_node_at_once(tmp_path):
    """Each node's first read-index request used to carry the same context (a counter from
    1): the leader ignored the duplicates and the followers' reads timed out. Every node's
    first linearizable read, issued at once right after a write, must succeed and see it."""
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            async with AsyncGatewayClient(follower.config.api) as c:
                await c.write([row_insert("t.ryw", {"id": 7}, {"v": "x"})])  # forwarded

            async def read(n: GatewayNode) -> object:
                async with AsyncGatewayClient(n.config.api, timeout=5) as c:
                    return await c.get("t.ryw", 7)

            got = await asyncio.gather(*(read(n) for n in nodes))
            assert got == [{"id": 7, "v": "x"}] * 3
            prefixes = {n.driver._read_prefix for n in nodes}
            assert len(prefixes) == 3

    run(go(), 90)
