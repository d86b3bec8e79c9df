"""A Ready does not carry an append without entries that a later append of the same Ready, to
the same peer and in the same term, supersedes (``rawnode.superseded_appends_dropped``): the
busy leader's cycle (replies stepped, the commit broadcast, then new writes proposed) sends one
append per follower instead of two, and the followers end with the same log and commit index
as if both had been sent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.raft import Entry, Message, MessageType
from gateway.raft.rawnode import superseded_appends_dropped

from .harness import Cluster

MT = MessageType


def _app(to: int, index: int, commit: int, n: int = 0, term: int = 2) -> Message:
    ents = [Entry(term=term, index=index + 1 + k, data=b"x") for k in range(n)]
    return Message(MT.APP, to=to, from_=1, term=term, index=index, log_term=term,
                   entries=ents, commit=commit)


def test_an_empty_append_followed_by_one_with_entries_to_the_same_peer_is_dropped():
    empty, full = _app(2, 5, 5), _app(2, 5, 5, n=2)
    other = Message(MT.HEARTBEAT, to=3, from_=1, term=2, commit=5)
    assert superseded_appends_dropped([empty, other, full]) == [other, full]


def test_appends_that_are_not_superseded_stay_in_order():
    cases = [
        [_app(2, 5, 5), _app(3, 5, 5, n=1)],  # another peer
        [_app(2, 5, 6), _app(2, 5, 5, n=1)],  # the later one says less about the commit
        [_app(2, 5, 5, term=2), _app(2, 5, 5, n=1, term=3)],  # another term
        [_app(2, 6, 5), _app(2, 5, 5, n=1)],  # the later one starts lower (a probe back)
        [_app(2, 5, 5, n=1), _app(2, 6, 6)],  # the empty one comes last: a newer commit
        [_app(2, 5, 5), _app(2, 5, 6)],  # two empty ones: nothing supersedes
    ]
    for msgs in cases:
        got = superseded_appends_dropped(msgs)
        assert got == msgs and got is msgs


def _follower_state(c: Cluster, i: int) -> tuple[int, int, list[bytes]]:
    r = c.raft(i)
    return (r.raft_log.committed, r.raft_log.last_index(), c.data(i))


def _busy_cycle(fold: bool) -> tuple[int, list, dict]:
    """Three nodes; the leader proposes, the followers append and reply, and the leader then
    steps the replies and proposes again before its next Ready. Returns how many appends that
    Ready sent and, after everything settles, each follower's commit, last index and data."""
    import gateway.raft.rawnode as rawnode

    real = rawnode.superseded_appends_dropped
    if not fold:
        rawnode.superseded_appends_dropped = lambda msgs: msgs  # type: ignore[assignment]
    try:
        c = Cluster([1, 2, 3])
        c.elect(1)
        lead = c.nodes[1]
        lead.propose(b"a")
        c.process_ready(1)
        sent = list(c.queue)
        c.queue.clear()
        for m in sent:  # the followers append and reply
            c.deliver(m)
        for i in (2, 3):
            c.process_ready(i)
        replies = list(c.queue)
        c.queue.clear()
        for m in replies:  # the leader steps the replies (the commit moves) ...
            c.deliver(m)
        lead.propose(b"b")  # ... and new writes come in, in the same cycle
        rd = lead.ready()
        appends = [m for m in rd.messages if m.type == MT.APP]
        c.storages[1].persist(rd)
        for e in rd.committed_entries:
            c.applied[1].append(e)
        lead.advance(rd)
        for m in rd.messages:
            c.deliver(m)
        for i in (2, 3):
            c.process_ready(i)
        mid = {i: c.raft(i).raft_log.committed for i in (2, 3)}
        c.stabilize()
        return len(appends), [_follower_state(c, i) for i in (2, 3)], mid
    finally:
        rawnode.superseded_appends_dropped = real


def test_a_busy_leader_cycle_sends_one_append_per_follower_with_the_same_outcome():
    n_fold, end_fold, mid_fold = _busy_cycle(fold=True)
    n_all, end_all, mid_all = _busy_cycle(fold=False)
    assert n_all == 4 and n_fold == 2
    assert mid_fold == mid_all  # the commit each follower learned from that cycle
    assert end_fold == end_all
    assert all(data == [b"a", b"b"] for _, _, data in end_fold)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2, 3]), st.integers(0, 3), st.integers(0, 3),
                          st.integers(0, 2), st.sampled_from([2, 3])), max_size=8))
def test_what_each_peer_learns_is_unchanged(spec):
    """For any list of appends, each peer's resulting commit (``min(commit, last new
    index)``, the most any append tells it) and the appends with entries are the same with
    and without the dropped ones, in the same order."""
    msgs = [_app(to, 4 + idx, 4 + commit, n=n, term=term) for to, idx, commit, n, term in spec]
    got = superseded_appends_dropped(msgs)

    def learned(ms: list[Message]) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        for m in ms:
            if m.type == MT.APP:
                key = (m.to, m.term)
                out[key] = max(out.get(key, 0), min(m.commit, m.index + len(m.entries)))
        return out

    assert [m for m in got if m.entries] == [m for m in msgs if m.entries]
    assert all(m in msgs for m in got)
    assert learned(got) == learned(msgs)
