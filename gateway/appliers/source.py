"""Where the dispatcher reads committed log entries from.

``EntrySource`` is the small interface the dispatcher needs; the cluster node will provide one
over its Raft WAL (committed entries only). Two implementations live here:

- ``LogFileSource``: a standalone log file (``gateway log write``), a record stream of tagged
  messages. An entry's index is the record's ordinal, from 1; records that are not
  transactions (epoch markers, ...) are entries too, with ``transaction=None``; a schema
  event (``SCHEMA_EVENT``) is a ``SchemaEntry``. The file may
  grow while it is read (only whole records followed by their separator are read). A damaged
  range or an undecodable record stops reading with ``EntrySourceError``: skipping it would
  shift every later index and corrupt positions.
- ``MemorySource``: a list of transactions, for tests and benchmarks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, overload

from gateway.core import messages, records
from gateway.core.messages import MessageDecodeError
from gateway.core.stuffing import SEPARATOR
from gateway.schema.codec import event_from_proto
from gateway.schema.model import SchemaError, SchemaEvent
from gateway.v1 import schema_pb2, transaction_pb2

__all__ = [
    "CommittedEntry",
    "EntriesCompactedError",
    "EntrySource",
    "EntrySourceError",
    "LogFileSource",
    "MemorySource",
    "SchemaEntry",
    "StoreInstalledError",
    "WireTransactions",
]


class EntrySourceError(Exception):
    """The source cannot deliver entries (missing file, damage); ``str()`` is one line."""


class EntriesCompactedError(EntrySourceError):
    """Entries ``from_index .. first_index - 1`` are no longer in the source's log (it starts
    at ``first_index``: the node installed a snapshot or compacted past them). Their effect
    exists only as the state the snapshot holds, so an applier that still needs them must be
    rebuilt from that state (``gateway.node.appliers.applier_rebuild``), never fed placeholders."""

    def __init__(self, from_index: int, first_index: int) -> None:
        self.from_index = from_index
        self.first_index = first_index
        super().__init__(f"log entries {from_index}..{first_index - 1} were compacted (the "
                         f"log starts at index {first_index})")


class StoreInstalledError(EntriesCompactedError):
    """Entry ``index`` ended a seed or a resync of this cluster (``SEED_INSTALL`` with its
    ``end``): the rows that seed installed came through entries that are not transactions,
    so an applier that followed the log up to here lacks them and must be brought to the
    store's state at or after ``index`` -- rebuilt, or backfilled -- before it follows the log
    after that (docs/replication.md, "Appliers on the seeded cluster")."""

    def __init__(self, index: int) -> None:
        EntrySourceError.__init__(
            self, f"log entry {index} ended a seed: the rows it installed are in the store, "
                  f"not in the log")
        self.from_index = index
        self.first_index = index + 1


class CommittedEntry:
    """A committed log entry: its index and the transaction segment it holds, if any.

    An entry that applied a replicated epoch of another cluster holds several whole
    transactions, each with its origin GTID, epoch and author: ``replicated`` lists them (in
    the order they were applied) and ``transaction`` is ``None``. An applier treats them as
    one unit: all of them are applied before the entry counts as done.

    ``wire``, when the source has it, is ``transaction`` serialized -- the bytes the log holds,
    from which it was parsed; fast paths read those instead of the message (None: they
    serialize the message themselves).

    ``head``: ``(server id, trans id, commit timestamp ns)`` of the transaction, given by a
    source that read them from ``wire`` (which it must then give) and found the transaction
    whole in one segment -- ``segment_id`` 1, ``end_segment`` set, no rollback. Such an entry
    may be built with ``transaction=None``: the message is parsed from ``wire`` on first use,
    and an applier admits the entry, and its columns path applies it, from ``head`` and
    ``wire`` alone (parsing each entry is CPU on the path every committed transaction takes
    through every applier).

    Read-only by contract (a plain slotted class: a frozen dataclass's ``__init__`` costs more
    per entry). ``gateway.node._feed.feed_entries`` fills new instances' five slots as
    ``__init__`` would, without calling it: a slot added here must be added there too (its
    test compares both)."""

    __slots__ = ("_transaction", "head", "index", "replicated", "wire")

    def __init__(self, index: int, transaction: transaction_pb2.Transaction | None,
                 replicated: Sequence[transaction_pb2.Transaction] = (),
                 wire: bytes | None = None, head: tuple[int, int, int] | None = None) -> None:
        if head is not None and wire is None:
            raise ValueError("an entry with a head needs its wire bytes")
        self.index = index
        self._transaction = transaction
        self.replicated = replicated
        self.wire = wire
        self.head = head

    @property
    def transaction(self) -> transaction_pb2.Transaction | None:
        """The transaction segment the entry holds (parsed from ``wire`` on first use when
        the source gave only ``head``), or None."""
        txn = self._transaction
        if txn is None and self.head is not None:
            txn = self._transaction = transaction_pb2.Transaction.FromString(
                self.wire)  # type: ignore[arg-type]
        return txn

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CommittedEntry):
            return NotImplemented
        return (self.index, self.transaction, self.replicated, self.wire) == \
            (other.index, other.transaction, other.replicated, other.wire)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, compared by value

    def __repr__(self) -> str:
        return (f"CommittedEntry(index={self.index!r}, transaction={self.transaction!r}, "
                f"replicated={self.replicated!r}, wire={self.wire!r}, head={self.head!r})")


class WireTransactions(Sequence[transaction_pb2.Transaction]):
    """A replicated epoch's transactions (``CommittedEntry.replicated``) kept as the bytes the
    log holds them in: ``entries`` has one ``CommittedEntry`` per transaction, each with the
    epoch's log index, its ``wire`` and its ``head`` (every transaction whole in one segment,
    not rolled back). As a sequence it holds the messages, each parsed from its bytes on first
    use; the dispatcher admits the epoch from ``entries``' heads and its columns path applies
    it from their bytes, so the messages are usually never built (a replica's applier parsed
    each epoch and serialized every transaction again: a sixth of its CPU, measured)."""

    __slots__ = ("entries",)

    def __init__(self, entries: tuple[CommittedEntry, ...]) -> None:
        if any(e.head is None for e in entries):
            raise ValueError("every transaction needs its head and wire bytes")
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    @overload
    def __getitem__(self, i: int) -> transaction_pb2.Transaction: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[transaction_pb2.Transaction, ...]: ...

    def __getitem__(self, i: int | slice
                    ) -> transaction_pb2.Transaction | tuple[transaction_pb2.Transaction, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        txn = self.entries[i].transaction
        assert txn is not None  # an entry with a head parses its wire
        return txn

    def __iter__(self) -> Iterator[transaction_pb2.Transaction]:
        for e in self.entries:
            txn = e.transaction
            assert txn is not None
            yield txn

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"WireTransactions({tuple(self)!r})"


class SchemaEntry(CommittedEntry):
    """A committed log entry that applied schema events (``events``, in order; ``schema`` is
    the first): a ``SCHEMA_EVENT`` entry, or a replicated epoch whose schema events came on a
    channel before its transactions (``replicated``). The dispatcher hands the events to the
    applier after every earlier entry, then the entry's transactions, before any later entry
    (``gateway.appliers.contract``, "Schema changes")."""

    __slots__ = ("events", "schema")

    def __init__(self, index: int, schema: SchemaEvent | tuple[SchemaEvent, ...],
                 replicated: tuple[transaction_pb2.Transaction, ...] = ()) -> None:
        super().__init__(index, None, replicated)
        self.events = schema if isinstance(schema, tuple) else (schema,)
        self.schema = self.events[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SchemaEntry):
            return NotImplemented if not isinstance(other, CommittedEntry) else False
        return (self.index, self.events, self.replicated) == \
            (other.index, other.events, other.replicated)

    def __repr__(self) -> str:
        return (f"SchemaEntry(index={self.index!r}, events={self.events!r}, "
                f"replicated={self.replicated!r})")


def versions_upto(items: Sequence[object], upto: int) -> dict[str, int]:
    """Each table's schema version after the first ``upto`` items (schema events among
    them), for ``schema_versions``."""
    out: dict[str, int] = {}
    for item in items[:max(upto, 0)]:
        if isinstance(item, SchemaEvent):
            out[item.table] = item.version
    return out


class EntrySource(Protocol):
    """Committed log entries, indexed from 1 without gaps.

    A source may also offer ``schema_versions(index) -> dict[str, int]``: each table's schema
    version as of entry ``index`` (its last schema event at or before it), which the
    dispatcher hands to an applier with ``start_schema`` when a run begins -- the events
    before its position are not read again."""

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        """Entries ``from_index, from_index + 1, ...``: at most ``max_entries``, fewer (maybe
        none) at the end of the committed log. Raises ``EntrySourceError``."""
        ...

    def last_index(self) -> int:
        """Index of the last committed entry (0 when the log is empty)."""
        ...


class MemorySource:
    """Transactions in a list; entry ``i`` is ``items[i - 1]``; an item that is a schema event
    is a ``SchemaEntry``. ``append`` is thread-safe."""

    def __init__(self, items: Sequence[transaction_pb2.Transaction | SchemaEvent | None] = ()
                 ) -> None:
        self._items = list(items)
        self._lock = threading.Lock()

    def append(self, item: transaction_pb2.Transaction | SchemaEvent | None) -> int:
        """Add one entry; return its index."""
        with self._lock:
            self._items.append(item)
            return len(self._items)

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        with self._lock:
            start = max(from_index, 1) - 1
            chunk = self._items[start : start + max_entries]
        return [_entry(start + 1 + i, t) for i, t in enumerate(chunk)]

    def last_index(self) -> int:
        with self._lock:
            return len(self._items)

    def schema_versions(self, index: int) -> dict[str, int]:
        """Each table's schema version as of entry ``index``."""
        with self._lock:
            return versions_upto(self._items, index)


def _entry(index: int, item: transaction_pb2.Transaction | SchemaEvent | None
           ) -> CommittedEntry:
    if item is None or isinstance(item, transaction_pb2.Transaction):
        return CommittedEntry(index, item)
    return SchemaEntry(index, item)


class LogFileSource:
    """Entries of a standalone log file; see the module docstring. Not thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._entries: list[transaction_pb2.Transaction | SchemaEvent | None] = []
        self._consumed = 0  # file offset up to which records were parsed (a separator)
        if not self.path.is_file():
            raise EntrySourceError(f"{self.path}: no such log file")
        self._refresh()

    def _refresh(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self._consumed)
                chunk = f.read()
        except OSError as exc:
            raise EntrySourceError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if self._consumed == 0 and chunk and not chunk.startswith(SEPARATOR):
            raise EntrySourceError(f"{self.path}: not a log (no FE FD separator at the start)")
        last = chunk.rfind(SEPARATOR)
        if last <= 0:
            return
        chunk = chunk[: last + len(SEPARATOR)]
        expected = len(SEPARATOR)
        for rec in records.scan(chunk):
            if rec.offset != expected:
                raise EntrySourceError(
                    f"{self.path}: damaged bytes at offsets {self._consumed + expected}-"
                    f"{self._consumed + rec.offset} (run `gateway log verify`)")
            try:
                msg = messages.unpack(rec.payload, base_offset=self._consumed + rec.offset)
                item = (msg if isinstance(msg, transaction_pb2.Transaction)
                        else event_from_proto(msg) if isinstance(msg, schema_pb2.SchemaEvent)
                        else None)
            except (MessageDecodeError, SchemaError) as exc:
                raise EntrySourceError(f"{self.path}: record {len(self._entries) + 1} at "
                                       f"offset {self._consumed + rec.offset}: {exc}") from None
            self._entries.append(item)
            expected = rec.end + len(SEPARATOR)
        if expected < len(chunk):
            raise EntrySourceError(
                f"{self.path}: damaged bytes at offsets {self._consumed + expected}-"
                f"{self._consumed + len(chunk) - len(SEPARATOR)} (run `gateway log verify`)")
        self._consumed += len(chunk) - len(SEPARATOR)

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        if from_index + max_entries - 1 > len(self._entries):
            self._refresh()
        start = max(from_index, 1) - 1
        chunk = self._entries[start : start + max_entries]
        return [_entry(start + 1 + i, t) for i, t in enumerate(chunk)]

    def last_index(self) -> int:
        self._refresh()
        return len(self._entries)

    def schema_versions(self, index: int) -> dict[str, int]:
        """Each table's schema version as of entry ``index``."""
        return versions_upto(self._entries, index)
