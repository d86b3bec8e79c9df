"""Every event a cluster has seen of one table, and the definition they converge to. Pure.

Events form a tree by ``parent`` (the id of the event each was made on). Two events with the
same parent are concurrent changes made on the same version on two clusters; ``winner``
picks one by a total order every cluster computes alike:

1. the PRIMARY cluster's event (when the clusters are PRIMARY/SECONDARY, see
   docs/conflicts.md), then
2. an explicit change before an implicit one (a declared table before a first write's shape),
3. the smaller origin name, then the smaller event id.

The table's history is the chain from the root taking the winner at each fork (among the
children that apply to their parent's definition); every event off the chain lost, with its
cause. The chain depends only on the set of events seen, not on their order of arrival, so
every cluster that has seen the same events holds the same definition: no cluster diverges
whatever the interleaving (tests/schema/test_schema_properties.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.schema.apply import apply_event
from gateway.schema.codec import event_id
from gateway.schema.model import SchemaError, SchemaEvent, TableDef
from gateway.schema.upcast import project, revert, upcast

__all__ = ["Lost", "TableHistory", "rank", "winner"]


def rank(e: SchemaEvent, primary: str = "") -> tuple[bool, bool, str, bytes]:
    """The sort key of the winner rule: the smallest wins."""
    return (bool(primary) and e.origin != primary, e.implicit, e.origin, event_id(e))


def winner(a: SchemaEvent, b: SchemaEvent, primary: str = "") -> SchemaEvent:
    """The one of two concurrent events (same table, same parent) that every cluster keeps."""
    return a if rank(a, primary) <= rank(b, primary) else b


@dataclass(frozen=True)
class Lost:
    """An event off the winning chain and why: ``cause`` names the winner or the problem."""

    event: SchemaEvent
    cause: str


class TableHistory:
    """The events of one table seen by one cluster (see the module docstring)."""

    def __init__(self, table: str, primary: str = "") -> None:
        self.table = table
        self.primary = primary
        self._events: dict[bytes, SchemaEvent] = {}
        self._children: dict[bytes, list[bytes]] = {}
        self._chain: list[bytes] | None = None
        self._defs: dict[bytes, TableDef | None] = {}
        self._lost: dict[bytes, str] = {}

    def add(self, event: SchemaEvent) -> bytes:
        """Record ``event`` (again is harmless); returns its id."""
        if event.table != self.table:
            raise SchemaError(f"event of {event.table} added to the history of {self.table}")
        eid = event_id(event)
        if eid not in self._events:
            self._events[eid] = event
            self._children.setdefault(event.parent, []).append(eid)
            self._chain = None
        return eid

    def __contains__(self, eid: bytes) -> bool:
        return eid in self._events

    def event(self, eid: bytes) -> SchemaEvent:
        return self._events[eid]

    def _resolve(self) -> list[bytes]:
        if self._chain is not None:
            return self._chain
        chain: list[bytes] = []
        defs: dict[bytes, TableDef | None] = {b"": None}
        lost: dict[bytes, str] = {}
        at, current, last = b"", None, 0
        while True:
            valid: list[tuple[bytes, TableDef | None]] = []
            for cid in self._children.get(at, ()):
                try:
                    valid.append((cid, apply_event(current, self._events[cid], last)))
                except SchemaError as exc:
                    base = last if current is None else current.version
                    lost[cid] = f"invalid on version {base}: {exc}"
            if not valid:
                break
            best = min(valid, key=lambda v: rank(self._events[v[0]], self.primary))
            for cid, _ in valid:
                if cid != best[0]:
                    w = self._events[best[0]]
                    lost[cid] = (f"concurrent change of {self.table} version "
                                 f"{w.version}: lost to {w.kind} from {w.origin or '?'}")
            at, current = best
            last = self._events[at].version
            defs[at] = current
            chain.append(at)
        # Every descendant of a lost event lost with it.
        stack = list(lost)
        while stack:
            for cid in self._children.get(stack.pop(), ()):
                if cid not in lost:
                    lost[cid] = "made on a change that lost"
                    stack.append(cid)
        self._chain, self._defs, self._lost = chain, defs, lost
        return chain

    def chain(self) -> list[SchemaEvent]:
        """The winning events, oldest first."""
        return [self._events[i] for i in self._resolve()]

    def head(self) -> bytes:
        """The id of the newest winning event (empty when none): a new change's parent."""
        chain = self._resolve()
        return chain[-1] if chain else b""

    def definition(self) -> TableDef | None:
        """The current definition (None when undefined or dropped)."""
        head = self.head()  # resolves first: _defs is replaced by _resolve
        return self._defs.get(head)

    def version(self) -> int:
        """The current version (0 when never defined; kept after a drop)."""
        chain = self._resolve()
        return self._events[chain[-1]].version if chain else 0

    def lost(self) -> list[Lost]:
        """The events off the chain, by version then id."""
        self._resolve()
        return [Lost(self._events[i], c) for i, c in
                sorted(self._lost.items(), key=lambda kv: (self._events[kv[0]].version, kv[0]))]

    def pending(self) -> list[SchemaEvent]:
        """Events whose parent has not been seen (they wait; they are neither won nor lost)."""
        self._resolve()
        on = set(self._chain or ()) | set(self._lost)
        return [e for i, e in self._events.items() if i not in on]

    def read(self, row: Mapping[str, object], written_under: bytes) -> dict[str, object] | None:
        """``row``, written under the event ``written_under``, as the current definition reads
        it (None when the table is dropped, or was dropped since the row was written). A row
        of a losing branch is reverted to where it forked from the chain, then upcast along
        it."""
        chain = self._resolve()
        target = self.definition()
        if target is None:
            return None
        back: list[SchemaEvent] = []
        at = written_under
        on = set(chain)
        while at and at not in on:
            e = self._events.get(at)
            if e is None:
                raise SchemaError(f"{self.table}: row written under an unknown version")
            back.append(e)
            at = e.parent
        start = chain.index(at) + 1 if at else 0
        forward = [self._events[i] for i in chain[start:]]
        if any(e.kind == "drop_table" for e in forward):
            return None  # the row went with the table; a re-created table starts empty
        return project(upcast(revert(row, reversed(back)), forward), target)
