"""Committed transactions out of a node: the appliers' ``EntrySource`` and the Subscribe feed.

Both read the Raft log (tail cache or WAL) up to the store's applied index, so an applier or
a subscriber never sees an entry the store does not reflect yet. Entries the state machine
did not apply (idempotent duplicates, rejected writes: the ``x`` keys) and entries without a
transaction (no-ops, epoch markers, membership changes) are ``Entry(index, None)`` for the
appliers and are not sent to subscribers. A schema event the state machine applied (type tag
``SCHEMA_EVENT``) is a ``SchemaEntry`` for the appliers (a refused one is skipped like a
refused write).

A node that installed a snapshot (or compacted its log) has no log before it: reading entries
behind the log's start raises ``EntriesCompactedError``, and the applier is rebuilt from the
store's state (``applier_rebuild``) -- it never skips entries it did not apply. The end of a
seed or a resync (a ``SEED_INSTALL`` entry with ``end``) is read the same way: the rows the
seed installed are in the store only, so a read stops before that entry, and a read from it
raises ``StoreInstalledError`` (the applier is rebuilt or backfilled from the store at or
after it).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from google.protobuf.message import DecodeError

from gateway.appliers.source import (
    CommittedEntry,
    EntriesCompactedError,
    EntrySourceError,
    SchemaEntry,
    StoreInstalledError,
)
from gateway.core import accel
from gateway.core.messages import TypeTag
from gateway.node.appliers.feed_wire import WireEvent, txn_event, unit_events, unit_wires
from gateway.node.base.errors import NodeStoppedError
from gateway.node.base.validation import InvalidRequest
from gateway.node.loop.epoch_seal import entry_epoch
from gateway.node.state import keys
from gateway.node.state.wire import _HEAD_KEYS, decode_entry, txn_head
from gateway.node.storage.storage import LogDamagedError, compacted_log
from gateway.raft import NO_LIMIT, CompactedError, Entry, EntryType
from gateway.replication import join_segments, transactions
from gateway.schema.codec import decode_event, event_to_proto
from gateway.v1 import channel_pb2, epoch_pb2, gateway_pb2, replication_pb2
from gateway.v1.transaction_pb2 import Transaction

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver
    from gateway.node.storage.storage import RaftLogStorage

__all__ = ["ChangeFeed", "CommittedLogSource", "Event"]

#: What the feed yields: a message, or a record framed from its bytes (``feed_wire``).
Event = gateway_pb2.ChangeEvent | WireEvent

_READ_BYTES = 4 << 20
_TXN, _MARKER, _UNIT = TypeTag.TRANSACTION, TypeTag.EPOCH_MARKER, TypeTag.REPLICATED_EPOCH
_SCHEMA = TypeTag.SCHEMA_EVENT
_SCHEMA_BYTE = bytes([_SCHEMA])
#: How far back a resumed reader looks for schema events of the epoch it resumes in.
_SCHEMA_BACK = 256
_SEED = TypeTag.SEED_INSTALL
_SCHEMA = TypeTag.SCHEMA_EVENT
#: Type tags ``read`` looks at after the C loop: a seed's end, a schema event.
_SPECIAL = frozenset({int(_SEED), int(_SCHEMA)})
#: Where the state machine keeps each table's schema history (``schema_apply``, "sh:").
_HISTORY = keys.meta_key("sh:")


def _seed_end(e: Entry) -> bool:
    """True if ``e`` is a ``SEED_INSTALL`` entry with ``end`` (a seed's or resync's last step;
    one that changed nothing -- a stale replay -- too: a rebuild it causes is redundant, never
    wrong)."""
    if e.type != EntryType.NORMAL or not e.data or e.data[0] != _SEED:
        return False
    try:
        return channel_pb2.SeedInstall.FromString(e.data[1:]).HasField("end")
    except DecodeError:
        return False  # the state machine refused it too: nothing was installed


class _FeedC(Protocol):
    """The C accelerator ``_feed.c``: ``feed_entries(keys, unit_tag, ents, skipped,
    entry_cls) -> (out, todo)``, ``out`` holding None at the positions ``todo`` lists (for the
    caller to build)."""

    def feed_entries(self, keys: bytes, unit_tag: int, ents: list[Entry], skipped: set[int],
                     entry_cls: type[CommittedEntry], /
                     ) -> tuple[list[CommittedEntry | None], list[int]]: ...


# None: CommittedLogSource._entry serves
_accel = cast("_FeedC | None", accel.load("gateway.node._feed"))
#: ``_feed.feed_entries`` with the transaction's keys bound (``wire.txn_head``'s): ``(unit_tag,
#: ents, skipped, entry_cls) -> (out, todo)``, the C loop of ``CommittedLogSource.read`` (its
#: ``_entry`` is the specification); None without the C accelerator.
feed_entries = functools.partial(_accel.feed_entries, _HEAD_KEYS) if _accel else None


def transaction_entry(index: int, data: bytes) -> CommittedEntry:
    """The ``CommittedEntry`` of the transaction entry payload ``data`` (type tag first) at
    ``index``: with its head and bytes and the message left unparsed when it holds a whole
    transaction in one segment (``wire.txn_head``), else parsed now."""
    wire = data[1:]
    head = txn_head(data)
    # (positional arguments: keywords cost more per entry, on every applier's path)
    if head is not None:
        return CommittedEntry(index, None, (), wire, head)
    return CommittedEntry(index, Transaction.FromString(wire), (), wire)


def read_unit(storage: RaftLogStorage, e: Entry) -> replication_pb2.ReplicatedEpoch | None:
    """The whole replicated epoch completed by entry ``e`` (its segments are the entries
    right before it: one leader proposed them together), or None when ``e`` is a staged
    segment. Raises ``CompactedError`` when earlier segments are gone."""
    seg = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
    if not seg.end_segment:
        return None
    if seg.segment_id <= 1:
        return seg
    prev = storage.entries(e.index - seg.segment_id + 1, e.index, NO_LIMIT)
    return join_segments([*(replication_pb2.ReplicatedEpoch.FromString(p.data[1:])
                            for p in prev), seg])


class CommittedLogSource:
    """``gateway.appliers.EntrySource`` over a node's committed and applied log (thread-safe)."""

    def __init__(self, driver: RaftDriver) -> None:
        self._driver = driver

    def last_index(self) -> int:
        return self._driver.sm.applied_index

    def schema_versions(self, index: int) -> dict[str, int]:
        """Each table's schema version as of log entry ``index``: the newest event of its
        history in the store (``gateway.node.state.schema_apply``: each stored with the log
        index that applied it) at or before ``index`` -- implicit ones included, so a table
        first written without ``CREATE TABLE`` is at version 1 once written. Read at the
        start of an applier's run (``Dispatcher``, ``start_schema``)."""
        out: dict[str, int] = {}
        for _k, v in self._driver.sm.store.scan_prefix(_HISTORY):
            if int.from_bytes(v[:8], "big") <= index:
                event = decode_event(v[8:])
                out[event.table] = max(out.get(event.table, 0), event.version)
        return out

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        storage, sm = self._driver.storage, self._driver.sm
        from_index = max(from_index, 1)
        hi = min(sm.applied_index + 1, from_index + max_entries)
        if from_index >= hi:
            return []
        first = storage.first_index()
        if from_index < first:
            if compacted_log(first):
                raise EntriesCompactedError(from_index, first)
            return [CommittedEntry(i, None) for i in range(from_index, min(hi, first))]
        try:
            ents = storage.entries(from_index, hi, _READ_BYTES)
        except LogDamagedError:
            raise  # does not go away: the applier stops with it
        except CompactedError:
            return []  # compacted meanwhile: the next read sees the new first index
        special = [k for k, e in enumerate(ents) if e.data and e.data[0] in _SPECIAL]
        ends = [k for k in special if ents[k].data[0] == _SEED and _seed_end(ents[k])]
        if ends:  # the entries before a seed's end, then the end alone raises
            if ends[0] == 0:
                raise StoreInstalledError(ents[0].index)
            ents = ents[:ends[0]]
        skipped = sm.skipped_between(ents[0].index, ents[-1].index + 1) if ents else set()
        if feed_entries is not None:  # _entry of each in C, but for replicated epochs
            out, todo = feed_entries(_UNIT, ents, skipped, CommittedEntry)
            for k in todo:
                out[k] = self._entry(storage, ents[k], skipped)
            for k in special:  # the C loop made schema events bare entries
                if k < len(ents) and ents[k].data[0] == _SCHEMA:
                    out[k] = self._entry(storage, ents[k], skipped)
            return cast("list[CommittedEntry]", out)  # every None filled in above
        return [self._entry(storage, e, skipped) for e in ents]

    def _entry(self, storage: RaftLogStorage, e: Entry, skipped: set[int]) -> CommittedEntry:
        """The appliers' entry of the committed log entry ``e`` (``skipped``: indexes the state
        machine did not apply): a transaction (``transaction_entry``), a replicated epoch's
        transactions as the conflict checks left them, or no transaction."""
        if e.type == EntryType.NORMAL and e.data:
            if e.data[0] == _UNIT:
                sm = self._driver.sm
                if e.index not in skipped and e.index not in sm.schema_at:
                    outcome = sm.unit_outcome_bytes(e.index)
                    wires = unit_wires(e.index, e.data, 1) if outcome is None else \
                        unit_wires(e.index, outcome, 0)
                    if wires is not None:
                        return CommittedEntry(e.index, None, wires)
                # as the conflict rules left it (then the entry itself is not read)
                unit = None if e.index in skipped else sm.unit_outcome(e.index)
                try:
                    if unit is None:
                        unit = read_unit(storage, e)
                except LogDamagedError:
                    raise
                except CompactedError:
                    raise EntriesCompactedError(e.index, storage.first_index()) from None
                if unit is not None and e.index not in skipped:
                    txns = tuple(transactions(unit.items))
                    # the schema events the channel brought and this cluster applied, before
                    # the transactions (first writes' implicit ones are not: rows make those)
                    applied = tuple(ev for ev, _ in self._driver.sm.schema_at.get(e.index, ())
                                    if not ev.implicit)
                    if applied:
                        if txns:
                            return SchemaEntry(e.index, applied, txns)
                        return SchemaEntry(e.index, applied)
                    if txns:
                        return CommittedEntry(e.index, None, txns)
            elif e.data[0] == _TXN and e.index not in skipped:
                return transaction_entry(e.index, e.data)
            elif e.data[0] == _SCHEMA and e.index not in skipped:
                try:
                    return SchemaEntry(e.index, decode_event(e.data))
                except ValueError as exc:  # the state machine applied it: the log is damaged
                    raise EntrySourceError(f"log entry {e.index}: schema event: "
                                           f"{exc}") from None
        return CommittedEntry(e.index, None)


def _probe_epoch(e: Entry) -> int | None:
    got = entry_epoch(e)
    return got or None


class ChangeFeed:
    """Async change streams (``Subscribe``) over the committed log."""

    def __init__(self, driver: RaftDriver, wire: bool = True) -> None:
        self._driver = driver
        #: transactions and apply statuses framed from their bytes (``feed_wire``); False:
        #: every event built as a message (the specification)
        self.wire = wire

    async def subscribe(self, req: gateway_pb2.SubscribeRequest, start: int | None = None
                        ) -> AsyncIterator[Event]:
        """The events of ``Subscribe(req)`` (and of a channel stream, which serves the same):
        the request checked (at most one start position), the start index found (or
        ``start``, already found for ``req``), then ``events`` forever. Raises
        ``InvalidRequest`` naming the field."""
        given = [name for name, on in (
            ("from_log_index", bool(req.from_log_index)),
            ("after_gtid", bool(req.after_gtid.trans_id)),
            ("after_epoch", bool(req.after_epoch.server_id))) if on]
        if len(given) > 1:
            raise InvalidRequest(given[1], f"set at most one of from_log_index, "
                                 f"after_gtid and after_epoch (got {', '.join(given)})")
        if start is None:
            start = await self.start_index(req)
        after = (req.after_gtid.server_id, req.after_gtid.trans_id) \
            if req.after_gtid.trans_id else None
        async for event in self.events(start, ignore_origins=frozenset(req.ignore_origins),
                                       log_records=req.log_records, after_gtid=after):
            yield event

    def resume_index(self, epoch: int) -> int:
        """The first index a reader holding this cluster's epochs up to ``epoch`` reads
        (``after_epoch`` of this cluster); raises ``InvalidRequest`` when compacted."""
        return self._after_epoch(self._driver.opts.cluster_id, epoch)

    async def start_index(self, req: gateway_pb2.SubscribeRequest) -> int:
        """The first log index to send for ``req``; raises ``InvalidRequest`` when the
        position is no longer in the log (or not reached yet)."""
        storage = self._driver.storage
        first = storage.first_index()
        if req.HasField("after_epoch") and req.after_epoch.server_id:
            return self._after_epoch(req.after_epoch.server_id, req.after_epoch.epoch)
        if req.HasField("after_gtid") and req.after_gtid.trans_id:
            return self._after_gtid(req.after_gtid.server_id, req.after_gtid.trans_id)
        start = req.from_log_index or first
        if start < first and not compacted_log(first):
            start = first  # only the bootstrap snapshot is before it: no transactions
        if start < first:
            raise InvalidRequest("from_log_index", f"log index {start} was compacted; the "
                                 f"log starts at {first} (resync from a snapshot)")
        return start

    def _probe_at_or_after(self, index: int, limit: int, probe: Callable[[Entry], int | None]
                           ) -> tuple[int, int] | None:
        """(index, value) of the first entry at or after ``index`` for which ``probe`` gives
        a value."""
        storage = self._driver.storage
        while index <= limit:
            for e in storage.entries(index, min(limit + 1, index + 64), NO_LIMIT):
                got = probe(e)
                if got is not None:
                    return e.index, got
            index += 64
        return None

    def _search(self, probe: Callable[[Entry], int | None], target: int
                ) -> tuple[int, tuple[int, int] | None]:
        """Binary search over the applied log for the first entry whose ``probe`` value
        (non-decreasing along the log) is greater than ``target``. Returns (that index, or
        applied + 1 when none; the first probed entry of the log, or None when none)."""
        drv = self._driver
        lo, hi = drv.storage.first_index(), drv.sm.applied_index
        found = self._probe_at_or_after(lo, hi, probe)
        if found is None:
            return hi + 1, None
        answer = hi + 1
        while lo <= hi:
            mid = (lo + hi) // 2
            got = self._probe_at_or_after(mid, hi, probe)
            if got is None or got[1] > target:
                answer = got[0] if got is not None else answer
                hi = mid - 1
            else:
                lo = got[0] + 1
        return answer, found

    def _back_to_schema(self, index: int) -> int:
        """``index``, or the first of the entries without an epoch just before it when one
        of them is a schema event: a SCHEMA_EVENT entry carries no epoch (it belongs to the
        epoch of the next record, see ``events``), so a reader resuming after the epoch
        before it must read it again."""
        storage = self._driver.storage
        lo = max(storage.first_index(), index - _SCHEMA_BACK)
        if lo >= index:
            return index
        try:
            back = storage.entries(lo, index, NO_LIMIT)
        except CompactedError:
            return index
        start = index
        for e in reversed(back):
            if entry_epoch(e):
                break
            if e.type == EntryType.NORMAL and e.data[:1] == _SCHEMA_BYTE:
                start = e.index
        return start

    def _compacted(self) -> bool:
        return self._driver.storage.first_index() > 2

    def _after_gtid(self, server_id: int, trans_id: int) -> int:
        """Binary search: each origin's trans ids increase along the log."""
        me = self._driver.opts.cluster_id

        def probe(e: Entry) -> int | None:
            if e.type != EntryType.NORMAL or not e.data:
                return None
            if e.data[0] == _TXN:
                if server_id != me:
                    return None
                txn, _ = decode_entry(e.data)
                return txn.gtid.trans_id if txn is not None else None
            if e.data[0] == _UNIT and server_id != me:
                unit = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
                got = [t.gtid.trans_id for t in transactions(unit.items)
                       if t.gtid.server_id == server_id]
                return got[-1] if got else None
            return None

        answer, found = self._search(probe, trans_id)
        if found is not None and found[1] > trans_id + 1 and self._compacted():
            raise InvalidRequest("after_gtid", f"transaction {server_id}:{trans_id} is before "
                                 f"the log's start (compacted); resync from a snapshot")
        if found is None and server_id != me and \
                self._driver.sm.replication.watermarks.get(server_id, 0) < trans_id:
            raise InvalidRequest("after_gtid", f"this cluster holds no transaction "
                                 f"{server_id}:{trans_id}")
        return answer

    def _after_epoch(self, server_id: int, epoch: int) -> int:
        drv = self._driver
        me = drv.opts.cluster_id
        if server_id == me:
            answer, found = self._search(_probe_epoch, epoch)
            if self._compacted() and (found is None or found[1] > epoch):
                raise InvalidRequest("after_epoch", f"epoch {epoch} of cluster {me} is before "
                                     f"the log's start (compacted; the log starts at index "
                                     f"{drv.storage.first_index()}); resync from a snapshot")
            return self._back_to_schema(answer)

        def probe(e: Entry) -> int | None:
            if e.type != EntryType.NORMAL or not e.data or e.data[0] != _UNIT:
                return None
            unit = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
            got = [it.apply_status.epoch for it in unit.items
                   if it.WhichOneof("item") == "apply_status"
                   and it.apply_status.server_id == server_id
                   and it.apply_status.applied_by == me]
            return got[-1] if got else None

        held = drv.sm.replication.held(server_id)
        if epoch == 0:
            if self._compacted():
                first = drv.storage.first_index()
                raise InvalidRequest("after_epoch", f"the log starts at index {first} "
                                     f"(compacted): transactions of cluster {server_id} "
                                     f"before it may be missing; resync from a snapshot, or "
                                     f"subscribe from_log_index {first} to start there")
            return drv.storage.first_index()  # from the start, like no position at all
        if held < epoch:
            raise InvalidRequest("after_epoch", f"this cluster holds epochs of cluster "
                                 f"{server_id} up to {held}, not {epoch}")
        answer, found = self._search(probe, epoch - 1)  # the entry completing >= epoch
        if found is None or (found[1] > epoch and self._compacted()):
            raise InvalidRequest("after_epoch", f"the entry completing epoch {epoch} of "
                                 f"cluster {server_id} is before the log's start "
                                 f"(compacted); resync from a snapshot")
        return answer + 1

    def _not_compacted(self, index: int) -> None:
        first = self._driver.storage.first_index()
        if index < first and compacted_log(first):
            raise InvalidRequest("from_log_index", f"log index {index} was compacted while "
                                 f"streaming; the log starts at {first} (resync from a "
                                 f"snapshot)")

    def _entry_events(self, e: Entry, ignore: frozenset[int], records: bool,
                      after: tuple[int, int] | None = None) -> list[Event]:
        """The events of one applied entry (see the module docstring)."""
        sm = self._driver.sm
        if e.type != EntryType.NORMAL or not e.data:
            return []
        tag = e.data[0]
        out: list[Event] = []
        schema = sm.schema_at.get(e.index) if records else None
        if schema and not sm.skipped(e.index):
            # the schema events the entry applied, before its records (docs/schema.md)
            ignored = {str(o) for o in ignore}
            for ev, ep in schema:
                if ev.origin not in ignored:
                    out.append(gateway_pb2.ChangeEvent(
                        log_index=e.index, schema_event=event_to_proto(ev), epoch=ep))
        if tag == _TXN:
            record = self._txn_event(e, ignore)
            if record is None or sm.skipped(e.index):
                return _schema_epoch(out, 0)
            out.append(record)
        elif tag == _MARKER:
            if not records:
                return []
            m = epoch_pb2.EpochMarker.FromString(e.data[1:])
            out.append(gateway_pb2.ChangeEvent(log_index=e.index, epoch_marker=m,
                                               epoch=m.epoch, sealed_at_ns=m.sealed_at_ns))
        elif tag == _UNIT:
            got = self._wire_unit(e, ignore, records, after) if self.wire else None
            if got is None:
                got = self._unit_messages(e, ignore, records, after)
            if got is None:
                return []
            out += got
        if tag != _SCHEMA:  # a SCHEMA_EVENT entry's events take the next record's epoch
            out = _schema_epoch(out, 0)
        if out:
            out[-1].entry_end = True
        return out

    def _txn_event(self, e: Entry, ignore: frozenset[int]) -> Event | None:
        """The event of the transaction entry ``e``; None when its origin is ignored."""
        got = txn_event(e.index, e.data, ignore) if self.wire else True
        if isinstance(got, WireEvent):
            return got
        if got is False:
            return None
        txn, _ = decode_entry(e.data)  # the message path, the specification
        if txn is None or txn.gtid.server_id in ignore:
            return None
        return gateway_pb2.ChangeEvent(log_index=e.index, transaction=txn, epoch=txn.epoch)

    def _unit_messages(self, e: Entry, ignore: frozenset[int], records: bool,
                       after: tuple[int, int] | None) -> list[Event] | None:
        """The events of the replicated-epoch entry ``e`` built as messages (the
        specification of ``_wire_unit``); None for a staged segment or an entry not
        applied."""
        sm = self._driver.sm
        unit = read_unit(self._driver.storage, e)
        if unit is None or sm.skipped(e.index):
            return None
        unit = sm.unit_outcome(e.index) or unit  # as the conflict rules left it
        out: list[Event] = []
        for it in unit.items:
            if it.WhichOneof("item") == "transaction":
                g = it.transaction.gtid
                if g.server_id in ignore or (after is not None and g.server_id == after[0]
                                             and g.trans_id <= after[1]):
                    continue
                out.append(gateway_pb2.ChangeEvent(
                    log_index=e.index, transaction=it.transaction, epoch=unit.local_epoch,
                    sealed_at_ns=unit.sealed_at_ns))
            elif records and it.WhichOneof("item") == "apply_status":
                out.append(gateway_pb2.ChangeEvent(
                    log_index=e.index, apply_status=it.apply_status,
                    epoch=unit.local_epoch, sealed_at_ns=unit.sealed_at_ns))
        return out

    def _wire_unit(self, e: Entry, ignore: frozenset[int], records: bool,
                   after: tuple[int, int] | None) -> Sequence[Event] | None:
        """The events of the replicated-epoch entry ``e`` framed from its bytes (or from its
        outcome record when the conflict rules changed it), as the message path builds them;
        None when that path must: a segmented epoch, a staged segment, anything
        ``feed_wire.unit_events`` does not read. ``[]`` for an entry not applied."""
        sm = self._driver.sm
        got = unit_events(e.index, e.data, 1, ignore, after, records)
        if got is None:
            return None
        if sm.skipped(e.index):
            return []
        outcome = sm.unit_outcome_bytes(e.index)
        if outcome is not None:
            got = unit_events(e.index, outcome, 0, ignore, after, records)
        return got

    async def events(self, start: int, *, ignore_origins: frozenset[int] = frozenset(),
                     log_records: bool = False, after_gtid: tuple[int, int] | None = None
                     ) -> AsyncIterator[Event]:
        """Change events from log index ``start`` on, forever (until cancelled);
        ``after_gtid = (origin, trans_id)``: leave out that origin's transactions up to it
        (a replicated entry holds several: resuming inside one). Raises
        ``InvalidRequest`` (``from_log_index``) when the log was compacted past the next
        entry to send -- the subscriber fell behind a snapshot and must resync, as when it
        subscribes at such a position -- rather than skip the compacted transactions."""
        drv = self._driver
        storage = drv.storage
        nxt = start
        #: the events of SCHEMA_EVENT entries until the next record gives their epoch (the
        #: leader seals the epoch the entry was proposed in: a marker follows)
        held: list[Event] = []
        while True:
            self._not_compacted(nxt)
            hi = min(drv.sm.applied_index + 1, nxt + 512)
            batch: list[Entry] = []
            if nxt < hi:
                try:
                    batch = storage.entries(max(nxt, storage.first_index()), hi, _READ_BYTES)
                except LogDamagedError:
                    raise  # DATA_LOSS naming the file and offset, never a silent gap
                except CompactedError:
                    batch = []
            # Compaction runs on the I/O thread: a read that raced it got nothing.
            self._not_compacted(nxt)
            if not batch:
                if nxt < hi:
                    nxt = max(nxt, storage.first_index())  # the bootstrap snapshot (index 1)
                    await asyncio.sleep(0)
                    continue
                if drv.removed:
                    raise NodeStoppedError("this node was removed from the cluster")
                def caught_up(n: int = nxt) -> bool:
                    return drv.sm.applied_index >= n or drv.removed

                async with drv.applied_changed:
                    await drv.applied_changed.wait_for(caught_up)
                continue
            for e in batch:
                try:
                    evs = self._entry_events(e, ignore_origins, log_records, after_gtid)
                except LogDamagedError:
                    raise
                except CompactedError:
                    raise InvalidRequest("from_log_index", f"the segments of the replicated "
                                         f"epoch ending at index {e.index} were compacted "
                                         f"while streaming (resync from a snapshot)") from None
                if held and evs:  # a schema entry's events join the next record's epoch
                    for h in held:
                        h.epoch = evs[0].epoch
                    evs, held = held + evs, []
                if evs and not evs[0].epoch:
                    held += evs
                    evs = []
                for ev in evs:
                    yield ev
                nxt = e.index + 1
            await asyncio.sleep(0)


def _schema_epoch(out: list[Event], fallback: int
                  ) -> list[Event]:
    """``out`` with each schema event in the epoch of the entry's first record after it (a
    transaction's, a replicated entry's), or ``fallback``; one left in no epoch is left out
    (its entry sends nothing this reader takes)."""
    epoch = fallback
    for ev in reversed(out):
        if ev.HasField("schema_event"):
            if not ev.epoch:
                ev.epoch = epoch
        else:
            epoch = ev.epoch
    return [ev for ev in out if ev.epoch]
