"""A seeded cluster as a source: its log before the seed's end holds none of the transactions
the seed brought, so a channel that would read it from there is refused unless the reader
holds them already (``ChannelHello.holds``; docs/replication.md, "Growing a pair into a
ring"). Before, a new cluster added with a plain ``channel add`` from a seeded one streamed
its log from the start and silently never got the seeded rows."""

from __future__ import annotations

import asyncio

from gateway.client import AsyncGatewayClient, row_insert

from .conftest import leader_of, node_configs, run, running, wait_for


def _keys(node) -> set[int]:
    return {r.key_values[0].int_value for r in node.sm.scan_rows("shop", "items", [], [])}


async def _write(api: str, keys_, text: str) -> None:
    async with AsyncGatewayClient(api) as c:
        await c.write([row_insert("shop.items", {"id": k}, {"v": f"{text}{k}"})
                       for k in keys_])


def _channel(node, name: str):
    return next((st for st in node.channels.status() if st.name == name), None)


def test_a_reader_lacking_what_a_seed_brought_is_refused_one_holding_it_is_served(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    c = node_configs(tmp_path / "c", 1, cluster_id=3)[0]

    async def go():
        async with running(a, b, c) as (na, nb, nc):
            for n in (na, nb, nc):
                await leader_of([n])
            await _write(a.api, range(20), "a")
            async with AsyncGatewayClient(b.api) as cl:
                await cl.add_channel("fromA", [a.api], seed=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds and len(_keys(nb)) == 20, 30,
                           "B seeded from A")
            await _write(b.api, [100], "b")  # B's own, in its log after the seed
            # C holds nothing: B's log from its start would give it row 100, never 0..19
            async with AsyncGatewayClient(c.api) as cl:
                await cl.add_channel("fromB", [b.api])
            await wait_for(lambda: (st := _channel(nc, "fromB")) is not None
                           and st.state == "behind", 20, "C's channel refused")
            err = _channel(nc, "fromB").last_error
            assert "behind the source's log: resync" in err
            assert "cluster 2 was seeded (last seed end at log index" in err, err
            assert "origin 1 up to trans id 1 (the reader holds up to 0)" in err, err
            assert not _keys(nc)
            # A holds every transaction the seed brought (its own): served from B's start
            async with AsyncGatewayClient(a.api) as cl:
                await cl.add_channel("fromB", [b.api])
            await wait_for(lambda: 100 in _keys(na), 20, "A reading B")
            assert _channel(na, "fromB").state == "running"
            # and C seeded from B gets everything
            async with AsyncGatewayClient(c.api) as cl:
                await cl.channel_action("fromB", "remove")
                await cl.add_channel("fromB", [b.api], seed=True)
            # (B writes on: a seed's pin is taken at an epoch boundary)
            for k in range(101, 200):
                await _write(b.api, [k], "b")
                if _keys(nc) == _keys(nb):
                    break
                await asyncio.sleep(0.2)
            await wait_for(lambda: _keys(nc) == _keys(nb), 30, "C seeded from B")

    run(go(), 90)
