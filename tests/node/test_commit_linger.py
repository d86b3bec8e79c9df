"""A leader's commit-only appends wait for the next append to carry them (``CommitLinger``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.loop.commit_linger import CommitLinger
from gateway.raft import Entry, EntryType, Message
from gateway.raft.tracker import ProgressState
from gateway.raft.types import MessageType as MT

from .conftest import leader_of, node_configs, run, running, wait_for

DELAY = 0.01
LAST = 10


def _raft(**states: Any) -> SimpleNamespace:
    """A leader (id 1, term 3) whose log ends at ``LAST``; followers 2 and 3 caught up in
    REPLICATE state unless ``states`` says otherwise (``f2=(state, next)``)."""
    progress = {}
    for peer in (2, 3):
        state, nxt = states.get(f"f{peer}", (ProgressState.REPLICATE, LAST + 1))
        progress[peer] = SimpleNamespace(state=state, next=nxt)
    return SimpleNamespace(id=1, lead=1, term=3, trk=SimpleNamespace(progress=progress),
                           raft_log=SimpleNamespace(last_index=lambda: LAST))


def _commit(to: int, commit: int, term: int = 3) -> Message:
    return Message(MT.APP, to=to, from_=1, term=term, index=LAST, log_term=3, commit=commit)


def _run(body: Any) -> Any:
    return asyncio.run(body())


def test_a_commit_only_append_to_a_caught_up_follower_is_sent_after_the_delay() -> None:
    async def body() -> list[list[Message]]:
        sent: list[list[Message]] = []
        linger = CommitLinger(sent.append, DELAY)
        linger.send([_commit(2, 9), _commit(3, 9)], _raft())
        assert sent == []
        linger.send([_commit(2, 10)], _raft())  # a newer commit replaces the held one
        await asyncio.sleep(DELAY * 5)
        return sent

    (batch,) = _run(body)
    assert sorted((m.to, m.commit) for m in batch) == [(2, 10), (3, 9)]


def test_the_next_append_carries_the_commit_and_the_held_one_is_not_sent() -> None:
    async def body() -> tuple[list[list[Message]], CommitLinger]:
        sent: list[list[Message]] = []
        linger = CommitLinger(sent.append, DELAY)
        linger.send([_commit(2, 9), _commit(3, 9)], _raft())
        new = Message(MT.APP, to=2, from_=1, term=3, index=LAST, log_term=3, commit=9,
                      entries=[Entry(index=LAST + 1, term=3, data=b"x")])
        hb_low = Message(MT.HEARTBEAT, to=3, from_=1, term=3, commit=8)
        linger.send([new, hb_low], _raft(f2=(ProgressState.REPLICATE, LAST + 2)))
        hb = Message(MT.HEARTBEAT, to=3, from_=1, term=3, commit=9)
        linger.send([hb], _raft())
        await asyncio.sleep(DELAY * 5)
        return sent, linger

    sent, linger = _run(body)
    assert [[(m.type, m.to) for m in b] for b in sent] == [
        [(MT.APP, 2), (MT.HEARTBEAT, 3)], [(MT.HEARTBEAT, 3)]]  # nothing at the flush
    assert (linger.held, linger.absorbed) == (2, 2)


def test_the_delay_runs_from_each_commits_hold_not_from_one_absorbed_before() -> None:
    """A timer set for a commit that the next append carried must not flush the commit held
    after it early: every commit-only append leaves at least ``DELAY`` after it was held
    (a loaded machine may send it later, never sooner)."""
    async def body() -> tuple[list[tuple[float, list[Message]]], float]:
        loop = asyncio.get_running_loop()
        sent: list[tuple[float, list[Message]]] = []
        linger = CommitLinger(lambda batch: sent.append((loop.time(), batch)), DELAY)
        linger.send([_commit(2, 9), _commit(3, 9)], _raft())
        await asyncio.sleep(DELAY * 0.6)
        carry = [Message(MT.APP, to=p, from_=1, term=3, index=LAST, log_term=3, commit=9,
                         entries=[Entry(index=LAST + 1, term=3, data=b"x")]) for p in (2, 3)]
        linger.send(carry, _raft())  # carries commit 9 to both: nothing held now
        held_at = loop.time()
        linger.send([_commit(2, 10), _commit(3, 10)], _raft())
        await asyncio.sleep(DELAY * 4)
        return sent, held_at

    sent, held_at = _run(body)
    flushed = [(t, m) for t, batch in sent for m in batch if not m.entries]
    assert sorted((m.to, m.commit) for _, m in flushed) == [(2, 10), (3, 10)]
    assert all(t >= held_at + DELAY - 0.001 for t, _ in flushed), (held_at, flushed)


def test_probes_entries_other_messages_and_membership_commits_pass_at_once_in_order() -> None:
    async def body() -> list[list[Message]]:
        sent: list[list[Message]] = []
        linger = CommitLinger(sent.append, DELAY)
        raft = _raft(f2=(ProgressState.PROBE, LAST + 1), f3=(ProgressState.REPLICATE, LAST))
        probe = _commit(2, 9)
        behind = Message(MT.APP, to=3, from_=1, term=3, index=LAST - 1, log_term=3, commit=9)
        vote = Message(MT.VOTE_RESP, to=2, from_=1, term=3)
        linger.send([probe, vote, behind], raft)
        membership = [Entry(index=LAST, term=3, type=EntryType.CONF_CHANGE)]
        linger.send([_commit(2, 9), _commit(3, 9)], _raft(), membership)
        assert len(sent) == 2  # at once, not at the flush
        await asyncio.sleep(DELAY * 5)
        return sent

    sent = _run(body)
    assert [[(m.type, m.to) for m in b] for b in sent] == [
        [(MT.APP, 2), (MT.VOTE_RESP, 2), (MT.APP, 3)], [(MT.APP, 2), (MT.APP, 3)]]


def test_held_messages_are_dropped_when_leadership_ends() -> None:
    async def body() -> list[list[Message]]:
        sent: list[list[Message]] = []
        linger = CommitLinger(sent.append, DELAY)
        linger.send([_commit(2, 9)], _raft())
        linger.drop()  # the node stopped leading
        raft = _raft()
        linger.send([_commit(3, 9)], raft)
        raft.term = 4  # the term moved before the flush: the held message is stale
        await asyncio.sleep(DELAY * 5)
        return sent

    assert _run(body) == []


@pytest.mark.parametrize("linger_ms", [5, 0])
def test_one_writer_sends_each_follower_one_append_per_write_and_loses_no_commit(tmp_path,
                                                                                 linger_ms):
    """In a cluster, sequential writes: every follower applies every write (the last one
    from a held commit-only append, flushed), receiving about one message per write instead
    of two (an append, then its commit) -- and two with ``commit_linger_ms = 0``."""
    # Heartbeats every 5 ticks, not every tick: they come on top of the appends at a rate set
    # by the clock, so on a slow (loaded) machine every-tick heartbeats alone reach about one
    # message per write and the count would say more about the machine than the linger.
    cfgs = [replace(c, commit_linger_ms=linger_ms, heartbeat_ticks=5, election_ticks=30)
            for c in node_configs(tmp_path, 3)]

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            followers = [n for n in nodes if n is not leader]
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write([row_insert("t.l", {"id": 0}, {"v": "warm"})])
                await wait_for(lambda: all(n.sm.applied_index >= leader.sm.applied_index
                                           for n in nodes), what="replication")
                before = [f.driver.counters.messages_received for f in followers]
                writes = 60
                for i in range(1, writes + 1):
                    await c.write([row_insert("t.l", {"id": i}, {"v": str(i)})])
            await wait_for(lambda: all(n.sm.applied_index >= leader.sm.applied_index
                                       for n in nodes), what="the last commit on followers")
            for f, b in zip(followers, before, strict=True):
                per_write = (f.driver.counters.messages_received - b) / writes
                # heartbeats (every 5 ticks) come on top of one append per write
                assert (per_write < 1.6) == bool(linger_ms), per_write
                assert len(list(f.sm.scan_rows("t", "l", [], []))) == writes + 1
            linger = leader.driver.commit_linger
            assert linger.absorbed >= writes if linger_ms else linger.held == 0

    run(go(), 90)
