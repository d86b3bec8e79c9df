"""A removed node stops itself: once it applies a configuration without itself it shuts down
cleanly (``GatewayNode.wait_stopped`` returns, the CLI then exits 0), logging that it was
removed. The rest of the cluster keeps serving."""

from __future__ import annotations

import logging

import pytest

from gateway.client import AsyncGatewayClient, row_insert

from .conftest import leader_of, node_configs, run, running, wait_for


def test_removed_follower_stops_itself(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    cfgs = node_configs(tmp_path, 3)
    caplog.set_level(logging.INFO, logger="gateway.node.server")

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            victim = next(n for n in nodes if n is not leader)
            others = [n for n in nodes if n is not victim]
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write([row_insert("t.rm", {"id": 1}, {"v": "before"})])
                await wait_for(lambda: victim.sm.applied_index >= leader.sm.applied_index,
                               what="the victim to catch up")
                await c.remove_node(victim.config.node_id)
                # Connected when the removal committed, the victim learns the commit from
                # the leader's next append and applies its own removal.
                await wait_for(lambda: victim.removed, 15, "the victim to apply its removal")
                await victim.wait_stopped()
                assert victim.driver.removed
                r = await c.write([row_insert("t.rm", {"id": 2}, {"v": "after"})])
                assert r.log_index > 0
            await wait_for(lambda: all(victim.config.node_id not in
                                       n.driver.raw.raft.trk.progress for n in others),
                           what="removal on the others")

    run(go(), 90)
    assert any("was removed from the cluster; stopping" in r.getMessage()
               for r in caplog.records)
