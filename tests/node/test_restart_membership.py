"""A restarted node comes back with the configuration its applied log ended with.

On restart the core starts from the newest snapshot's configuration and the applied index
``max(snapshot index, min(store's durable applied index, commit))``; membership changes
between the two are never re-delivered by the core, so the driver replays them from the log
when it is created (``RaftDriver._replay_conf_changes``; the membership notifications follow
in ``RaftDriver.start``). The window is real: a change is applied, the store is flushed past it
(a clean stop flushes it), and the node restarts before the snapshot forced by the change is
recorded. The tests keep that snapshot from being taken on the node they restart (its
``SnapshotTaker.conf_applied`` only records the configuration) so the window is open
deterministically; the other nodes snapshot as usual (a joining node needs a snapshot that
includes it).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from typing import Any

import pytest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node import GatewayNode
from gateway.node.loop.driver import DriverOptions, RaftDriver
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.storage.storage import RaftLogStorage
from gateway.raft import (
    ConfChange,
    ConfChangeSingle,
    ConfChangeTransition,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Ready,
    SnapshotMetadata,
)

from .conftest import free_ports, leader_of, node_configs, run, running, started, wait_for


def skip_forced_snapshots(node: GatewayNode) -> None:
    """``node`` records membership changes in its configuration history but asks for no
    snapshot: restarted, it is as if it had stopped before the forced snapshot was recorded."""
    taker = node.driver.snapshots

    def record_only(index: int, conf: ConfState) -> None:
        taker.confs.record(index, conf)

    taker.conf_applied = record_only  # type: ignore[method-assign]


def _members(node: GatewayNode) -> tuple[set[int], set[int]]:
    cfg = node.driver.raw.raft.trk.config
    return set(cfg.all_voters()), set(cfg.learners)


def test_restarted_follower_knows_a_node_added_after_its_last_snapshot(tmp_path) -> None:
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            skip_forced_snapshots(follower)
            p_peer, p_api = free_ports(2)
            cfg4 = replace(cfgs[0], node_id=4, listen=f"127.0.0.1:{p_peer}",
                           api=f"127.0.0.1:{p_api}", peers={}, join=True,
                           data_dir=str(tmp_path / "n4"))
            nodes.append(new := await started(cfg4))
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write([row_insert("t.m", {"id": 1}, {"v": "before"})])
                res = await c.add_node(4, cfg4.listen, cfg4.api, timeout=60)
                assert "voter" in res.message
                promoted_at = res.log_index
                await c.write([row_insert("t.m", {"id": 2}, {"v": "with 4"})])
            await wait_for(lambda: follower.sm.applied_index >= promoted_at,
                           what="the follower to apply the promotion")
            fid = follower.config.node_id
            await follower.stop()  # a clean stop flushes the store past the promotion

            again = GatewayNode(follower.config)
            nodes[nodes.index(follower)] = again
            await again.start()
            # The window: no snapshot covers the change, the store's durable state does.
            assert again.driver.last_snapshot_index < promoted_at
            assert again.sm.durable_applied_index >= promoted_at
            assert _members(again) == ({1, 2, 3, 4}, set())
            assert again.transport.address_of.get(4) == cfg4.listen
            assert again.transport.api_of.get(4) == cfg4.api
            assert again.driver.snapshots.confs.at(promoted_at).voters == (1, 2, 3, 4)

            # As leader it replicates to node 4 as well, and commits with it.
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.transfer_leader(fid)
            await wait_for(lambda: again.driver.is_leader, what="the restarted node to lead")
            async with AsyncGatewayClient(again.config.api) as c:
                r = await c.write([row_insert("t.m", {"id": 3}, {"v": "restarted leads"})])
            await wait_for(lambda: new.sm.applied_index >= r.log_index,
                           what="node 4 to apply the restarted leader's write")
            assert 4 in again.driver.raw.raft.trk.progress

    run(go(), 120)


def test_removed_node_restarted_from_its_data_replays_its_removal_and_stops(
        tmp_path) -> None:
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            victim = next(n for n in nodes if n is not leader)
            vid = victim.config.node_id
            skip_forced_snapshots(victim)
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write([row_insert("t.r", {"id": 1}, {"v": "x"})])
                await wait_for(lambda: victim.sm.applied_index >= leader.sm.applied_index,
                               what="the victim to catch up")
                res = await c.remove_node(vid)
            await wait_for(lambda: victim.removed, what="the victim to apply its removal")
            await victim.wait_stopped()

            again = GatewayNode(victim.config)
            nodes[nodes.index(victim)] = again
            await again.start()
            assert again.driver.last_snapshot_index < res.log_index
            assert again.sm.durable_applied_index >= res.log_index
            voters, learners = _members(again)
            assert vid not in voters | learners
            assert again.driver.removed and again.driver.raw.raft.removed
            await asyncio.wait_for(again.wait_stopped(), 30)  # stops itself, like live
            assert again.removed

    run(go(), 90)


# -- the driver alone: replay through a joint configuration ---------------------------------------

def _cc_entry(index: int, cc: ConfChange) -> Entry:
    return Entry(term=1, index=index, type=EntryType.CONF_CHANGE, data=cc.encode())


def _driver_after(root: Any, node_id: int, store_applied: int,
                  calls: list[tuple[int, dict[str, str], bool]]) -> RaftDriver:
    """A node of the cluster {1, 2, 3} whose log holds, after the bootstrap snapshot at 1:
    2: a normal entry, 3: enter a joint configuration replacing 3 by 4 (auto leave),
    4: a normal entry, 5: leave the joint configuration; all committed. Its store's durable
    applied index is ``store_applied``."""
    raft_dir = os.path.join(str(root), "raft")
    storage = RaftLogStorage(raft_dir, fsync=False)
    if storage.is_empty():
        storage.bootstrap((1, 2, 3))
        ctx = json.dumps({"peer": "127.0.0.1:1", "api": "127.0.0.1:2"}).encode()
        enter = ConfChange((ConfChangeSingle(ConfChangeType.ADD_NODE, 4),
                            ConfChangeSingle(ConfChangeType.REMOVE_NODE, 3)), context=ctx)
        ents = [Entry(1, 2, EntryType.NORMAL, b""), _cc_entry(3, enter),
                Entry(1, 4, EntryType.NORMAL, b""), _cc_entry(5, ConfChange())]
        storage.save_ready(Ready(entries=ents, hard_state=HardState(1, 0, 5)))
    sm = StoreStateMachine(str(root))
    sm.mark_applied(store_applied)
    sm.flush()
    return RaftDriver(DriverOptions(node_id, 1), storage, sm, lambda msgs: None,
                      on_membership=lambda nid, ctx, removed: calls.append((nid, ctx, removed)))


@pytest.mark.parametrize(("store_applied", "voters", "outgoing", "auto_leave"), [
    (2, (1, 2, 3), (), False),           # before the change: the core re-delivers it
    (3, (1, 2, 4), (1, 2, 3), True),     # inside the joint configuration
    (4, (1, 2, 4), (1, 2, 3), True),
    (5, (1, 2, 4), (), False),           # left it
])
def test_restart_replays_joint_configuration_changes_in_log_order(
        tmp_path, store_applied: int, voters: tuple[int, ...], outgoing: tuple[int, ...],
        auto_leave: bool) -> None:
    async def go() -> None:
        calls: list[tuple[int, dict[str, str], bool]] = []
        drv = _driver_after(tmp_path, 1, store_applied, calls)
        try:
            drv.start()  # the replay runs here, before the loop's first step
            cs = drv.raw.raft.trk.config.conf_state()
            assert (cs.voters, cs.voters_outgoing, cs.auto_leave) == (voters, outgoing,
                                                                      auto_leave)
            assert drv.raw.raft.raft_log.applied == store_applied
            if store_applied >= 3:
                assert calls == [(4, {"peer": "127.0.0.1:1", "api": "127.0.0.1:2"}, False),
                                 (3, {"peer": "127.0.0.1:1", "api": "127.0.0.1:2"}, True)]
                assert drv.snapshots.confs.at(3).voters_outgoing == (1, 2, 3)
                assert drv.snapshots.confs.at(2).voters == (1, 2, 3)
            else:
                assert calls == []
            assert drv.snapshots.confs.at(store_applied) == cs
            assert not drv.removed
        finally:
            await drv.stop()
            drv.sm.close()
            drv.storage.close()

    run(go(), 30)


def test_restart_replays_this_nodes_own_removal(tmp_path) -> None:
    async def go() -> None:
        calls: list[tuple[int, dict[str, str], bool]] = []
        drv = _driver_after(tmp_path, 3, 5, calls)
        try:
            drv.start()
            assert drv.removed and drv.raw.raft.removed
            assert (3, {"peer": "127.0.0.1:1", "api": "127.0.0.1:2"}, True) in calls
        finally:
            await drv.stop()
            drv.sm.close()
            drv.storage.close()

    run(go(), 30)


def test_restart_refuses_a_log_compacted_past_the_newest_snapshot(tmp_path) -> None:
    async def go() -> None:
        calls: list[tuple[int, dict[str, str], bool]] = []
        drv = _driver_after(tmp_path, 1, 5, calls)
        drv.sm.close()
        # Break the invariant (reopening the storage would refuse this log already): the
        # change at 3 is gone from the log and no snapshot holds it.
        drv.storage.compact(3)
        sm = StoreStateMachine(str(tmp_path))
        try:
            with pytest.raises(RuntimeError, match="log starts at index 4 but the newest "
                                                   "snapshot is at 1"):
                RaftDriver(DriverOptions(1, 1), drv.storage, sm, lambda msgs: None)
        finally:
            sm.close()
            drv.storage.close()

    run(go(), 30)


def test_restarted_leader_leaves_a_replayed_joint_configuration(tmp_path) -> None:
    """A one-voter cluster entered a joint configuration (learner 2 added, auto leave) and
    restarted before leaving it: the replayed joint configuration is left by the node once it
    leads again (``maybe_auto_leave``), as after a live change."""

    async def go() -> None:
        storage = RaftLogStorage(os.path.join(str(tmp_path), "raft"), fsync=False)
        storage.bootstrap((1,))
        enter = ConfChange((ConfChangeSingle(ConfChangeType.ADD_LEARNER_NODE, 2),),
                           ConfChangeTransition.JOINT_IMPLICIT)
        storage.save_ready(Ready(entries=[_cc_entry(2, enter)], hard_state=HardState(1, 1, 2)))
        sm = StoreStateMachine(str(tmp_path))
        sm.mark_applied(2)
        sm.flush()
        drv = RaftDriver(DriverOptions(1, 1, tick_s=0.01, epoch_s=1e6), storage, sm,
                         lambda msgs: None)
        try:
            cs = drv.raw.raft.trk.config.conf_state()
            assert (cs.voters, cs.voters_outgoing, cs.learners, cs.auto_leave) == \
                ((1,), (1,), (2,), True)
            drv.start()
            await wait_for(lambda: drv.is_leader, what="the node to lead")
            await wait_for(lambda: not drv.raw.raft.trk.config.joint(),
                           what="the joint configuration to be left")
            cs = drv.raw.raft.trk.config.conf_state()
            assert (cs.voters, cs.voters_outgoing, cs.learners) == ((1,), (), (2,))
        finally:
            await drv.stop()
            sm.close()
            storage.close()

    run(go(), 30)


def test_node_whose_removal_is_inside_its_snapshot_stops_on_restart(tmp_path) -> None:
    async def go() -> None:
        first: list[tuple[int, dict[str, str], bool]] = []
        drv = _driver_after(tmp_path, 3, 5, first)  # 3 is removed at index 3
        index, directory = drv.sm.export_dir()  # as the snapshot taker does
        meta = SnapshotMetadata(drv.raw.raft.trk.config.conf_state(), index,
                                drv.storage.term(index))
        assert index == 5 and 3 not in meta.conf_state.voters
        # the removal is now inside the snapshot
        assert drv.storage.record_snapshot(meta, directory)
        await drv.stop()
        drv.sm.close()
        drv.storage.close()
        calls: list[tuple[int, dict[str, str], bool]] = []
        again = _driver_after(tmp_path, 3, 5, calls)
        try:
            again.start()
            assert again.raw.raft.removed and again.removed
            assert calls == [(3, {}, True)]  # the owner stops the node on this call
        finally:
            await again.stop()
            again.sm.close()
            again.storage.close()

    run(go(), 30)
