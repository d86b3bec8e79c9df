"""In-process Raft drivers for node tests: three ``RaftDriver`` objects in one event loop over
real storage and stores, messages handed from one to another (``Trio``), and storage that
records which thread persisted each Ready (``RecordingStorage``)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from gateway.client import row_insert
from gateway.node.loop.driver import DriverOptions, RaftDriver
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.storage.storage import RaftLogStorage
from gateway.raft import Message

from .conftest import wait_for

__all__ = ["RecordingStorage", "Trio"]


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

    def __init__(self, root: Any, epoch_s: float = 1e6) -> None:
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
                DriverOptions(i, 7, tick_s=0.01, election_ticks=10, epoch_s=epoch_s),
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
        await asyncio.gather(*(lead.submit_write(WriteProposal(
            [row_insert("t.s", {"id": i}, {"v": f"value {i}"})])) for i in range(first, first + n)))

    async def close(self) -> None:
        for d in self.drivers.values():
            await d.stop()
        for i in self.drivers:
            self.sms[i].close()
            self.storages[i].close()
