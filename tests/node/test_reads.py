"""Read-your-writes regressions: a linearizable read that waits for the apply of the table's
first write, and read-index contexts that must not collide between nodes."""

from __future__ import annotations

import asyncio

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node import GatewayNode
from gateway.node.loop.write_proposal import WriteProposal

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
                await node.driver.submit_write(WriteProposal(
                    [row_insert("t.first", {"id": 1}, {"v": "a"})], "", 0))
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


def test_concurrent_linearizable_reads_share_read_index_rounds(tmp_path):
    """Many linearizable reads at once on a 3-node leader take far fewer read-index rounds
    than reads, and every read sees each write acknowledged before it began -- also a read
    that arrives while a round is in flight (it waits for the next round)."""
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            driver = leader.driver
            rounds = []
            real_round = driver._read_round

            async def counted(lease: bool, timeout: float) -> int:
                rounds.append(lease)
                await asyncio.sleep(0.05)  # a slow quorum round trip: the reads pile up
                return await real_round(lease, timeout)

            driver._read_round = counted  # type: ignore[method-assign]
            async with AsyncGatewayClient(leader.config.api, timeout=10) as c:
                for round_ in range(5):
                    await c.write([row_insert("t.rounds", {"id": 1}, {"v": str(round_)})])
                    got = await asyncio.gather(*(c.get("t.rounds", 1) for _ in range(40)))
                    assert got == [{"id": 1, "v": str(round_)}] * 40
            assert rounds and not any(rounds)
            assert len(rounds) <= 5 * 40 // 8, len(rounds)

    run(go(), 60)


def test_a_linearizable_read_past_its_timeout_fails_alone(tmp_path):
    """A read whose read-index round does not confirm in time raises ``ReadTimeoutError``
    (its own future cancelled, nothing else): the round still ends for the reads that wait
    with it, and the next read is served."""
    from gateway.node.base.errors import ReadTimeoutError

    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            driver = leader.driver
            real_round = driver._read_round

            async def slow(lease: bool, timeout: float) -> int:
                await asyncio.sleep(0.5)
                return await real_round(lease, timeout)

            driver._read_round = slow  # type: ignore[method-assign]
            impatient = asyncio.ensure_future(driver.read_index(False, 0.1))
            patient = asyncio.ensure_future(driver.read_index(False, 5))
            try:
                await impatient
                raise AssertionError("the impatient read did not time out")
            except ReadTimeoutError:
                pass
            assert await patient >= 1
            driver._read_round = real_round  # type: ignore[method-assign]
            assert await driver.read_index(False, 5) >= 1

    run(go(), 60)
