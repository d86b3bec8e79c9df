"""Log replication: pipelining, batching, flow control, fast backtracking, commit rules,
proposal forwarding, and the persistence contract of Ready."""

from __future__ import annotations

import pytest

from gateway.raft import Entry, Message, MessageType, ProposalDroppedError
from gateway.raft.tracker import Inflights, ProgressState

from .harness import Cluster

MT = MessageType


def test_entries_commit_and_apply_on_all_nodes() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    for k in range(10):
        c.nodes[1].propose(b"v%d" % k)
    c.stabilize()
    for i in (1, 2, 3):
        assert c.data(i) == [b"v%d" % k for k in range(10)]


def test_proposal_forwarded_from_follower() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.nodes[3].propose(b"via-3")
    c.stabilize()
    assert all(c.data(i) == [b"via-3"] for i in (1, 2, 3))


def test_forwarding_disabled_drops_proposal() -> None:
    c = Cluster([1, 2, 3], disable_proposal_forwarding=True)
    c.elect(1)
    with pytest.raises(ProposalDroppedError):
        c.nodes[2].propose(b"x")


def test_proposal_without_leader_is_dropped() -> None:
    c = Cluster([1, 2, 3])
    with pytest.raises(ProposalDroppedError):
        c.nodes[1].propose(b"x")


def test_batching_respects_max_bytes_per_message() -> None:
    c = Cluster([1, 2, 3], max_size_per_msg=250)
    c.elect(1)
    c.trace = True
    c.nodes[1].propose_batch([b"x" * 100] * 10)
    c.stabilize()
    apps = [m for m in _sent(c) if m[0] == MT.APP and m[1] == 2 and m[3]]
    assert apps, "no appends with entries"
    assert all(size <= 250 or n == 1 for _, _, n, size, _ in apps)
    assert sum(n for _, _, n, _, _ in apps) == 10
    assert c.data(2) == [b"x" * 100] * 10


def _sent(c: Cluster) -> list[tuple[MessageType, int, int, int, bool]]:
    return c.sent_summary


@pytest.fixture(autouse=True)
def _record_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = Cluster.deliver

    def deliver(self: Cluster, m: Message) -> None:
        if not hasattr(self, "sent_summary"):
            self.sent_summary = []
        size = sum(len(e.data) for e in m.entries)
        self.sent_summary.append((m.type, m.to, len(m.entries), size, m.reject))
        orig(self, m)

    monkeypatch.setattr(Cluster, "deliver", deliver)


def test_pipelining_limited_by_max_inflight() -> None:
    c = Cluster([1, 2, 3], max_inflight_msgs=3, max_size_per_msg=1)
    c.elect(1)
    r = c.raft(1)
    # hold the messages: send 10 single-entry proposals without delivering anything
    for k in range(10):
        c.nodes[1].propose(b"p%d" % k)
    c.process_ready(1)
    to2 = [m for m in c.queue if m.to == 2 and m.type == MT.APP and m.entries]
    assert len(to2) == 3  # the window is full
    pr = r.trk.progress[2]
    assert pr.state == ProgressState.REPLICATE and pr.is_paused()
    c.stabilize()
    assert c.data(2) == [b"p%d" % k for k in range(10)]


def test_inflights_bytes_limit() -> None:
    inf = Inflights(10, max_bytes=100)
    inf.add(1, 60)
    assert not inf.full()
    inf.add(2, 50)
    assert inf.full()
    inf.free_le(1)
    assert not inf.full() and len(inf) == 1


def _storage(terms: list[int], term: int):  # type: ignore[no-untyped-def]
    from gateway.raft import HardState, MemoryStorage

    st = MemoryStorage.bootstrap((1, 2, 3))
    st.append([Entry(t, i + 2, data=b"e") for i, t in enumerate(terms)])
    st.set_hard_state(HardState(term=term, commit=1))
    return st


def test_fast_backtracking_skips_conflicting_terms() -> None:
    leader_log = [5] * 30
    follower_log = [2] * 20 + [3] * 20 + [4] * 20
    c = Cluster(
        [1, 2, 3],
        storages={1: _storage(leader_log, 5), 2: _storage(follower_log, 4),
                  3: _storage(leader_log, 5)},
    )
    c.elect(1)
    rejections = [m for m in c.sent_summary if m[0] == MT.APP_RESP]
    assert c.raft(2).raft_log.last_index() == c.raft(1).raft_log.last_index()
    assert c.raft(2).raft_log.term(31) == 5
    # one entry per round trip would need ~60 rejections; term hints need a couple
    n_rejects = sum(1 for _, to, _, _, rej in rejections if to == 1 and rej)
    assert 1 <= n_rejects <= 3, n_rejects


def test_leader_commits_only_current_term_entries_by_counting() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    r = c.raft(1)
    c.isolate(1)
    c.nodes[1].propose(b"old-term")  # index 3, term 2, acknowledged by nobody yet
    c.stabilize()
    old_index = r.raft_log.last_index()
    old_term = r.term
    # node 1 is re-elected in a later term (Figure 8 of the Raft paper)
    r.become_follower(old_term + 1, 0)
    r.become_candidate()
    r.become_leader()
    noop = r.raft_log.last_index()
    assert r.raft_log.term(old_index) == old_term < r.term
    # a majority (1 and 2) now stores the old-term entry: still not committed by counting
    r.step(Message(MT.APP_RESP, from_=2, to=1, term=r.term, index=old_index))
    assert r.raft_log.committed < old_index
    # once the current term's entry reaches a majority, both commit
    r.step(Message(MT.APP_RESP, from_=2, to=1, term=r.term, index=noop))
    assert r.raft_log.committed == noop


def test_ready_must_sync_contract() -> None:
    c = Cluster([1, 2, 3])
    n = c.nodes[1]
    n.campaign()
    rd = n.ready()
    # term and vote changed: must be durable before the MsgVote goes out
    assert rd.hard_state is not None and rd.hard_state.vote == 1
    assert rd.must_sync and any(m.type == MT.VOTE for m in rd.messages)
    n.advance(rd)
    c.storages[1].set_hard_state(rd.hard_state)
    for m in rd.messages:
        c.nodes[m.to].step(m)
    for i in (2, 3):
        rd2 = c.nodes[i].ready()
        assert rd2.must_sync  # granting a vote changes the vote: durable before replying
        c.storages[i].set_hard_state(rd2.hard_state)
        c.nodes[i].advance(rd2)
        for m in rd2.messages:
            n.step(m)
    rd = n.ready()
    assert rd.entries and rd.must_sync  # leader's no-op entry
    c.storages[1].append(rd.entries)
    c.storages[1].set_hard_state(rd.hard_state or c.storages[1].hard_state())
    n.advance(rd)
    # a commit-only change does not require a sync
    r = n.raft
    r.raft_log.commit_to(r.raft_log.last_index())
    rd = n.ready()
    assert rd.hard_state is not None and not rd.entries and not rd.must_sync


def test_ready_hands_out_committed_entries_once() -> None:
    c = Cluster([1])
    c.nodes[1].campaign()
    c.stabilize()
    c.nodes[1].propose(b"a")
    rd = c.nodes[1].ready()
    assert [e.data for e in rd.committed_entries] == [b"a"]
    c.storages[1].append(rd.entries)
    c.nodes[1].advance(rd)
    assert not c.nodes[1].has_ready()


def test_step_refuses_local_messages_and_unknown_peers() -> None:
    from gateway.raft import StepLocalMessageError, StepPeerNotFoundError

    c = Cluster([1, 2, 3])
    with pytest.raises(StepLocalMessageError):
        c.nodes[1].step(Message(MT.HUP))
    with pytest.raises(StepPeerNotFoundError):
        c.nodes[1].step(Message(MT.APP_RESP, from_=9, term=1))


def test_forwarded_proposal_entries_are_not_mutated() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    e = Entry(data=b"dup")
    m = Message(MT.PROP, to=1, from_=2, entries=[e])
    c.nodes[1].step(m)
    c.nodes[1].step(m)  # a duplicated delivery
    c.stabilize()
    assert e.index == 0 and e.term == 0
    assert c.data(1) == [b"dup", b"dup"]
