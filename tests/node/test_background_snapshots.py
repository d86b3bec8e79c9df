"""Snapshots are taken off the Raft loop (``SnapshotTaker``): while a store export is made as
slow as the test wants, the loop keeps ticking, applying and leading; the snapshot is the store
at exactly its recorded index although writes go on; requests during an export are answered
by a snapshot covering them; installing a received snapshot and stopping wait for the export.

The slow export is a test double around ``StoreStateMachine.export_dir`` (or the store's
``flush``) that blocks its thread on an event the test sets. Nothing here asserts on time:
tests wait for progress (ticks, applied indexes) and check orderings.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node import GatewayNode
from gateway.node.base.errors import NodeStoppedError
from gateway.node.loop.driver import DriverOptions, RaftDriver
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.storage.storage import RaftLogStorage
from gateway.raft import ConfState

from .conftest import leader_of, node_configs, run, running, wait_for


class GatedExport:
    """Stands in for ``sm.export_dir``: runs the real export (``before=False``) or not yet
    (``before=True``), then blocks its thread until :meth:`release`. Records what happened
    in ``events`` (shared with other doubles to check orderings)."""

    def __init__(self, sm: StoreStateMachine, *, before: bool = False,
                 events: list[str] | None = None) -> None:
        self.real = sm.export_dir
        self.before = before
        self.events = events if events is not None else []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.calls = 0
        self.indexes: list[int] = []
        sm.export_dir = self  # type: ignore[method-assign]

    def release(self) -> None:
        self.gate.set()

    def __call__(self) -> tuple[int, str]:
        self.calls += 1
        if not self.before:
            out = self.real()
            self.indexes.append(out[0])
        self.entered.set()
        if not self.gate.wait(60):
            raise TimeoutError("the test never released the export")
        if self.before:
            out = self.real()
            self.indexes.append(out[0])
        self.events.append("export-done")
        return out


class SingleNode:
    """One ``RaftDriver`` (a one-voter cluster) over real storage and store, no network."""

    def __init__(self, root: Any, *, memtable_bytes: int = 32 << 20,
                 snapshot_entries: int = 1 << 30, log_percent: int = 100) -> None:
        self.root = str(root)
        self.storage = RaftLogStorage(os.path.join(self.root, "raft"), fsync=False)
        self.storage.bootstrap((1,))
        self.sm = StoreStateMachine(self.root, memtable_bytes=memtable_bytes)
        # Epochs never close: no epoch-marker entries move the applied index behind the
        # test's back.
        self.driver = RaftDriver(DriverOptions(1, 1, tick_s=0.01, epoch_s=1e6,
                                               snapshot_entries=snapshot_entries,
                                               snapshot_log_percent=log_percent),
                                 self.storage, self.sm, lambda msgs: None)
        self.written = 0

    async def start(self) -> None:
        self.driver.start()
        await wait_for(lambda: self.driver.is_leader, what="the single node to lead")

    async def write(self, n: int, keys: int = 1 << 30, pad: int = 0) -> None:
        """``n`` one-row transactions (row ids cycle through ``keys``: later ones update;
        values ``pad`` bytes longer)."""
        futs = []
        for _ in range(n):
            i = self.written
            self.written += 1
            futs.append(self.driver.submit_write(WriteProposal(
                [row_insert("t.s", {"id": i % keys}, {"v": f"value {i}" + "x" * pad})])))
        await asyncio.gather(*futs)

    async def cycles(self, n: int = 5) -> None:
        """Wait until the Raft loop has ticked ``n`` more times (and so has looked whether a
        snapshot is due)."""
        ticks = self.driver.raw.raft.ticks
        await wait_for(lambda: self.driver.raw.raft.ticks >= ticks + n, what="ticks")

    async def close(self) -> None:
        await self.driver.stop()
        self.sm.close()
        self.storage.close()


@pytest.mark.parametrize("log_percent", [100, 0])
def test_a_snapshot_waits_for_the_log_to_grow_by_a_share_of_the_newest_ones_size(
        tmp_path, log_percent):
    """After a snapshot of a store of ~300 KB, 60 small entries (> snapshot_entries, ~6 KB of
    log) start none at 100 % -- they would at 0 %, the old rule -- and ~300 KB more of log
    start one."""

    async def go() -> None:
        node = SingleNode(tmp_path, snapshot_entries=10, log_percent=log_percent)
        await node.start()
        try:
            await node.write(300, pad=1000)
            first = await node.driver.snapshot_now()
            size = node.storage.snapshots.size()
            assert size > 300_000
            await node.write(60)
            await node.cycles()
            if log_percent:
                assert not node.driver.snapshots.running
                assert node.driver.last_snapshot_index == first
                await node.write(320, pad=1000)  # > size bytes of log since the snapshot
            await wait_for(lambda: node.driver.last_snapshot_index > first,
                           what="an automatic snapshot")
        finally:
            await node.close()

    run(go())


def _store_contents(sm: StoreStateMachine) -> list[tuple[bytes, Any]]:
    return list(sm.store.scan_entries())


def test_raft_loop_applies_and_ticks_while_the_export_is_blocked(tmp_path):
    async def go() -> None:
        node = SingleNode(tmp_path)
        await node.start()
        try:
            gate = GatedExport(node.sm)
            await node.write(10)
            snap = asyncio.create_task(node.driver.snapshot_now())
            await wait_for(gate.entered.is_set, what="the export to start")
            ticks = node.driver.raw.raft.ticks
            before = node.driver.applied_index
            await node.write(200)  # every write is applied while the export is blocked
            await wait_for(lambda: node.driver.raw.raft.ticks >= ticks + 30, what="ticks")
            assert node.driver.applied_index >= before + 200
            assert not snap.done() and node.driver.snapshots.running
            gate.release()
            index = await snap
            assert index == gate.indexes[0] >= 11
            assert node.storage.snapshots.metadata.index == index
        finally:
            await node.close()

    run(go())


def test_snapshot_during_writes_restores_to_exactly_the_rows_at_its_index(tmp_path):
    """A small memtable makes the store freeze, flush and compact while the export runs; the
    export is paused after its flush (writes go on, and newer memtables get flushed) and after
    it fixed its index (writes go on past it)."""

    async def go() -> None:
        node = SingleNode(tmp_path / "node", memtable_bytes=16 << 10)
        await node.start()
        stop_writing = asyncio.Event()

        async def writer() -> None:
            while not stop_writing.is_set():
                await node.write(20, keys=300)

        try:
            store = node.sm.store
            real_flush = store.flush
            flushed, resume = threading.Event(), threading.Event()

            def paused_flush() -> None:
                real_flush()
                flushed.set()
                resume.wait(60)

            store.flush = paused_flush  # type: ignore[method-assign]
            gate = GatedExport(node.sm)
            writing = asyncio.create_task(writer())
            await wait_for(lambda: node.driver.applied_index >= 200, what="writes")
            need = node.driver.applied_index
            snap = asyncio.create_task(node.driver.snapshot_now())
            await wait_for(flushed.is_set, what="the export's flush")
            at_flush = node.driver.applied_index
            await wait_for(lambda: node.driver.applied_index >= at_flush + 300,
                           what="writes after the flush")
            resume.set()
            await wait_for(gate.entered.is_set, what="the export to fix its index")
            exported = gate.indexes[0]
            await wait_for(lambda: node.driver.applied_index >= exported + 100,
                           what="writes after the export")
            gate.release()
            index = await snap
            stop_writing.set()
            await writing
            final = node.driver.applied_index
        finally:
            await node.close()
        assert index == exported >= need
        assert index < final
        st = RaftLogStorage(str(tmp_path / "node" / "raft"), fsync=False)
        try:
            snapshot = st.snapshot()
            assert snapshot.metadata.index == index
            assert snapshot.metadata.term == st.term(index)
            assert snapshot.metadata.conf_state == ConfState(voters=(1,))
            assert st.first_index() == 2  # nothing compacted: the whole log is there
            entries = st.entries(2, index + 1, 1 << 40)
        finally:
            st.close()
        restored = StoreStateMachine(str(tmp_path / "restored"))
        replayed = StoreStateMachine(str(tmp_path / "replayed"))
        try:
            assert restored.restore(snapshot.data) == index
            replayed.apply(entries)
            replayed.mark_applied(index)
            rows = _store_contents(replayed)
            assert len([k for k, _ in rows if k.startswith(b"r")]) == 300
            assert _store_contents(restored) == rows
        finally:
            restored.close()
            replayed.close()

    run(go(), 120)


def test_snapshot_requests_during_an_export_get_a_snapshot_covering_their_applied_index(
        tmp_path):
    async def go() -> None:
        node = SingleNode(tmp_path)
        await node.start()
        try:
            gate = GatedExport(node.sm)  # the real export runs first: its index is fixed
            await node.write(10)
            first_need = node.driver.applied_index
            first = asyncio.create_task(node.driver.snapshot_now())
            await wait_for(gate.entered.is_set, what="the export to start")
            joined = asyncio.create_task(node.driver.snapshot_now())  # nothing new applied
            await asyncio.sleep(0)
            await node.write(10)
            later_need = node.driver.applied_index
            later = asyncio.create_task(node.driver.snapshot_now())
            await asyncio.sleep(0)
            assert gate.calls == 1  # one export at a time
            gate.release()
            a, b, c = await asyncio.gather(first, joined, later)
            assert a == b == gate.indexes[0] >= first_need
            assert gate.indexes[0] < later_need  # so the later request needed a second export
            assert gate.calls == 2 and c == gate.indexes[1] >= later_need
            assert await node.driver.snapshot_now() == c  # already covered: answered at once
            assert gate.calls == 2
        finally:
            await node.close()

    run(go())


def test_stop_waits_for_a_running_export_and_fails_its_requests(tmp_path):
    async def go() -> None:
        node = SingleNode(tmp_path)
        await node.start()
        gate = GatedExport(node.sm, before=True)
        await node.write(10)
        snap = asyncio.create_task(node.driver.snapshot_now())
        await wait_for(gate.entered.is_set, what="the export to start")
        stopping = asyncio.create_task(node.driver.stop())
        await wait_for(lambda: node.driver._stopped, what="stop to begin")
        gate.release()
        await stopping
        assert gate.events == ["export-done"]  # stop returned after the export's thread ended
        with pytest.raises(NodeStoppedError):
            await snap
        assert node.storage.snapshots.metadata.index == 1  # dropped, not half recorded
        node.sm.close()
        node.storage.close()
        assert not os.path.exists(os.path.join(str(tmp_path), "snapshot-out"))
        reopened = StoreStateMachine(str(tmp_path))
        try:
            assert reopened.applied_index >= 11
        finally:
            reopened.close()

    run(go())


# -- three nodes over gRPC ------------------------------------------------------------------------


def _rows(node: GatewayNode) -> list[tuple[int, str]]:
    return [(r.key_values[0].int_value, r.values[0].string_value)
            for r in node.sm.scan_rows("t", "k", [], [])]


def test_leader_keeps_leading_while_every_node_exports(tmp_path):
    """All three nodes reach the snapshot threshold together and their exports block: the
    leader keeps heartbeating and committing (check-quorum keeps hearing from everyone)."""
    cfgs = node_configs(tmp_path, 3, snapshot_entries=30)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            gates: list[GatedExport] = []
            try:
                leader = await leader_of(nodes)
                term = leader.driver.raw.raft.term
                gates = [GatedExport(n.sm) for n in nodes]
                async with AsyncGatewayClient(leader.config.api) as c:
                    for i in range(40):
                        await c.write([row_insert("t.k", {"id": i}, {"v": str(i)})])
                    await wait_for(lambda: all(g.entered.is_set() for g in gates),
                                   what="every node's export to start")
                    ticks = leader.driver.raw.raft.ticks
                    for i in range(40, 140):
                        await c.write([row_insert("t.k", {"id": i}, {"v": str(i)})])
                    await wait_for(lambda: leader.driver.raw.raft.ticks
                                   >= ticks + 3 * leader.driver.opts.election_ticks, what="ticks")
                    await c.write([row_insert("t.k", {"id": 140}, {"v": "last"})])
                assert leader.driver.is_leader and leader.driver.raw.raft.term == term
                await wait_for(lambda: all(n.sm.applied_index >= leader.sm.applied_index
                                           for n in nodes), what="followers to apply")
                assert all(n.driver.last_snapshot_index <= 1 for n in nodes)
                for g in gates:
                    g.release()
                await wait_for(lambda: all(n.driver.last_snapshot_index >= 31 for n in nodes),
                               what="the snapshots to be recorded")
                assert _rows(nodes[0]) == _rows(nodes[1]) == _rows(nodes[2])
            finally:
                for g in gates:
                    g.release()

    run(go(), 120)


def _drop_to(node: GatewayNode, victim: int) -> Callable[[], None]:
    """Drop ``node``'s messages to ``victim`` (all of them if ``node`` is the victim); returns
    the undo."""
    real = node.driver._send
    me = node.config.node_id

    def send(msgs: list[Any]) -> None:
        real([m for m in msgs if me != victim and m.to != victim])

    node.driver._send = send  # type: ignore[method-assign]

    def undo() -> None:
        node.driver._send = real  # type: ignore[method-assign]

    return undo


def test_installing_a_received_snapshot_waits_for_the_running_export(tmp_path):
    cfgs = node_configs(tmp_path, 3, snapshot_entries=10)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            gate: GatedExport | None = None
            try:
                leader = await leader_of(nodes)
                lagging = next(n for n in nodes if n is not leader)
                async with AsyncGatewayClient(leader.config.api) as c:
                    for i in range(5):
                        await c.write([row_insert("t.k", {"id": i}, {"v": str(i)})])
                    await wait_for(lambda: lagging.sm.applied_index >= leader.sm.applied_index,
                                   what="replication")
                    events: list[str] = []
                    gate = GatedExport(lagging.sm, before=True, events=events)
                    real_restore = lagging.sm.restore
                    # The installed snapshot's index, read when it is restored: right after
                    # (at the next applied entry) the node takes a snapshot of its own, which
                    # replaces the received archive and moves the newest index on.
                    installed_at: list[int] = []

                    def restore(data: bytes) -> int:
                        events.append("restore")
                        installed_at.append(lagging.storage.snapshots.metadata.index)
                        return real_restore(data)

                    lagging.sm.restore = restore  # type: ignore[method-assign]
                    own = asyncio.create_task(lagging.driver.snapshot_now())
                    need = lagging.sm.applied_index
                    await wait_for(gate.entered.is_set, what="the lagging node's export")
                    undo = [_drop_to(n, lagging.config.node_id) for n in nodes]
                    for i in range(5, 40):
                        await c.write([row_insert("t.k", {"id": i}, {"v": str(i)})])
                    await c.snapshot()
                    await wait_for(lambda: leader.storage.first_index() > need + 1,
                                   what="the leader to compact past the lagging node")
                    for u in undo:
                        u()
                    await wait_for(lambda: lagging.driver.snapshots._job is not None
                                   and lagging.driver.snapshots._job.aborted,
                                   what="the received snapshot to wait for the export")
                    assert events == [] and lagging.storage.snapshots.metadata.index <= 1
                    gate.release()
                    await wait_for(lambda: lagging.sm.applied_index >= leader.sm.applied_index,
                                   what="the lagging node to install and catch up")
                    assert events[:2] == ["export-done", "restore"]
                    (installed,) = installed_at
                    assert installed > need
                    assert await own == installed  # answered by the installed snapshot
                    await c.write([row_insert("t.k", {"id": 40}, {"v": "after"})])
                await wait_for(lambda: lagging.sm.applied_index >= leader.sm.applied_index,
                               what="replication after the install")
                assert _rows(lagging) == _rows(leader)
                assert len(_rows(leader)) == 41
            finally:
                if gate is not None:
                    gate.release()

    run(go(), 120)


def test_a_received_archive_is_replaced_by_a_snapshot_of_links_after_the_next_entry(tmp_path):
    """A follower that caught up by a received snapshot keeps it as an archive -- a second
    copy of its whole store -- only until the next entry is applied: a snapshot of its own
    (links to the store's tables) then replaces it, although neither ``snapshot_entries``
    entries nor the log growth a snapshot otherwise waits for came."""
    cfgs = node_configs(tmp_path, 3, snapshot_entries=10)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            lagging = next(n for n in nodes if n is not leader)
            undo = [_drop_to(n, lagging.config.node_id) for n in nodes]
            async with AsyncGatewayClient(leader.config.api) as c:
                for i in range(40):
                    await c.write([row_insert("t.k", {"id": i}, {"v": "x" * 200})])
                await c.snapshot()
                need = lagging.sm.applied_index
                await wait_for(lambda: leader.storage.first_index() > need + 1,
                               what="the leader to compact past the lagging node")
                snaps = lagging.storage.snapshots
                # What was installed, seen when it is restored: the snapshot of the node's own
                # may replace the archive at once (an entry applied right after), before a
                # poll of the directory would see the archive.
                restored: list[tuple[int, bool]] = []
                real_restore = lagging.sm.restore

                def restore(data: bytes) -> int:
                    index = snaps.metadata.index
                    restored.append((index, os.path.exists(snaps._path(index))))
                    return real_restore(data)

                lagging.sm.restore = restore  # type: ignore[method-assign]
                for u in undo:
                    u()
                await wait_for(lambda: bool(restored), what="the archive to be installed")
                ((installed, as_archive),) = restored
                assert installed > need and as_archive
                await c.write([row_insert("t.k", {"id": 40}, {"v": "after"})])
                await wait_for(lambda: snaps.metadata.index > installed,
                               what="a snapshot of the lagging node's own")
                names = sorted(os.listdir(snaps.directory))
                assert names == [f"{snaps.metadata.index:020d}.snapdir", "CURRENT"]
            await wait_for(lambda: lagging.sm.applied_index >= leader.sm.applied_index,
                           what="replication")
            assert _rows(lagging) == _rows(leader) and len(_rows(leader)) == 41

    run(go(), 120)
