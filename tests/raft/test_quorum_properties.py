"""Property tests: quorum math against brute force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.raft.quorum import (
    INFINITE_INDEX,
    VoteResult,
    joint_committed_index,
    joint_vote_result,
    majority_committed_index,
    majority_vote_result,
)

ids = st.frozensets(st.integers(1, 9), max_size=7)
acks = st.dictionaries(st.integers(1, 9), st.integers(0, 20), max_size=9)
votes = st.dictionaries(st.integers(1, 9), st.booleans(), max_size=9)


def _brute_committed(voters: frozenset[int], acked: dict[int, int]) -> int:
    if not voters:
        return INFINITE_INDEX
    q = len(voters) // 2 + 1
    best = 0
    for i in range(0, 21):
        if sum(1 for v in voters if acked.get(v, 0) >= i) >= q:
            best = i
    return best


def _brute_vote(voters: frozenset[int], vs: dict[int, bool]) -> VoteResult:
    if not voters:
        return VoteResult.WON
    q = len(voters) // 2 + 1
    yes = sum(1 for v in voters if vs.get(v) is True)
    missing = sum(1 for v in voters if v not in vs)
    if yes >= q:
        return VoteResult.WON
    if yes + missing >= q:
        return VoteResult.PENDING
    return VoteResult.LOST


@given(ids, acks)
def test_majority_committed_index_is_largest_index_a_majority_has(voters, acked) -> None:
    assert majority_committed_index(voters, acked) == _brute_committed(voters, acked)


@given(ids, ids, acks)
def test_joint_committed_index_needs_both_majorities(a, b, acked) -> None:
    got = joint_committed_index(a, b, acked)
    assert got == min(_brute_committed(a, acked), _brute_committed(b, acked))
    # an empty outgoing half never constrains the incoming one
    assert joint_committed_index(a, frozenset(), acked) == majority_committed_index(a, acked)


@given(ids, acks, st.integers(1, 9), st.integers(0, 20))
def test_committed_index_is_monotonic_in_acks(voters, acked, node, extra) -> None:
    before = majority_committed_index(voters, acked)
    bumped = dict(acked)
    bumped[node] = max(acked.get(node, 0), extra)
    assert majority_committed_index(voters, bumped) >= before


@given(ids, votes)
def test_majority_vote_result_matches_brute_force(voters, vs) -> None:
    assert majority_vote_result(voters, vs) == _brute_vote(voters, vs)


@given(ids, ids, votes)
def test_joint_vote_result(a, b, vs) -> None:
    r1, r2 = _brute_vote(a, vs), _brute_vote(b, vs)
    if VoteResult.LOST in (r1, r2):
        want = VoteResult.LOST
    elif r1 == r2 == VoteResult.WON:
        want = VoteResult.WON
    else:
        want = VoteResult.PENDING
    assert joint_vote_result(a, b, vs) == want


@given(ids, votes)
def test_two_disjoint_vote_sets_cannot_both_win(voters, vs) -> None:
    # election safety at the quorum level: complementary grants cannot both form a majority
    flipped = {k: not v for k, v in vs.items()}
    if not voters:
        return  # an empty configuration wins everything by definition
    assert not (
        majority_vote_result(voters, vs) == VoteResult.WON
        and majority_vote_result(voters, flipped) == VoteResult.WON
    )
