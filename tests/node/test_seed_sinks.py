"""Sinks on a seeded cluster: the rows a seed (or a resync) installs come through
``SEED_INSTALL`` entries, not transactions, so an applier already following the replica's
log is brought to the store's state when the seed ends -- the SQLite sink rebuilt (it owns its
file), an applier that cannot rebuild backfilled -- and follows the log after that
(docs/replication.md, "Appliers on a seeded cluster")."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gateway.appliers.contract import Applier, ApplierFactory, Capabilities
from gateway.appliers.source import StoreInstalledError
from gateway.client import AsyncGatewayClient, row_delete, row_insert, row_update
from gateway.core.messages import TypeTag
from gateway.core.rowops import OpKind, RowOp
from gateway.node import GatewayNode
from gateway.node.appliers.applier_rebuild import stored_row_ops
from gateway.node.appliers.feed import CommittedLogSource
from gateway.node.state import keys
from gateway.v1 import channel_pb2

from .conftest import leader_of, node_configs, run, running, wait_for
from .test_cluster_appliers import plugins_of


def _store_rows(node: GatewayNode) -> list[tuple[int, str]]:
    with node.sm.store.snapshot() as view:
        return sorted((op.key[0], op.values[0]) for op in
                      stored_row_ops(view.scan_prefix(keys.table_prefix("shop", "items"))))


def _sqlite_rows(node: GatewayNode) -> list[tuple[int, str]]:
    path = Path(node.config.data_dir) / "sqlite" / "gateway.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'items'").fetchone():
            return []
        return sorted(db.execute('SELECT id, v FROM "items"').fetchall())


async def _write(api: str, keys_: range | list[int], text: str) -> None:
    async with AsyncGatewayClient(api) as c:
        await c.write([row_insert("shop.items", {"id": k}, {"v": f"{text}{k}"})
                       for k in keys_])


def _caught_up(node: GatewayNode, name: str = "sqlite") -> bool:
    st = next(a for a in node.status().appliers if a.name == name)
    return not st.error and st.position >= node.sm.applied_index


def test_a_sqlite_sink_following_a_cluster_being_seeded_ends_equal_to_its_store(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = replace(node_configs(tmp_path / "b", 1, cluster_id=2)[0], appliers={"sqlite": {}})

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a.api, range(300), "a")
            # the sink follows B's log before the seed (it backfilled B's empty store)
            await wait_for(lambda: _caught_up(nb), 20, "B's sink started")
            async with AsyncGatewayClient(b.api) as c:
                await c.add_channel("fromA", [a.api], seed=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds and len(_store_rows(nb)) == 300,
                           30, "the seed")
            await _write(a.api, [1000], "after")  # streamed after the seed
            await _write(b.api, [2000], "b")      # written here after the seed
            await wait_for(lambda: len(_store_rows(nb)) == 302 and _caught_up(nb), 30,
                           "B's sink catching up")
            assert _sqlite_rows(nb) == _store_rows(nb)

    run(go(), 90)


def test_a_sqlite_sink_of_a_resynced_replica_loses_the_rows_the_resync_deleted(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = replace(node_configs(tmp_path / "b", 1, cluster_id=2)[0], appliers={"sqlite": {}})

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a.api, range(20), "a")
            async with AsyncGatewayClient(b.api) as c:
                await c.add_channel("fromA", [a.api])
                await wait_for(lambda: len(_store_rows(nb)) == 20 and _caught_up(nb), 20,
                               "replicated, in B's sink")
                await c.channel_action("fromA", "pause")
                await wait_for(lambda: nb.channels.status()[0].state == "paused", 10,
                               "the runner stopped")
                async with AsyncGatewayClient(a.api) as ca:
                    await ca.write([row_update("shop.items", {"id": 0}, {"v": "new"})])
                    await ca.write([row_delete("shop.items", {"id": 1})])
                await c.channel_action("fromA", "resume")
                await c.channel_action("fromA", "resync", confirm=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds and (0, "new") in
                           _store_rows(nb) and 1 not in dict(_store_rows(nb)), 30,
                           "the resync")
            await wait_for(lambda: _caught_up(nb), 20, "B's sink catching up")
            assert _sqlite_rows(nb) == _store_rows(nb)

    run(go(), 90)


class _Recording(Applier):
    """A node-scoped applier without ``reset_target`` (it cannot rebuild its target): what
    it holds, by key, after UPSERTs (backfill), INSERTs, UPDATEs and DELETEs."""

    held: dict[int, str] = {}

    def __init__(self) -> None:
        self.name = "recording"
        self.capabilities = Capabilities(max_batch=100)

    def apply(self, ops: Sequence[RowOp]) -> None:
        for op in ops:
            if (op.table.schema, op.table.name) != ("shop", "items"):
                continue
            key = int(op.key[0])  # type: ignore[arg-type]
            if op.kind == OpKind.DELETE:
                _Recording.held.pop(key, None)
                continue
            cols = [c.name for c in op.columns]
            if "v" in cols:
                _Recording.held[key] = str(op.values[cols.index("v")])


def _factory() -> ApplierFactory:
    return ApplierFactory("recording", lambda options: _Recording(), "test target", {})


def test_an_applier_that_cannot_rebuild_is_backfilled_when_a_seed_ends(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = replace(node_configs(tmp_path / "b", 1, cluster_id=2)[0],
                appliers={"recording": {}})
    _Recording.held = {}

    async def go():
        async with running(a, b, plugins=plugins_of(_factory())) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a.api, range(50), "a")
            async with AsyncGatewayClient(b.api) as c:
                await c.add_channel("fromA", [a.api], seed=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds, 30, "the seed")
            await _write(a.api, [100], "after")
            await wait_for(lambda: len(_store_rows(nb)) == 51
                           and _caught_up(nb, "recording"), 30, "the applier catching up")
            assert sorted(_Recording.held.items()) == _store_rows(nb)

    run(go(), 90)


def test_the_feed_stops_before_a_seeds_end_and_raises_at_it(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a.api, range(10), "a")
            async with AsyncGatewayClient(b.api) as c:
                await c.add_channel("fromA", [a.api], seed=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds, 30, "the seed")
            src = CommittedLogSource(nb.driver)
            at = 1
            while True:  # read on as an applier does: every read ends before the end
                try:
                    got = src.read(at, 3)
                except StoreInstalledError as e:
                    assert (e.from_index, e.first_index) == (at, at + 1)
                    break
                assert got, f"read the whole log (to {at - 1}) without meeting the seed's end"
                at = got[-1].index + 1
            entry = nb.driver.storage.entries(at, at + 1, 1 << 20)[0]
            assert entry.data[0] == TypeTag.SEED_INSTALL
            assert channel_pb2.SeedInstall.FromString(entry.data[1:]).HasField("end")
            assert len(src.read(at + 1, 1000)) == nb.sm.applied_index - at  # and on after it

    run(go(), 60)
