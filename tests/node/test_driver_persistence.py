"""Where each node's Raft loop persists its Readies: a leader on its I/O thread (its event loop
serves the API meanwhile), a follower on the loop's own thread (``RaftDriver._save_inline``);
either way every replica ends with the same log and store, a follower that leads later moves
its writes to the I/O thread, and a follower's failing write stops its Raft loop as a failing
write on the I/O thread does.

Three ``RaftDriver`` objects in one event loop, real storage and stores, messages handed from
one driver to another in process. Nothing here asserts on time.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from gateway.client import row_insert
from gateway.node.driver import DriverOptions, RaftDriver
from gateway.node.errors import NodeStoppedError
from gateway.node.state_machine import StoreStateMachine
from gateway.node.storage import RaftLogStorage
from gateway.raft import Message

from .conftest import run, wait_for


class RecordingStorage(RaftLogStorage):
    """Real storage that records the thread of every ``save_ready`` with entries (and can be
    told to fail them)."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory, fsync=False)
        self.threads: list[str] = []
        self.fail: BaseException | None = None

    def save_ready(self, rd: Any) -> None:
        if rd.entries:
            self.threads.append(threading.current_thread().name)
            if self.fail is not None:
                raise self.fail
        super().save_ready(rd)


class Trio:
    """Three drivers over real storage and stores; ``send`` delivers in process."""

    def __init__(self, root: Any) -> None:
        self.storages: dict[int, RecordingStorage] = {}
        self.sms: dict[int, StoreStateMachine] = {}
        self.drivers: dict[int, RaftDriver] = {}
        self.cut: set[int] = set()  # nodes whose messages are dropped both ways
        for i in (1, 2, 3):
            st = RecordingStorage(os.path.join(str(root), f"raft{i}"))
            st.bootstrap((1, 2, 3))
            sm = StoreStateMachine(os.path.join(str(root), f"store{i}"))
            self.storages[i], self.sms[i] = st, sm
            self.drivers[i] = RaftDriver(
                DriverOptions(i, 7, tick_s=0.01, election_ticks=10, epoch_s=1e6),
                st, sm, self._send)

    def _send(self, msgs: list[Message]) -> None:
        for m in msgs:
            if m.to in self.drivers and m.to not in self.cut and m.from_ not in self.cut:
                self.drivers[m.to].step([m])

    async def start(self) -> RaftDriver:
        for d in self.drivers.values():
            d.start()
        await wait_for(lambda: self.leader() is not None, what="a leader")
        return self.leader()  # type: ignore[return-value]

    def id_of(self, driver: RaftDriver) -> int:
        return next(i for i, d in self.drivers.items() if d is driver)

    def leader(self) -> RaftDriver | None:
        return next((d for i, d in self.drivers.items()
                     if d.is_leader and i not in self.cut), None)

    async def write(self, lead: RaftDriver, first: int, n: int) -> None:
        await asyncio.gather(*(lead.submit_write(
            [row_insert("t.s", {"id": i}, {"v": f"value {i}"})]) for i in range(first, first + n)))

    async def close(self) -> None:
        for d in self.drivers.values():
            await d.stop()
        for i in self.drivers:
            self.sms[i].close()
            self.storages[i].close()


def _contents(sm: StoreStateMachine) -> list[tuple[bytes, Any]]:
    return list(sm.store.scan_entries())


def test_leader_persists_on_its_io_thread_followers_on_the_loop_and_replicas_agree(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path)
        lead = await trio.start()
        try:
            for s in trio.storages.values():
                s.threads.clear()
            await trio.write(lead, 0, 50)
            await trio.write(lead, 50, 50)
            last = lead.applied_index
            await wait_for(lambda: all(d.applied_index >= last for d in trio.drivers.values()),
                           what="every replica to apply the writes")
            loop_thread = threading.current_thread().name
            for i, st in trio.storages.items():
                assert st.threads, f"node {i} persisted no entries"
                if trio.drivers[i] is lead:
                    assert all(t.startswith("raft-io-") for t in st.threads), st.threads
                else:
                    assert set(st.threads) == {loop_thread}, st.threads
            stores = [_contents(sm) for sm in trio.sms.values()]
            assert len(stores[0]) > 100 and stores[0] == stores[1] == stores[2]
            lasts = {st.last_index() for st in trio.storages.values()}
            assert len(lasts) == 1
        finally:
            await trio.close()

    run(go())


def test_a_follower_that_becomes_leader_persists_on_its_io_thread(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path)
        old = await trio.start()
        try:
            await trio.write(old, 0, 10)
            old_id = trio.id_of(old)
            trio.cut.add(old_id)  # the old leader is cut off: another node takes over
            await wait_for(lambda: trio.leader() is not None, what="a new leader")
            new = trio.leader()
            assert new is not None and new is not old
            new_id = trio.id_of(new)
            st = trio.storages[new_id]
            before = len(st.threads)
            await trio.write(new, 10, 20)
            assert st.threads[before:] and all(
                t.startswith("raft-io-") for t in st.threads[before:]), st.threads[before:]
            others = [i for i in trio.drivers if i not in (old_id, new_id)]
            assert others and trio.storages[others[0]].threads[-1] == \
                threading.current_thread().name
        finally:
            await trio.close()

    run(go())


def test_a_follower_whose_log_write_fails_stops_its_raft_loop(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path)
        lead = await trio.start()
        try:
            await trio.write(lead, 0, 5)
            follower_id = next(i for i, d in trio.drivers.items() if d is not lead)
            follower = trio.drivers[follower_id]
            trio.storages[follower_id].fail = OSError(5, "Input/output error")
            failures: list[BaseException] = []
            follower.on_failure = failures.append
            await trio.write(lead, 5, 5)  # the other follower still makes a quorum
            await wait_for(lambda: follower.failure is not None, what="the follower to fail")
            assert failures and "Input/output error" in str(follower.failure)
            with pytest.raises(NodeStoppedError):
                await follower.submit_write([row_insert("t.s", {"id": 99}, {"v": "x"})])
        finally:
            await trio.close()

    run(go())
