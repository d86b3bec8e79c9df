"""Three nodes in one event loop over real gRPC: election, replication, follower forwarding,
linearizable reads on followers, leadership transfer with an idempotent retry, a node joining
by snapshot and a node removed."""

from __future__ import annotations

import os

from gateway.client import AsyncGatewayClient, row_insert, row_update
from gateway.node import GatewayNode

from .conftest import free_ports, leader_of, node_configs, run, running, started, wait_for


def _rows(node: GatewayNode, table: str) -> list[tuple[int, str]]:
    schema, _, name = table.rpartition(".")
    return [(r.key_values[0].int_value, r.values[0].string_value)
            for r in node.sm.scan_rows(schema, name, [], [])]


def test_election_replication_and_follower_forwarding(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            followers = [n for n in nodes if n is not leader]
            async with AsyncGatewayClient(followers[0].config.api) as c:  # forwarded
                for i in range(10):
                    r = await c.write([row_insert("t.r", {"id": i}, {"v": f"x{i}"})])
                    assert r.gtid.trans_id == i + 1
            async with AsyncGatewayClient(followers[1].config.api) as c:
                assert await c.get("t.r", 9) == {"id": 9, "v": "x9"}  # linearizable follower
            await wait_for(lambda: all(n.sm.applied_index >= leader.sm.applied_index
                                       for n in nodes), what="replication")
            assert _rows(nodes[0], "t.r") == _rows(nodes[1], "t.r") == _rows(nodes[2], "t.r")
            st = await AsyncGatewayClient(followers[0].config.api).status()
            assert st.leader_id == leader.config.node_id and st.leader_api == leader.config.api

    run(go(), 90)


def test_batches_and_streams_through_a_follower_get_every_writes_result(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            for api in (leader.config.api, follower.config.api):
                async with AsyncGatewayClient(api) as c:
                    base = 1000 * (api == follower.config.api)
                    batch = await c.write_batch(
                        [[row_insert("t.b", {"id": base + i}, {"v": f"b{i}"})] for i in range(5)])
                    assert [r.log_index for r in batch] == \
                        list(range(batch[0].log_index, batch[0].log_index + 5))
                    assert len({r.gtid.trans_id for r in batch}) == 5
                    async with c.stream(window=16) as s:
                        futs = [await s.send([row_insert("t.s", {"id": base + i}, {"v": "s"})],
                                             idempotency_key=f"k{base + i % 3}")
                                for i in range(6)]
                        results = [await f for f in futs]
                    # keys k0..k2 each wrote once; the repeats are answered as duplicates
                    firsts, repeats = results[:3], results[3:]
                    assert not any(r.duplicate for r in firsts)
                    assert all(r.duplicate for r in repeats)
                    assert [r.log_index for r in repeats] == [r.log_index for r in firsts]
                    assert all(r.gtid.trans_id and r.commit_timestamp_ns for r in results)
            async with AsyncGatewayClient(leader.config.api) as c:
                assert await c.get("t.b", 1004) == {"id": 1004, "v": "b4"}
                assert await c.get("t.s", 1002) == {"id": 1002, "v": "s"}
                assert await c.get("t.s", 1003) is None  # a duplicate of k1000's write

    run(go(), 90)


def test_transfer_then_retry_with_same_key_is_a_duplicate(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            target = next(n for n in nodes if n is not leader)
            apis = [n.config.api for n in nodes]
            async with AsyncGatewayClient(apis) as c:
                stmt = [row_insert("t.c", {"id": 1}, {"n": 1})]
                first = await c.write(stmt, idempotency_key="once")
                resp = await leader.servicer.node.transfer_leader(target.config.node_id, 10)
                assert "leads now" in resp.message
                await c.write([row_update("t.c", {"id": 1}, {"n": 2})])
                again = await c.write(stmt, idempotency_key="once")  # new leader dedups it
                assert again.duplicate and again.log_index == first.log_index
                assert await c.get("t.c", 1) == {"id": 1, "n": 2}
                later = await c.write([row_insert("t.c", {"id": 2}, {"n": 0})])
                assert later.gtid.trans_id > first.gtid.trans_id + 1
                assert later.epoch >> 32 > first.epoch >> 32  # a new term: a new epoch range

    run(go(), 90)


def test_join_by_snapshot_and_remove(tmp_path):
    cfgs = node_configs(tmp_path, 3, snapshot_entries=10)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            async with AsyncGatewayClient(leader.config.api) as c:
                for i in range(30):
                    await c.write([row_insert("t.j", {"id": i}, {"v": str(i)})])
                await c.snapshot()
            await wait_for(lambda: leader.storage.first_index() > 2, what="compaction")
            p_peer, p_api = free_ports(2)
            from dataclasses import replace

            new_cfg = replace(cfgs[0], node_id=4, listen=f"127.0.0.1:{p_peer}",
                              api=f"127.0.0.1:{p_api}", peers={}, join=True,
                              data_dir=str(tmp_path / "n4"))
            nodes.append(new := await started(new_cfg))
            async with AsyncGatewayClient(cfgs[1].api) as c:
                res = await c.add_node(4, new_cfg.listen, new_cfg.api, timeout=60)
                assert "voter" in res.message
                await c.write([row_insert("t.j", {"id": 100}, {"v": "after"})])
            await wait_for(lambda: new.sm.applied_index >= leader.sm.applied_index,
                           what="the new node to catch up")
            assert new.driver.last_snapshot_index > 1  # caught up by snapshot
            # ... received through a file spool, renamed into place: none is left behind
            assert new.driver.raw.raft.snap_receiver.spool_of == new.storage.snapshots.spool
            assert not [n for n in os.listdir(new.storage.snapshots.directory)
                        if n.endswith(".spool")]
            assert _rows(new, "t.j") == _rows(leader, "t.j")
            victim = next(n for n in nodes if n is not leader and n is not new)
            async with AsyncGatewayClient(new_cfg.api) as c:
                await c.remove_node(victim.config.node_id)
                st = await c.status()
                assert victim.config.node_id not in [m.node_id for m in st.members]
                await c.write([row_insert("t.j", {"id": 101}, {"v": "4 nodes - 1"})])
            # the removed node may never learn the commit of its own removal (the leader
            # stops replicating to it): it just stops being a member
            await wait_for(lambda: all(victim.config.node_id not in n.driver.raw.raft.trk.progress
                                       for n in nodes if n is not victim), what="removal")

    run(go(), 120)
