"""Snapshots, membership changes, leader transfer and linearizable reads."""

from __future__ import annotations

import pytest

from gateway.raft import (
    ConfChange,
    ConfChangeError,
    ConfChangeSingle,
    ConfChangeTransition,
    ConfChangeType,
    ConfigError,
    MemoryStorage,
    ProposalDroppedError,
    ReadOnlyOption,
)
from gateway.raft.config import Config
from gateway.raft.tracker import ProgressState
from gateway.raft.types import Role

from .harness import Cluster

ADD, REMOVE, LEARNER = (ConfChangeType.ADD_NODE, ConfChangeType.REMOVE_NODE,
                        ConfChangeType.ADD_LEARNER_NODE)


def _compact(c: Cluster, i: int) -> None:
    st = c.storages[i]
    applied = c.raft(i).raft_log.applied
    st.create_snapshot(applied, c.raft(i).trk.config.conf_state(), b"state@%d" % applied)
    st.compact(applied)


def test_lagging_follower_catches_up_by_chunked_snapshot() -> None:
    c = Cluster([1, 2, 3], max_snapshot_chunk=4)
    c.elect(1)
    c.isolate(3)
    for k in range(20):
        c.nodes[1].propose(b"v%d" % k)
    c.stabilize()
    _compact(c, 1)
    c.heal()
    c.tick_all(3)
    r3 = c.raft(3)
    snap = c.storages[3].snapshot()
    assert snap.data == c.storages[1].snapshot().data
    assert len(snap.data) > 4  # it really arrived in several chunks
    assert r3.raft_log.committed == c.raft(1).raft_log.committed
    assert c.raft(1).trk.progress[3].state == ProgressState.REPLICATE


def test_lost_snapshot_chunks_are_retransmitted() -> None:
    c = Cluster([1, 2, 3], max_snapshot_chunk=3)
    c.elect(1)
    c.isolate(3)
    for k in range(10):
        c.nodes[1].propose(b"v%d" % k)
    c.stabilize()
    _compact(c, 1)
    c.heal()
    dropped = []

    def drop_some_chunks(m) -> bool:  # type: ignore[no-untyped-def]
        if m.chunk is not None and m.chunk.offset in (3, 9) and len(dropped) < 2:
            dropped.append(m.chunk.offset)
            return True
        return False

    c.drop_filter = drop_some_chunks
    c.tick_all(20)
    assert dropped
    assert c.storages[3].snapshot().data == c.storages[1].snapshot().data
    assert c.raft(3).raft_log.committed == c.raft(1).raft_log.committed


def test_compaction_keeps_log_readable_after_snapshot() -> None:
    st = MemoryStorage.bootstrap((1,))
    from gateway.raft import CompactedError, Entry

    st.append([Entry(1, i) for i in range(2, 10)])
    st.create_snapshot(5, None, b"s")
    st.compact(5)
    assert st.first_index() == 6 and st.term(5) == 1
    with pytest.raises(CompactedError):
        st.entries(4, 7, 1 << 30)


def _cc(*changes: tuple[ConfChangeType, int], transition=ConfChangeTransition.AUTO) -> ConfChange:
    return ConfChange(tuple(ConfChangeSingle(t, n) for t, n in changes), transition)


def test_learner_catches_up_then_promoted_by_joint_consensus() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    for k in range(5):
        c.nodes[1].propose(b"v%d" % k)
    c.stabilize()
    _compact(c, 1)
    c.add_node(4)
    c.nodes[1].propose_conf_change(_cc((LEARNER, 4)))
    c.stabilize()
    # the learner is not a voter yet but received everything
    cfg = c.raft(1).trk.config
    assert 4 in cfg.learners and 4 not in cfg.voters
    c.tick_all(3)
    assert c.raft(4).raft_log.committed == c.raft(1).raft_log.committed
    assert not c.raft(4).promotable()
    # replace voter 3 by 4 in one joint change; auto-leave follows
    c.nodes[1].propose_conf_change(_cc((ADD, 4), (REMOVE, 3)))
    c.stabilize()
    cfg = c.raft(1).trk.config
    assert cfg.voters == frozenset({1, 2, 4}) and not cfg.joint()
    assert c.raft(3).removed  # a removed node stops itself
    with pytest.raises(ProposalDroppedError):
        c.nodes[3].propose(b"x")
    c.nodes[1].propose(b"after")
    c.stabilize()
    assert c.data(4)[-1] == b"after"


def test_joint_config_requires_both_majorities() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    for i in (4, 5):
        c.add_node(i)
    c.nodes[1].propose_conf_change(
        _cc((ADD, 4), (ADD, 5), (REMOVE, 2), (REMOVE, 3),
            transition=ConfChangeTransition.JOINT_EXPLICIT)
    )
    c.tick_all(5)
    r = c.raft(1)
    assert r.trk.config.joint()
    # with the new voters (4, 5) cut off, only C_old can ack: nothing commits
    c.cut |= {(1, 4), (1, 5)}
    before = r.raft_log.committed
    c.nodes[1].propose(b"needs-both")
    c.stabilize()
    assert r.raft_log.committed == before
    c.heal()
    c.tick_all(3)
    assert r.raft_log.committed > before
    # explicit joint configs are left by an empty change
    c.nodes[1].propose_conf_change(ConfChange())
    c.stabilize()
    assert r.trk.config.voters == frozenset({1, 4, 5}) and not r.trk.config.joint()


def test_invalid_conf_changes_are_refused() -> None:
    from gateway.raft.confchange import enter_joint, simple
    from gateway.raft.tracker import Inflights, TrackerConfig

    c = Cluster([1, 2, 3])
    cfg, prs = c.raft(1).trk.config, c.raft(1).trk.progress

    def nf() -> Inflights:
        return Inflights(4)

    with pytest.raises(ConfChangeError):
        simple(cfg, prs, [ConfChangeSingle(ADD, 4), ConfChangeSingle(ADD, 5)], 1, nf)
    with pytest.raises(ConfChangeError):
        simple(cfg, prs, [ConfChangeSingle(REMOVE, n) for n in (1, 2, 3)], 1, nf)
    joint, jprs = enter_joint(cfg, prs, False, [ConfChangeSingle(ADD, 4)], 1, nf)
    with pytest.raises(ConfChangeError):
        enter_joint(joint, jprs, False, [ConfChangeSingle(ADD, 5)], 1, nf)
    with pytest.raises(ConfChangeError):
        simple(TrackerConfig(), {}, [ConfChangeSingle(REMOVE, 1)], 1, nf)


def test_check_conf_change_gives_the_verdict_of_apply_without_changing_anything() -> None:
    c = Cluster([1])
    c.elect(1)
    r = c.raft(1)
    before = (r.trk.config, dict(r.trk.progress))
    with pytest.raises(ConfChangeError, match="removed all voters"):
        r.check_conf_change(_cc((REMOVE, 1)))
    r.check_conf_change(_cc((LEARNER, 2)))  # valid: no error
    assert (r.trk.config, dict(r.trk.progress)) == before


def test_second_conf_change_refused_while_first_pending() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.add_node(4)
    c.add_node(5)
    c.nodes[1].propose_conf_change(_cc((LEARNER, 4)))
    c.nodes[1].propose_conf_change(_cc((LEARNER, 5)))  # replaced by an empty entry
    c.stabilize()
    learners = c.raft(1).trk.config.learners
    assert learners == frozenset({4})


def test_leader_transfer() -> None:
    c = Cluster([1, 2, 3], check_quorum=True, pre_vote=True)
    c.elect(1)
    c.nodes[1].transfer_leader(3)
    c.stabilize()
    assert c.raft(3).role == Role.LEADER
    assert c.raft(1).role == Role.FOLLOWER and c.raft(1).lead == 3


def test_leader_transfer_to_lagging_follower_waits_for_catch_up() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(3)
    c.nodes[1].propose(b"x")
    c.stabilize()
    c.nodes[1].transfer_leader(3)
    c.stabilize()
    assert c.raft(1).lead_transferee == 3
    with pytest.raises(ProposalDroppedError):
        c.nodes[1].propose(b"blocked during transfer")
    c.heal()
    c.tick_all(2)
    assert c.raft(3).role == Role.LEADER and c.data(3) == [b"x"]


def test_leader_transfer_aborted_after_election_timeout() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(3)
    c.nodes[1].transfer_leader(3)
    c.stabilize()
    for _ in range(c.raft(1).election_timeout):
        c.tick(1)
    c.stabilize()
    assert c.raft(1).lead_transferee == 0 and c.raft(1).role == Role.LEADER


def _read(c: Cluster, node: int, ctx: bytes, lease: bool = False) -> list:  # type: ignore[type-arg]
    got = []
    orig = c.process_ready

    def capture(i: int) -> bool:
        n = c.nodes[i]
        if not n.has_ready():
            return False
        rd = n.ready()
        got.extend((i, rs) for rs in rd.read_states)
        rd.read_states = []
        # re-run the normal persistence path on the same Ready
        n.raft.read_states = []
        _persist(c, i, rd)
        return True

    c.process_ready = capture  # type: ignore[method-assign]
    try:
        c.nodes[node].read_index(ctx, lease=lease)
        c.stabilize()
    finally:
        c.process_ready = orig  # type: ignore[method-assign]
    return got


def _persist(c: Cluster, i: int, rd) -> None:  # type: ignore[no-untyped-def]
    st = c.storages[i]
    if not rd.snapshot.is_empty():
        st.apply_snapshot(rd.snapshot)
    st.append(rd.entries)
    if rd.hard_state is not None:
        st.set_hard_state(rd.hard_state)
    c.queue.extend(rd.messages)
    c.applied[i].extend(rd.committed_entries)
    c.nodes[i].advance(rd)


def test_read_index_on_leader_and_follower() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.nodes[1].propose(b"w")
    c.stabilize()
    commit = c.raft(1).raft_log.committed
    assert _read(c, 1, b"r1") == [(1, _rs(commit, b"r1"))]
    assert _read(c, 3, b"r3") == [(3, _rs(commit, b"r3"))]


def _rs(index: int, ctx: bytes):  # type: ignore[no-untyped-def]
    from gateway.raft import ReadState

    return ReadState(index, ctx)


def test_read_index_waits_for_current_term_commit() -> None:
    c = Cluster([1, 2, 3])
    c.nodes[1].campaign()
    # deliver votes but hold the leader's first append: its no-op is not committed yet
    for _ in range(2):
        for i in (1, 2, 3):
            c.process_ready(i)
        msgs = list(c.queue)
        c.queue.clear()
        for m in msgs:
            c.deliver(m)
    r = c.raft(1)
    assert r.role == Role.LEADER and not r.committed_entry_in_current_term()
    c.nodes[1].read_index(b"early")
    assert r.pending_read_index_messages and not r.read_states
    c.stabilize()
    assert not r.pending_read_index_messages


def test_read_index_needs_quorum_heartbeat() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(1)
    assert _read(c, 1, b"partitioned") == []  # a deposed leader cannot confirm


def test_lease_read_requires_check_quorum() -> None:
    with pytest.raises(ConfigError):
        Config(id=1, storage=MemoryStorage(), read_only_option=ReadOnlyOption.LEASE_BASED,
               check_quorum=False).validate()


def test_lease_read_served_without_heartbeat_round_while_lease_held() -> None:
    c = Cluster([1, 2, 3], check_quorum=True, pre_vote=True)
    c.elect(1)
    c.tick_all(2)  # a heartbeat round acknowledged by the followers
    commit = c.raft(1).raft_log.committed
    c.isolate(1)  # no heartbeat can be answered now
    assert _read(c, 1, b"lease", lease=True) == [(1, _rs(commit, b"lease"))]
    for _ in range(c.raft(1).election_timeout):
        c.tick(1)
    # lease expired: falls back to a quorum round, which cannot complete
    assert _read(c, 1, b"expired", lease=True) == []


def test_lease_revoked_by_leader_transfer() -> None:
    c = Cluster([1, 2, 3], check_quorum=True)
    c.elect(1)
    c.tick_all(2)
    c.cut |= {(2, 1), (3, 1)}
    c.nodes[1].transfer_leader(2)
    c.stabilize()
    assert c.raft(1).lease_revoked
    assert _read(c, 1, b"x", lease=True) == []
