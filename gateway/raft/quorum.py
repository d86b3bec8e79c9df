"""Quorum arithmetic for majority and joint configurations.

A majority configuration is a set of voter ids; a joint configuration is a pair
``(incoming, outgoing)`` whose decisions need a majority of *both* halves (an empty outgoing
half agrees with everything). These functions are pure and are property-tested against brute
force in ``tests/raft/test_quorum_properties.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import IntEnum

#: Committed index of an empty configuration: it never constrains a joint configuration.
INFINITE_INDEX = (1 << 63) - 1


class VoteResult(IntEnum):
    PENDING = 0
    LOST = 1
    WON = 2


def majority_committed_index(voters: Collection[int], acked: Mapping[int, int]) -> int:
    """The largest index acknowledged by a majority of ``voters``; ids missing from ``acked``
    count as 0. An empty configuration returns :data:`INFINITE_INDEX`."""
    n = len(voters)
    if n == 0:
        return INFINITE_INDEX
    if n == 1:
        (v,) = voters
        return acked.get(v, 0)
    idx = sorted((acked.get(v, 0) for v in voters), reverse=True)
    return idx[n // 2]


def joint_committed_index(
    incoming: Collection[int], outgoing: Collection[int], acked: Mapping[int, int]
) -> int:
    """The largest index acknowledged by a majority of both halves."""
    return min(majority_committed_index(incoming, acked), majority_committed_index(outgoing, acked))


def majority_vote_result(voters: Collection[int], votes: Mapping[int, bool]) -> VoteResult:
    """``WON`` once a majority granted, ``LOST`` once a majority can no longer be reached,
    else ``PENDING``. An empty configuration wins (it must not constrain a joint vote)."""
    n = len(voters)
    if n == 0:
        return VoteResult.WON
    granted = rejected = 0
    for v in voters:
        r = votes.get(v)
        if r is None:
            continue
        if r:
            granted += 1
        else:
            rejected += 1
    q = n // 2 + 1
    if granted >= q:
        return VoteResult.WON
    if n - rejected < q:
        return VoteResult.LOST
    return VoteResult.PENDING


def joint_vote_result(
    incoming: Collection[int], outgoing: Collection[int], votes: Mapping[int, bool]
) -> VoteResult:
    """``WON`` if both halves won, ``LOST`` if either lost, else ``PENDING``."""
    r1 = majority_vote_result(incoming, votes)
    r2 = majority_vote_result(outgoing, votes)
    if r1 == r2:
        return r1
    if VoteResult.LOST in (r1, r2):
        return VoteResult.LOST
    return VoteResult.PENDING
