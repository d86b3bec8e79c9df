"""Deliberately broken variants of the Raft core, for mutation testing of the simulator.

Each mutant is a small named function returning a context manager that patches *one* piece of
the core (``unittest.mock.patch.object`` on a method of ``Raft``/``RaftLog``/``RawNode``) for
the duration of a ``with`` block. Production code carries no bug switches: the simulator runs
in-process, so patching the class is enough to run every node of a simulated cluster on the
broken variant. ``MUTANTS`` maps a short name to its factory.

``python -m tests.raft.mutants [--count N] [--nodes K] [--steps M] [--mutant NAME ...]`` runs
every mutant (and the correct core) over seeds 1..N and prints the detection rate of each: the
numbers in docs/raft.md ("Mutation testing") come from this command.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from unittest import mock

from gateway.raft.core import Raft
from gateway.raft.log import RaftLog
from gateway.raft.rawnode import RawNode
from gateway.raft.sim import ALL_FAULTS, SimConfig, SimResult, run_seed
from gateway.raft.types import Message, MessageType, Ready, Role

MT = MessageType


def read_index_without_quorum() -> AbstractContextManager[object]:
    """(a) ReadIndex answered at once with the leader's commit index: no heartbeat round
    confirms that the node is still the leader (a deposed leader serves stale reads)."""

    def send_read_index_response(self: Raft, m: Message) -> None:
        resp = self.response_to_read_index_req(m, self.raft_log.committed)
        if resp is not None:
            self.send(resp)

    return mock.patch.object(Raft, "send_read_index_response", send_read_index_response)


def lease_always_valid() -> AbstractContextManager[object]:
    """(b) Lease reads never expire: the leader trusts its lease without a recent quorum of
    heartbeat acknowledgements (check-quorum and the lease clock are ignored)."""
    return mock.patch.object(Raft, "lease_valid", lambda self: True)


def commit_old_term_by_counting() -> AbstractContextManager[object]:
    """(c) The Figure 8 bug: the leader commits any index replicated on a quorum, including
    entries of earlier terms (instead of only entries of its own term)."""

    def maybe_commit(self: RaftLog, max_index: int, term: int) -> bool:
        if max_index > self.committed:
            self.commit_to(max_index)
            return True
        return False

    return mock.patch.object(RaftLog, "maybe_commit", maybe_commit)


def vote_without_log_check() -> AbstractContextManager[object]:
    """(d) Votes are granted without the log up-to-date check (Raft §5.4.1)."""
    return mock.patch.object(RaftLog, "is_up_to_date", lambda self, lasti, term: True)


def append_without_prev_term_match() -> AbstractContextManager[object]:
    """(e) A follower accepts AppendEntries whenever it holds the previous *index*, without
    comparing the previous entry's term (log matching is no longer enforced)."""
    original = RaftLog.maybe_append

    def maybe_append(
        self: RaftLog, index: int, log_term: int, committed: int, ents: list
    ) -> tuple[int, bool]:
        if self.first_index() - 1 <= index <= self.last_index():
            log_term = self.term(index)  # pretend the terms matched
        return original(self, index, log_term, committed, ents)

    return mock.patch.object(RaftLog, "maybe_append", maybe_append)


_RESPONSES = frozenset(
    {MT.APP_RESP, MT.HEARTBEAT_RESP, MT.SNAP_ACK, MT.READ_INDEX_RESP, MT.VOTE_RESP,
     MT.PRE_VOTE_RESP}
)


def leader_ignores_higher_term_responses() -> AbstractContextManager[object]:
    """(f) A leader that receives a *response* carrying a higher term does not step down: it
    handles the response as if it were of its own term (a stale leader lingers)."""
    original = Raft._step_higher_term

    def step_higher_term(self: Raft, m: Message) -> bool:
        if self.role == Role.LEADER and m.type in _RESPONSES:
            return True  # go on processing in our (stale) term
        return original(self, m)

    return mock.patch.object(Raft, "_step_higher_term", step_higher_term)


def apply_before_commit() -> AbstractContextManager[object]:
    """(g) Entries are handed out for applying as soon as they are in the log (persisted with
    the same Ready), before a quorum holds them."""

    def has_next_committed_ents(self: RaftLog) -> bool:
        if self.has_pending_snapshot():
            return False
        return self.last_index() > max(self.applying, self.first_index() - 1)

    def next_committed_ents(self: RaftLog) -> list:
        if self.has_pending_snapshot():
            return []
        lo = max(self.applying + 1, self.first_index())
        hi = self.last_index() + 1
        return self.slice(lo, hi, self.max_applying_size) if lo < hi else []

    def applied_to(self: RaftLog, i: int) -> None:
        if i > self.applied:
            self.applied = i
            self.applying = max(self.applying, i)

    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(RaftLog, "has_next_committed_ents", has_next_committed_ents)
    )
    stack.enter_context(mock.patch.object(RaftLog, "next_committed_ents", next_committed_ents))
    stack.enter_context(mock.patch.object(RaftLog, "applied_to", applied_to))
    return stack


def send_before_sync() -> AbstractContextManager[object]:
    """(h) The persistence contract is broken: ``Ready.must_sync`` is never set, so the driver
    sends votes and append acknowledgements before the hard state and entries are durable (a
    crash then loses a vote or an acknowledged entry)."""
    original = RawNode.ready

    def ready(self: RawNode) -> Ready:
        rd = original(self)
        rd.must_sync = False
        return rd

    return mock.patch.object(RawNode, "ready", ready)


#: name -> factory of the patch context. Order: the brief's (a)..(h).
MUTANTS: dict[str, Callable[[], AbstractContextManager[object]]] = {
    "read_index_without_quorum": read_index_without_quorum,
    "lease_always_valid": lease_always_valid,
    "commit_old_term_by_counting": commit_old_term_by_counting,
    "vote_without_log_check": vote_without_log_check,
    "append_without_prev_term_match": append_without_prev_term_match,
    "leader_ignores_higher_term_responses": leader_ignores_higher_term_responses,
    "apply_before_commit": apply_before_commit,
    "send_before_sync": send_before_sync,
}

@contextlib.contextmanager
def mutant(name: str | None) -> Iterator[None]:
    """Run the body on mutant ``name`` (None: the correct core)."""
    if name is None:
        yield
        return
    with MUTANTS[name]():
        yield


def run_seeds(
    name: str | None,
    seeds: range,
    nodes: int = 3,
    steps: int = 300,
    stop_at_first: bool = False,
) -> list[SimResult]:
    """Run ``seeds`` with every fault on, on mutant ``name``; with ``stop_at_first`` stop at
    the first failing seed. Returns the results in seed order."""
    out: list[SimResult] = []
    with mutant(name):
        for seed in seeds:
            res = run_seed(SimConfig(seed, nodes, steps, frozenset(ALL_FAULTS)))
            out.append(res)
            if stop_at_first and not res.ok:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.raft.mutants", description=__doc__)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=30)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--mutant", action="append", choices=sorted(MUTANTS))
    p.add_argument("-v", "--verbose", action="store_true", help="print each failure")
    args = p.parse_args(argv)
    seeds = range(args.seed, args.seed + args.count)
    names: list[str | None] = [None, *(args.mutant or MUTANTS)]
    bad_correct = False
    for name in names:
        t0 = time.perf_counter()
        results = run_seeds(name, seeds, args.nodes, args.steps)
        caught = [r for r in results if not r.ok]
        first = caught[0].seed if caught else None
        label = name or "(correct core)"
        print(
            f"{label:40s} caught {len(caught):3d}/{len(results)}  first seed {first}  "
            f"{time.perf_counter() - t0:5.1f}s"
        )
        if args.verbose:
            for r in caught:
                print(f"    seed {r.seed}: {r.error[:160]}")
        if name is None and caught:
            bad_correct = True
    print(f"(seeds {args.seed}..{args.seed + args.count - 1}, {args.nodes} nodes, "
          f"{args.steps} steps, all faults)")
    return 1 if bad_correct else 0


if __name__ == "__main__":
    sys.exit(main())
