"""An applier whose position is before the node's log start (a snapshot was installed, or the
target was wiped after compaction) is rebuilt from the store, never fed placeholders: before,
the SQLite applier of a node that joined by snapshot silently lacked every row the snapshot
brought (issue 12: an applier never skips an entry it has not applied)."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.appliers.contract import Applier, Capabilities
from gateway.appliers.position import PositionStore
from gateway.client import AsyncGatewayClient, row_insert
from gateway.core.lsm import LSMStore
from gateway.node import GatewayNode
from gateway.node.appliers.applier_rebuild import ApplierBehindLogError, rebuild_from_store

from .conftest import free_ports, leader_of, node_configs, run, running, started, wait_for


def _sqlite_rows(data_dir: str, table: str) -> list[tuple]:
    with sqlite3.connect(Path(data_dir) / "sqlite" / "gateway.db") as conn:
        return sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall())


def _caught_up(node: GatewayNode) -> bool:
    st = node.status()
    return bool(st.appliers) and all(a.position >= st.applied_index for a in st.appliers)


def test_node_joining_by_snapshot_gets_the_snapshot_rows_in_its_sqlite_target(tmp_path):
    cfgs = node_configs(tmp_path, 3, snapshot_entries=10, appliers={"sqlite": {}})

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            written = 0
            async with AsyncGatewayClient(leader.config.api) as c:
                # Compaction stops at the appliers' saved positions (saved about once a
                # second): write and snapshot until the log has been compacted.
                while leader.storage.first_index() <= 2:
                    assert written < 400, "the log was never compacted"
                    for i in range(written, written + 10):
                        await c.write([row_insert("t.j", {"id": i}, {"v": str(i)})])
                    written += 10
                    await c.snapshot()
                    await asyncio.sleep(0.2)
            p_peer, p_api = free_ports(2)
            new_cfg = replace(cfgs[0], node_id=4, listen=f"127.0.0.1:{p_peer}",
                              api=f"127.0.0.1:{p_api}", peers={}, join=True,
                              data_dir=str(tmp_path / "n4"))
            nodes.append(new := await started(new_cfg))
            async with AsyncGatewayClient(cfgs[1].api) as c:
                await c.add_node(4, new_cfg.listen, new_cfg.api, timeout=60)
                await c.write([row_insert("t.j", {"id": 100}, {"v": "after"})])
            await wait_for(lambda: new.sm.applied_index >= leader.sm.applied_index
                           and _caught_up(new) and _caught_up(leader),
                           what="the appliers of the new node and the leader to catch up")
            assert new.driver.last_snapshot_index > 1  # it did join by snapshot
            rows = _sqlite_rows(new_cfg.data_dir, "j")
            assert len(rows) == written + 1
            assert rows == _sqlite_rows(leader.config.data_dir, "j")
            assert not new.status().appliers[0].error

    run(go(), 120)


class _SharedStoreApplier(Applier):
    """An applier of a store it does not own alone: no ``reset_target``."""

    name = "shared"
    capabilities = Capabilities()

    def apply(self, ops):  # pragma: no cover - never reached
        raise AssertionError("a shared store must not be refilled")


def test_applier_that_cannot_rebuild_stops_naming_the_gap(tmp_path):
    store = LSMStore(str(tmp_path / "store"))
    try:
        with pytest.raises(ApplierBehindLogError) as err:
            rebuild_from_store(_SharedStoreApplier(), PositionStore(tmp_path, "shared"), store,
                               position=7, first_index=40, apply=lambda ops: None)
    finally:
        store.close()
    msg = str(err.value)
    assert "'shared'" in msg and "entries 8..39" in msg and "\n" not in msg
    assert not (tmp_path / "shared.position").exists()  # the position did not move
