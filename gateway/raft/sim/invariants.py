"""Safety invariants checked while the simulation runs (Raft paper, Figure 3).

* Election safety: at most one leader per term.
* Log matching: two logs holding an entry with the same index and term hold the same entry and
  agree on the term of the previous entry (by induction: identical prefixes).
* Leader completeness: a new leader's log holds every entry known to be committed.
* State machine safety: no two nodes apply different entries at the same index.
* Monotonic commit: within one incarnation of a node, the commit index never decreases.
* No acknowledged write lost: the entry acknowledged to a client stays the committed entry at
  its index (checked against every later application and at the end against every node).
"""

from __future__ import annotations

from ..errors import CompactedError
from ..log import RaftLog
from ..types import Entry


class InvariantViolation(AssertionError):
    """A safety property was broken; the message names it and the evidence."""


class InvariantChecker:
    __slots__ = ("acked", "committed", "entry_meta", "leaders", "max_commit")

    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}
        self.entry_meta: dict[tuple[int, int], tuple[bytes, int, int]] = {}
        self.max_commit: dict[tuple[int, int], int] = {}
        self.acked: dict[tuple[int, int], int] = {}

    def on_leader(self, node: int, term: int, log: RaftLog) -> None:
        other = self.leaders.setdefault(term, node)
        if other != node:
            raise InvariantViolation(f"election safety: {other} and {node} both lead term {term}")
        first = log.first_index()
        last = log.last_index()
        for index, (t, _data) in self.committed.items():
            if index < first:
                continue  # covered by the leader's snapshot
            if index > last:
                raise InvariantViolation(
                    f"leader completeness: leader {node} (term {term}) lacks committed "
                    f"entry {index} (last index {last})"
                )
            ours = log.term(index)
            if ours != t:
                raise InvariantViolation(
                    f"leader completeness: leader {node} (term {term}) has term {ours} at "
                    f"{index}, committed entry has term {t}"
                )

    def on_append(self, node: int, entries: list[Entry], log: RaftLog) -> None:
        """``entries`` were just handed out for persisting by ``node``."""
        meta = self.entry_meta
        try:
            prev_term = log.term(entries[0].index - 1)
        except CompactedError:
            prev_term = -1
        for e in entries:
            key = (e.index, e.term)
            seen = meta.get(key)
            if seen is None:
                meta[key] = (e.data, prev_term, node)
            else:
                data, pt, who = seen
                if data != e.data or (pt != prev_term and -1 not in (pt, prev_term)):
                    raise InvariantViolation(
                        f"log matching: entry {e.index}/{e.term} differs between node {who} "
                        f"and node {node}"
                    )
            prev_term = e.term

    def on_commit(self, node: int, incarnation: int, commit: int) -> None:
        key = (node, incarnation)
        if commit < self.max_commit.get(key, 0):
            raise InvariantViolation(
                f"monotonic commit: node {node} commit went from {self.max_commit[key]} "
                f"to {commit}"
            )
        self.max_commit[key] = commit

    def on_apply(self, node: int, e: Entry) -> None:
        known = self.committed.get(e.index)
        if known is None:
            self.committed[e.index] = (e.term, e.data)
        elif known != (e.term, e.data):
            what = "acknowledged write lost" if e.index in self.acked.values() else (
                "state machine safety"
            )
            raise InvariantViolation(
                f"{what}: node {node} applied {e.index}/{e.term} but {e.index}/{known[0]} was "
                "committed before"
            )

    def on_ack(self, client: int, seq: int, index: int) -> None:
        self.acked[(client, seq)] = index
