"""A leadership transfer must campaign in a term above the transferee's current term, even
when an earlier pre-vote campaign of the transferee left a stale prospective term behind."""

from __future__ import annotations

from gateway.raft.types import Role

from .harness import Cluster


def test_transfer_after_an_abandoned_pre_vote_uses_a_fresh_term():
    c = Cluster([1, 2, 3], pre_vote=True, check_quorum=True)
    c.nodes[2].campaign()  # pre-candidate, prospective term 2; its pre-votes are lost
    c.process_ready(2)
    c.queue.clear()
    c.elect(1)  # node 2 follows leader 1 at term 2 without ever campaigning
    assert c.raft(2).role == Role.FOLLOWER and c.raft(2).term == 2
    c.nodes[1].transfer_leader(3)
    c.stabilize()
    assert c.leader() == 3 and c.raft(3).term == 3
    c.nodes[3].transfer_leader(2)
    c.stabilize()
    assert c.leader() == 2, [(i, c.raft(i).role.name, c.raft(i).term) for i in (1, 2, 3)]
    assert c.raft(2).term == 4
