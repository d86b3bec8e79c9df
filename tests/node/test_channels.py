"""Replication channels between clusters, in process: pairs, rings, admin, status."""

from __future__ import annotations

import asyncio
import dataclasses

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.config import ChannelConfig

from .conftest import leader_of, node_configs, run, running, wait_for


def _cluster(tmp_path, name: str, cluster_id: int, n: int = 1):
    return node_configs(tmp_path / name, n, cluster_id=cluster_id)


def _from(cfgs, *sources, name=None):
    return tuple(ChannelConfig(name or f"from{src[0].cluster_id}",
                               tuple(c.api for c in src)) for src in sources)


def _rows(node, table="shop.items"):
    schema, t = table.split(".")
    return {tuple(v.int_value for v in r.key_values): (r.author, r.gtid.server_id,
                                                        r.gtid.trans_id, r.values[0].string_value)
            for r in node.sm.scan_rows(schema, t, [], [])}


async def _write(cfg, key: int, text: str) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write([row_insert("shop.items", {"id": key}, {"v": text})])


def test_a_pair_replicates_both_ways_with_origin_gtid_author_and_reflection(tmp_path):
    a, b = _cluster(tmp_path, "a", 1)[0], _cluster(tmp_path, "b", 2)[0]
    a = dataclasses.replace(a, channels=(ChannelConfig("fromB", (b.api,)),))
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(5):
                await _write(a, i, f"a{i}")
                await _write(b, 100 + i, f"b{i}")
            await wait_for(lambda: len(_rows(na)) == 10 and len(_rows(nb)) == 10, 20,
                           "both clusters hold all rows")
            ra, rb = _rows(na), _rows(nb)
            assert ra == rb
            assert {k: v[0] for k, v in ra.items()} == {
                **{(i,): 1 for i in range(5)}, **{(100 + i,): 2 for i in range(5)}}
            # origin GTIDs kept; each cluster's own counter untouched by replicated ones
            assert sorted(v[2] for k, v in ra.items() if v[1] == 2) == [1, 2, 3, 4, 5]
            assert na.sm.last_trans_id == 5 and nb.sm.last_trans_id == 5
            # reflection: each cluster learns how far the other applied its epochs
            last_a = max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])
                         if r.author == 1)
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >= last_a, 10,
                           "A's max replicated epoch for B")
            st = na.status()
            assert [p.cluster_id for p in st.peers] == [2]
            assert st.peers[0].max_replicated_epoch >= last_a
            assert st.channels[0].name == "fromB" and st.channels[0].state == "running"
            assert st.channels[0].source_id == 2 and st.channels[0].applied_epoch > 0

    run(go(), 60)
