"""Two channels of one cluster from the same source cluster get a warning: when the second
is added (its source answers as the first's) and on both channels' status."""

from __future__ import annotations

import asyncio
import dataclasses

from click.testing import CliRunner

from gateway.cli import main
from gateway.client import GatewayClient
from gateway.node.base.config import ChannelConfig

from .conftest import leader_of, node_configs, run, running, wait_for


def test_a_second_channel_from_the_same_source_cluster_is_warned_about(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (_na, nb):
            await leader_of([nb])
            await wait_for(lambda: [c.source_id for c in nb.status().channels] == [1], 20,
                           "fromA learned its source")
            assert not nb.status().channels[0].last_error
            cb = GatewayClient(b.api, timeout=30)
            res = await asyncio.to_thread(lambda: cb.add_channel("again", [a.api]))
            assert "warning: channel(s) fromA already replicate from cluster 1" in res.message
            await wait_for(lambda: all(ch.source_id == 1 for ch in nb.status().channels)
                           and len(nb.status().channels) == 2, 20, "again learned it too")
            warned = {ch.name: ch.last_error for ch in nb.status().channels}
            assert warned["fromA"].startswith("warning: channel(s) again also replicate "
                                              "from cluster 1")
            assert warned["again"].startswith("warning: channel(s) fromA also replicate")
            out = await asyncio.to_thread(
                lambda: CliRunner().invoke(main, ["status", "--target", b.api]))
            assert "warning: channel(s) again also replicate from cluster 1" in out.output

    run(go(), 60)
