"""Leader election: randomized timeouts, pre-vote, check-quorum and the aurora live-lock fix."""

from __future__ import annotations

from gateway.raft import SplitMix64
from gateway.raft.types import Role

from .harness import Cluster


def test_single_leader_elected_and_terms_agree() -> None:
    c = Cluster([1, 2, 3], seed=7)
    c.tick_all(40)
    leaders = [i for i in c.nodes if c.raft(i).role == Role.LEADER]
    assert len(leaders) == 1
    term = c.raft(leaders[0]).term
    assert all(c.raft(i).term == term for i in c.nodes)
    assert all(c.raft(i).lead == leaders[0] for i in c.nodes)


def test_randomized_timeout_within_bounds() -> None:
    c = Cluster([1, 2, 3], seed=3)
    seen = set()
    r = c.raft(1)
    for _ in range(200):
        r._reset_randomized_election_timeout()
        seen.add(r.randomized_election_timeout)
    assert min(seen) >= r.election_timeout
    assert max(seen) < 2 * r.election_timeout
    assert len(seen) > 5


def test_candidate_with_stale_log_loses() -> None:
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.isolate(3)
    c.nodes[1].propose(b"x")
    c.stabilize()
    c.heal()
    c.isolate(1)
    c.nodes[3].campaign()
    c.stabilize()
    assert c.raft(3).role != Role.LEADER
    c.nodes[2].campaign()
    c.stabilize()
    assert c.raft(2).role == Role.LEADER


def test_prevote_partitioned_node_does_not_disrupt() -> None:
    c = Cluster([1, 2, 3], pre_vote=True, check_quorum=True)
    c.elect(1)
    term = c.raft(1).term
    c.isolate(3)
    for _ in range(100):
        c.tick(3)
        c.stabilize()
    # pre-vote never succeeds in isolation, so the term does not inflate
    assert c.raft(3).term == term
    assert c.raft(3).role == Role.PRE_CANDIDATE
    c.heal()
    c.tick_all(5)
    assert c.raft(1).role == Role.LEADER and c.raft(1).term == term


def test_without_prevote_partitioned_node_inflates_term_and_disrupts() -> None:
    c = Cluster([1, 2, 3], skip_used_terms=False)
    c.elect(1)
    term = c.raft(1).term
    c.isolate(3)
    for _ in range(100):
        c.tick(3)
        c.stabilize()
    assert c.raft(3).term > term + 3
    c.heal()
    c.nodes[3].campaign()  # its next election reaches everybody with the inflated term
    c.stabilize()
    assert c.raft(1).term > term + 3  # the healthy leader was deposed


def test_check_quorum_leader_steps_down_without_quorum() -> None:
    c = Cluster([1, 2, 3], check_quorum=True)
    c.elect(1)
    c.isolate(1)
    for _ in range(2 * c.raft(1).election_timeout + 1):
        c.tick(1)
        c.stabilize()
    assert c.raft(1).role == Role.FOLLOWER


def test_check_quorum_followers_ignore_votes_while_leader_alive() -> None:
    c = Cluster([1, 2, 3], check_quorum=True, skip_used_terms=False)
    c.elect(1)
    term = c.raft(1).term
    # node 3 campaigns although the leader is fine: 2 is in lease and ignores it
    c.cut |= {(1, 3), (3, 1)}
    c.nodes[3].campaign()
    c.stabilize()
    assert c.raft(3).role == Role.CANDIDATE
    assert c.raft(2).term == term
    assert c.raft(1).role == Role.LEADER


class _OrderedTimeouts:
    """Lower-numbered servers always time out sooner (the seed's DSCA scenario)."""

    def __init__(self, node: int, seed: int) -> None:
        self.node = node
        self.rng = SplitMix64(seed * 31 + node)

    def randrange(self, start: int, stop: int) -> int:
        return min(stop - 1, start + 2 * (self.node - 1) + self.rng.randrange(0, 2))


def _livelock_rounds(seed: int, fix: bool, max_ticks: int = 300) -> int | None:
    """Five servers; the leader (5) crashes after replicating entries to 3 and 4 only, so 1
    and 2 have stale logs and time out first. Returns the tick a leader appeared, or None."""
    ids = [1, 2, 3, 4, 5]
    c = Cluster(ids, skip_used_terms=fix)
    for i in ids:
        c.raft(i).rng = _OrderedTimeouts(i, seed)
    c.elect(5)
    c.cut |= {(5, 1), (5, 2)}
    for k in range(3):
        c.nodes[5].propose(b"e%d" % k)
    c.stabilize()
    c.isolate(5)  # crash
    live = [1, 2, 3, 4]
    for i in live:
        c.raft(i).election_elapsed = 0
    for tick in range(1, max_ticks + 1):
        for i in live:
            c.tick(i)
        # one network hop per tick
        for i in live:
            c.process_ready(i)
        pending = list(c.queue)
        c.queue.clear()
        for m in pending:
            c.deliver(m)
        if any(c.raft(i).role == Role.LEADER for i in live):
            return tick
    return None


def test_livelock_fix_elects_leader_within_bounded_rounds() -> None:
    bound = 6 * 10  # six election timeouts
    for seed in range(20):
        t = _livelock_rounds(seed, fix=True)
        assert t is not None and t <= bound, f"seed {seed}: no leader within {bound} ticks"


def test_livelock_without_fix_does_not_reliably_elect() -> None:
    failures = sum(_livelock_rounds(seed, fix=False) is None for seed in range(20))
    assert failures >= 15, f"only {failures}/20 runs live-locked without the fix"


def _stale_candidate(fix: bool) -> tuple[Cluster, int]:
    """Leader 1 replicates an entry to 3 but not 2; then 2 (stale log) campaigns."""
    c = Cluster([1, 2, 3], skip_used_terms=fix)
    c.elect(1)
    term = c.raft(1).term
    c.cut |= {(1, 2)}
    c.nodes[1].propose(b"x")
    c.stabilize()
    c.heal()
    c.nodes[2].campaign()
    c.stabilize()
    return c, term


def test_failed_candidate_returns_to_starting_term() -> None:
    c, term = _stale_candidate(fix=True)
    r2 = c.raft(2)
    assert r2.role == Role.FOLLOWER
    assert (r2.term, r2.vote) == (term, 1)  # back to where the election started
    assert term + 1 in r2.used_terms  # and that term is never reused
    # the refusing voters did not adopt the stale candidate's term: no disruption
    assert c.raft(1).role == Role.LEADER and c.raft(1).term == term
    assert c.raft(3).term == term
    c.nodes[1].propose(b"y")
    c.stabilize()
    assert c.data(2)[-1] == b"y"


def test_failed_candidate_without_fix_disrupts_leader() -> None:
    c, term = _stale_candidate(fix=False)
    assert c.raft(2).term == term + 1
    assert c.raft(1).role == Role.FOLLOWER and c.raft(1).term == term + 1


def test_used_terms_are_skipped() -> None:
    c = Cluster([1, 2, 3], skip_used_terms=True, pre_vote=True)
    c.elect(1)
    term = c.raft(1).term
    c.isolate(1)
    c.cut.discard((2, 3))
    c.cut.discard((3, 2))
    r2, r3 = c.raft(2), c.raft(3)
    r2.become_follower(term, 0)
    r3.become_follower(term, 0)
    # 3 hears 2's pre-vote for term+1, so its own election skips term+1
    c.nodes[2].campaign()
    c.process_ready(2)
    for m in list(c.queue):
        if m.to == 3:
            c.deliver(m)
    c.queue.clear()
    assert term + 1 in r3.used_terms
    c.nodes[3].campaign()
    assert r3.prospective_term == term + 2
