"""Where each node's Raft loop persists its Readies: a leader with several writes in flight on
its I/O thread (its event loop serves the API meanwhile), a leader serving one write at a time
and a follower on the loop's own thread (``RaftDriver._save_inline``); either way every replica
ends with the same log and store, a follower that leads later moves its concurrent writes to
the I/O thread, and a follower's failing write stops its Raft loop as a failing write on the
I/O thread does.

Three ``RaftDriver`` objects in one event loop, real storage and stores, messages handed from
one driver to another in process. Nothing here asserts on time.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gateway.client import row_insert
from gateway.node.base.errors import NodeStoppedError
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.state_machine import StoreStateMachine

from .conftest import run, wait_for
from .drivers import Trio


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
                if trio.drivers[i] is lead:  # 50 writes at once: on the I/O thread
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


def test_a_leader_serving_one_write_at_a_time_persists_on_its_loop(tmp_path):
    async def go() -> None:
        trio = Trio(tmp_path)
        lead = await trio.start()
        try:
            st = trio.storages[trio.id_of(lead)]
            st.threads.clear()
            for i in range(10):  # each write alone in flight
                await trio.write(lead, i, 1)
            assert len(st.threads) >= 10
            assert set(st.threads) == {threading.current_thread().name}, st.threads
            st.threads.clear()
            await trio.write(lead, 10, 40)  # then many at once again
            assert any(t.startswith("raft-io-") for t in st.threads), st.threads
            last = lead.applied_index
            await wait_for(lambda: all(d.applied_index >= last for d in trio.drivers.values()),
                           what="every replica to apply the writes")
            stores = [_contents(sm) for sm in trio.sms.values()]
            assert len(stores[0]) > 50 and stores[0] == stores[1] == stores[2]
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
                await follower.submit_write(WriteProposal(
                        [row_insert("t.s", {"id": 99}, {"v": "x"})]))
        finally:
            await trio.close()

    run(go())
