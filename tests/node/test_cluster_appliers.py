"""Applier scope in a cluster: a cluster-scoped applier runs on the leader only and continues
from the position replicated through the Raft log after a leadership change; the node-scoped
SQLite applier runs on every node (docs/node.md, "Appliers in a cluster")."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pluggy

import gateway.appliers.sqlite as sqlite_plugin
from gateway import hookimpl, hookspecs
from gateway.appliers.contract import Applier, ApplierFactory, Capabilities
from gateway.client import AsyncGatewayClient, row_insert
from gateway.core.messages import TypeTag
from gateway.core.rowops import RowOp
from gateway.node import GatewayNode, NodeConfig
from gateway.node.appliers.feed import CommittedLogSource
from gateway.raft import NO_LIMIT
from gateway.v1 import gateway_pb2
from gateway.v1.transaction_pb2 import Transaction

from .conftest import leader_of, node_configs, run, running, wait_for


class SharedStore:
    """What a shared external store received: ``(node, trans_id, log_index)`` per operation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: list[tuple[int, int, int]] = []

    def snapshot(self) -> list[tuple[int, int, int]]:
        with self.lock:
            return list(self.ops)

    def trans_ids(self) -> Counter[int]:
        return Counter(t for _, t, _ in self.snapshot())


class RecordingApplier(Applier):
    def __init__(self, node: int, store: SharedStore) -> None:
        self.name = "shared"
        self.capabilities = Capabilities(max_batch=50)
        self.node = node
        self.store = store

    def apply(self, ops: Sequence[RowOp]) -> None:
        with self.store.lock:
            self.store.ops.extend((self.node, op.gtid.trans_id, op.log_index) for op in ops)


def shared_factory(store: SharedStore, scope: str | None = None) -> ApplierFactory:
    def create(options: Mapping[str, str]) -> RecordingApplier:
        return RecordingApplier(int(options["node"]), store)

    if scope is None:  # like a plugin written before scopes existed
        return ApplierFactory("shared", create, "test store", {"node": "node id"})
    return ApplierFactory("shared", create, "test store", {"node": "node id"}, scope=scope)


def plugin_manager(factory: ApplierFactory) -> pluggy.PluginManager:
    class SharedPlugin:
        @hookimpl
        def gateway_register_appliers(self) -> list[ApplierFactory]:
            return [factory]

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(sqlite_plugin, name="sqlite")
    pm.register(SharedPlugin(), name="shared")
    return pm


def configs(tmp_path: Path, n: int, extra: Mapping[str, str] | None = None
            ) -> list[NodeConfig]:
    return [dataclasses.replace(c, appliers={
        "sqlite": {}, "shared": {"node": str(c.node_id), **(extra or {})}}).validate()
        for c in node_configs(tmp_path, n)]


def plugins_of(factory: ApplierFactory) -> Callable[[], Any]:
    """Each node's plugin manager: the built-ins plus ``factory`` (one factory for all)."""
    return lambda: plugin_manager(factory)


def status_of(node: GatewayNode, name: str) -> gateway_pb2.ApplierStatus:
    return next(a for a in node.applier_status() if a.name == name)


def sqlite_gtids(node: GatewayNode) -> int:
    path = Path(node.config.data_dir) / "sqlite" / "gateway.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT coalesce(sum(last - first + 1), 0) FROM "
                          "_gateway_applied_ranges").fetchone()[0]


async def write_rows(api: str, first: int, count: int) -> list[tuple[int, int]]:
    """Write ``count`` one-row transactions; ``(trans_id, log_index)`` of each."""
    out = []
    async with AsyncGatewayClient(api) as c:
        for i in range(first, first + count):
            r = await c.write([row_insert("t.s", {"id": i}, {"v": str(i)})])
            out.append((r.gtid.trans_id, r.log_index))
    return out


def test_cluster_scoped_applier_applies_each_transaction_once_on_the_leader(tmp_path):
    store = SharedStore()
    cfgs = configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs, plugins=plugins_of(shared_factory(store, "cluster"))) as nodes:
            leader = await leader_of(nodes)
            written = await write_rows(leader.config.api, 0, 30)
            want = {t for t, _ in written}
            await wait_for(lambda: want <= set(store.trans_ids()), what="shared applies")
            last = max(i for _, i in written)
            # the replicated position reaches every replica's store
            await wait_for(lambda: all(status_of(n, "shared").replicated_position >= last
                                       for n in nodes), what="replicated position")
            counts = store.trans_ids()
            assert all(counts[t] == 1 for t in want), "a transaction was applied twice"
            assert {node for node, _, _ in store.snapshot()} == {leader.config.node_id}
            for n in nodes:
                st = status_of(n, "shared")
                assert st.scope == "cluster"
                assert st.running == (n is leader)
            # node-scoped sqlite: every node, its own file
            await wait_for(lambda: all(sqlite_gtids(n) == 30 for n in nodes), what="sqlite")
            for n in nodes:
                st = status_of(n, "sqlite")
                assert st.scope == "node" and st.running
        assert Counter(store.trans_ids()) == counts  # stopping applies nothing again

    run(go(), 120)


def test_transfer_right_after_writes_applies_everything_duplicates_only_in_the_window(tmp_path):
    store = SharedStore()
    cfgs = configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs, plugins=plugins_of(shared_factory(store, "cluster"))) as nodes:
            leader = await leader_of(nodes)
            first = await write_rows(leader.config.api, 0, 20)
            await wait_for(lambda: {t for t, _ in first} <= set(store.trans_ids()),
                           what="first batch applied")
            target = next(n for n in nodes if n is not leader)
            resp = await leader.transfer_leader(target.config.node_id, 10)
            assert "leads now" in resp.message
            await wait_for(lambda: target.appliers.cluster_scoped[0].running, what="new run")
            await wait_for(lambda: not leader.appliers.cluster_scoped[0].running,
                           what="old leader stops")
            started = target.appliers.cluster_scoped[0].started_from
            assert started is not None
            second = await write_rows(target.config.api, 100, 20)
            written = first + second
            await wait_for(lambda: {t for t, _ in written} <= set(store.trans_ids()),
                           what="every transaction applied")
            index_of = dict(written)
            counts = store.trans_ids()
            dup = {t for t in index_of if counts[t] > 1}
            # duplicates only in the documented window: after the position the new leader
            # started from, and not among the transactions it knew as applied
            for t in dup:
                assert index_of[t] > started.log_index, (t, index_of[t], started.log_index)
                assert (1, t) not in started.applied
            assert all(counts[t] == 1 for t, _ in second)  # after the move: once
            new_ops = [(node, t) for node, t, i in store.snapshot() if index_of[t] in
                       {i for _, i in second}]
            assert {node for node, _ in new_ops} == {target.config.node_id}
            assert all(sqlite_gtids(n) >= 20 for n in nodes)  # sqlite ran everywhere

    run(go(), 150)


def test_new_leader_continues_from_the_replicated_position_without_duplicates(tmp_path):
    store = SharedStore()
    cfgs = configs(tmp_path, 3)

    async def go() -> None:
        # no scope: cluster by default
        async with running(*cfgs, plugins=plugins_of(shared_factory(store))) as nodes:
            leader = await leader_of(nodes)
            first = await write_rows(leader.config.api, 0, 15)
            last = max(i for _, i in first)
            await wait_for(lambda: all(n.appliers.replicated("shared").log_index >= last
                                       for n in nodes), what="replicated position")
            target = next(n for n in nodes if n is not leader)
            await leader.transfer_leader(target.config.node_id, 10)
            await wait_for(lambda: target.appliers.cluster_scoped[0].running, what="new run")
            assert target.appliers.cluster_scoped[0].started_from.log_index >= last
            second = await write_rows(target.config.api, 100, 15)
            want = {t for t, _ in first + second}
            await wait_for(lambda: want <= set(store.trans_ids()), what="applied")
            assert all(c == 1 for t, c in store.trans_ids().items() if t in want)

    run(go(), 150)


def test_scope_override_runs_a_cluster_applier_on_every_node(tmp_path):
    store = SharedStore()
    cfgs = configs(tmp_path, 3, {"scope": "node"})

    async def go() -> None:
        async with running(*cfgs, plugins=plugins_of(shared_factory(store, "cluster"))) as nodes:
            leader = await leader_of(nodes)
            written = await write_rows(leader.config.api, 0, 5)
            want = {t for t, _ in written}
            await wait_for(lambda: all(store.trans_ids()[t] == 3 for t in want),
                           what="applied by every node")
            for n in nodes:
                st = status_of(n, "shared")
                assert st.scope == "node" and st.running and st.replicated_position == 0

    run(go(), 90)


def test_position_entries_reach_neither_subscribers_nor_applier_sources(tmp_path):
    store = SharedStore()
    cfgs = configs(tmp_path, 1)

    async def go() -> None:
        async with running(*cfgs, plugins=plugins_of(shared_factory(store, "cluster"))) as nodes:
            node = nodes[0]
            await leader_of(nodes)
            written = await write_rows(node.config.api, 0, 10)
            last = max(i for _, i in written)
            await wait_for(lambda: node.appliers.replicated("shared").log_index >= last,
                           what="replicated position")
            applied, first = node.sm.applied_index, node.storage.first_index()
            entries = node.storage.entries(first, applied + 1, NO_LIMIT)
            positions = [e.index for e in entries
                         if e.data[:1] == bytes((TypeTag.APPLIER_POSITION,))]
            assert positions, "the leader proposed no position"
            source = {e.index: e for e in CommittedLogSource(node.driver).read(first, applied)}
            assert all(source[i].transaction is None for i in positions)
            assert {i for i, e in source.items() if e.transaction is not None} == \
                {i for _, i in written}
            # each transaction comes with the bytes the log holds, which parse to it
            assert all((e.transaction is None and e.wire is None)
                       or Transaction.FromString(e.wire) == e.transaction
                       for e in source.values())
            events = []
            async for ev in node.change_feed.events(1):
                events.append(ev.log_index)
                if ev.log_index >= last:
                    break
            assert events == [i for _, i in written]

    run(go(), 60)


def test_a_caught_up_applier_takes_each_write_without_waiting_for_its_poll(tmp_path,
                                                                           monkeypatch):
    """Every applied batch wakes the node's dispatchers: with a two-minute poll interval the
    SQLite applier still has each write, one at a time, long before a poll would come."""
    import gateway.node.server as server

    real = server.DispatcherConfig
    monkeypatch.setattr(server, "DispatcherConfig",
                        lambda **kw: real(**{**kw, "poll_interval": 120.0}))
    cfg = dataclasses.replace(node_configs(tmp_path, 1)[0], appliers={"sqlite": {}}).validate()

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            before = sqlite_gtids(node)
            for i in range(4):
                await write_rows(cfg.api, i, 1)
                await wait_for(lambda n=before + i + 1: sqlite_gtids(node) == n, 20,
                               f"write {i} in SQLite")

    run(go())


def test_a_follower_shows_a_cluster_applier_s_lag_in_seconds_from_its_log(tmp_path):
    """Not running on a follower, a cluster-scoped applier's lag in seconds is the age of the
    first transaction after its replicated position in the follower's log: above 0 while
    transactions wait, 0 once only entries without one (positions, markers) follow."""
    store = SharedStore()
    cfgs = configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs, plugins=plugins_of(shared_factory(store, "cluster"))) as nodes:
            lead = await leader_of(nodes)
            follower = next(n for n in nodes if n is not lead)
            seen = []
            async with AsyncGatewayClient(lead.config.api) as c:
                for k in range(300):
                    await c.write([row_insert("t.x", {"id": k}, {"v": "x"})])
                    st = status_of(follower, "shared")
                    if not st.running and st.lag_entries and st.lag_seconds > 0:
                        seen.append(st)
                        break
            assert seen, "a follower never showed the applier's lag in seconds"
            await wait_for(lambda: status_of(follower, "shared").lag_seconds == 0
                           and status_of(follower, "shared").position
                           >= status_of(lead, "shared").position > 0, 30,
                           "caught up: 0 seconds")

    run(go(), 120)
