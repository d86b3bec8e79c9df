"""Durable applier positions: a log index plus the set of applied GTIDs per origin.

``ApplierPosition(log_index, applied)`` means: every entry with index <= ``log_index`` is
fully applied (or dead-lettered), and so is every transaction whose GTID is in ``applied``
(which may include transactions after ``log_index``: the dispatcher applies out of order across
rows and only moves ``log_index`` over a contiguous prefix). A restart reads from
``log_index + 1`` and skips transactions in ``applied``.

``PositionStore`` keeps one applier's position in its own file, a record stream of
``gateway.v1.ApplierPosition`` messages (tag 112): ``save`` appends a record and fsyncs,
``load`` returns the last valid one (a torn last record falls back to the one before) and
records in ``damage`` where the file is damaged (the node refuses to start an applier whose
fallback position is no longer in the log, see ``docs/node.md``). When
the file grows past ``compact_bytes`` it is rewritten with only the latest record (temporary
file, fsync, rename, directory fsync), so a crash at any point leaves a readable position.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core import messages, records
from gateway.core.fileio import FileSystem, local_fs
from gateway.core.messages import MessageDecodeError
from gateway.core.rowops import Gtid
from gateway.core.stuffing import SEPARATOR
from gateway.v1 import applier_pb2

__all__ = [
    "ApplierPosition",
    "BackfillProgress",
    "GtidSet",
    "PositionStore",
    "PositionStoreError",
    "position_message",
    "position_of",
]


class PositionStoreError(Exception):
    """A position file cannot be read or written; ``str()`` is one line naming the file."""


class GtidSet:
    """A set of GTIDs kept as disjoint closed ranges of trans ids per origin ``server_id``.

    Consecutive trans ids of one origin collapse into one range, so a set that holds every
    transaction of a long log stays a few ranges long. Not thread-safe.
    """

    __slots__ = ("_ranges",)

    def __init__(self, gtids: Iterable[Gtid] = ()) -> None:
        # server_id -> sorted starts, and parallel ends (inclusive)
        self._ranges: dict[int, tuple[list[int], list[int]]] = {}
        for g in gtids:
            self.add(g)

    def __contains__(self, gtid: object) -> bool:
        if not isinstance(gtid, tuple) or len(gtid) != 2:
            return False
        server_id, trans_id = gtid
        ranges = self._ranges.get(server_id)
        if ranges is None:
            return False
        starts, ends = ranges
        i = bisect.bisect_right(starts, trans_id) - 1
        return i >= 0 and ends[i] >= trans_id

    def add(self, gtid: Gtid) -> None:
        """Add one GTID, merging it with adjacent ranges."""
        server_id, t = gtid
        starts, ends = self._ranges.setdefault(server_id, ([], []))
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and ends[i] >= t:
            return
        joins_left = i >= 0 and ends[i] == t - 1
        joins_right = i + 1 < len(starts) and starts[i + 1] == t + 1
        if joins_left and joins_right:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        elif joins_left:
            ends[i] = t
        elif joins_right:
            starts[i + 1] = t
        else:
            starts.insert(i + 1, t)
            ends.insert(i + 1, t)

    def add_range(self, server_id: int, first: int, last: int) -> None:
        """Add every trans id ``first..last`` (inclusive) of origin ``server_id``, merging it
        with the ranges it overlaps or touches."""
        if last < first:
            return
        starts, ends = self._ranges.setdefault(server_id, ([], []))
        lo = bisect.bisect_left(ends, first - 1)  # the first range ending at or after first-1
        hi = bisect.bisect_right(starts, last + 1)  # past the last starting at or before last+1
        if lo < hi:
            first, last = min(first, starts[lo]), max(last, ends[hi - 1])
        starts[lo:hi] = [first]
        ends[lo:hi] = [last]

    def update(self, gtids: Iterable[tuple[int, int]]) -> None:
        """Add every GTID of ``gtids`` (``Gtid`` values or plain pairs): each run of
        consecutive trans ids of one origin (the usual order of a log) as one range."""
        run_sid: int | None = None
        run_first = run_last = 0  # meaningful once run_sid is set
        for server_id, t in gtids:
            if server_id == run_sid and t == run_last + 1:
                run_last = t
                continue
            if run_sid is not None:
                self.add_range(run_sid, run_first, run_last)
            run_sid, run_first, run_last = server_id, t, t
        if run_sid is not None:
            self.add_range(run_sid, run_first, run_last)

    def holds_any(self, gtids: Sequence[Gtid]) -> bool:
        """Whether any of ``gtids`` is in the set (one range check when they all come from
        one origin, the usual case: no bisect per GTID)."""
        if not gtids or not self._ranges:
            return False
        low, high = min(gtids), max(gtids)
        if low[0] != high[0]:
            return any(g in self for g in gtids)
        ranges = self._ranges.get(low[0])
        if ranges is None:
            return False
        starts, ends = ranges
        i = bisect.bisect_left(ends, low[1])  # the first range ending at or after the lowest
        if i == len(starts) or starts[i] > high[1]:
            return False  # no range meets [lowest, highest]
        return any(g in self for g in gtids)

    def ranges(self) -> Iterator[tuple[int, int, int]]:
        """``(server_id, first, last)`` for every range, by server id then trans id."""
        for server_id in sorted(self._ranges):
            starts, ends = self._ranges[server_id]
            for s, e in zip(starts, ends, strict=True):
                yield server_id, s, e

    def __len__(self) -> int:
        return sum(e - s + 1 for _, s, e in self.ranges())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and list(self.ranges()) == list(other.ranges())

    def __str__(self) -> str:
        parts = []
        for server_id in sorted(self._ranges):
            starts, ends = self._ranges[server_id]
            spans = ":".join(f"{s}-{e}" if e != s else f"{s}"
                             for s, e in zip(starts, ends, strict=True))
            parts.append(f"{server_id}:{spans}")
        return ",".join(parts)

    def copy(self) -> GtidSet:
        out = GtidSet()
        out._ranges = {k: (list(s), list(e)) for k, (s, e) in self._ranges.items()}
        return out

    def to_proto(self) -> list[applier_pb2.OriginGtids]:
        out: dict[int, applier_pb2.OriginGtids] = {}
        for server_id, s, e in self.ranges():
            origin = out.setdefault(server_id, applier_pb2.OriginGtids(server_id=server_id))
            origin.ranges.add(first=s, last=e)
        return list(out.values())

    @classmethod
    def from_proto(cls, origins: Iterable[applier_pb2.OriginGtids]) -> GtidSet:
        out = cls()
        for origin in origins:
            starts, ends = out._ranges.setdefault(origin.server_id, ([], []))
            for r in origin.ranges:
                if r.first > r.last or (ends and r.first <= ends[-1] + 1):
                    raise ValueError(f"origin {origin.server_id}: ranges not disjoint and "
                                     f"increasing at {r.first}-{r.last}")
                starts.append(r.first)
                ends.append(r.last)
        return out


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    """A new applier's backfill from the store (``gateway.node.appliers.backfill``): rows
    are delivered in store key order from a snapshot at log index ``snapshot_index``; every
    row whose key is ``<= last_key`` has been delivered (none when ``last_key`` is empty and
    ``rows`` 0). ``done``: every row was, the applier follows the log. ``replay_until``: the
    largest snapshot index a part of the rows was read at (a restart re-takes the snapshot);
    the log up to it is applied without insert-delete elision. ``rows``: rows delivered over
    all runs; ``resumes``: restarts that continued it after ``last_key``. ``tables``: the
    tables' key prefixes in the order they are read, when not key order (empty)."""

    snapshot_index: int
    last_key: bytes = b""
    rows: int = 0
    done: bool = False
    replay_until: int = 0
    resumes: int = 0
    tables: tuple[bytes, ...] = ()


@dataclass(slots=True)
class ApplierPosition:
    """Where an applier is: see the module docstring. ``backfill``: set while a backfill is
    in progress (``log_index`` is then its snapshot index, the first log entry it will follow
    is the next; entries up to it are in the store's rows, not applied one by one) and while
    the log up to ``backfill.replay_until`` is applied after it."""

    log_index: int = 0
    applied: GtidSet = field(default_factory=GtidSet)
    backfill: BackfillProgress | None = None


def position_message(applier: str, position: ApplierPosition, saved_at_ns: int = 0
                     ) -> applier_pb2.ApplierPosition:
    """The ``gateway.v1.ApplierPosition`` record of ``position``."""
    msg = applier_pb2.ApplierPosition(
        applier=applier, log_index=position.log_index, applied=position.applied.to_proto(),
        saved_at_ns=saved_at_ns)
    b = position.backfill
    if b is not None:
        msg.backfill.CopyFrom(applier_pb2.ApplierBackfill(
            snapshot_index=b.snapshot_index, last_key=b.last_key, rows=b.rows, done=b.done,
            replay_until=b.replay_until, resumes=b.resumes, tables=b.tables))
    return msg


def position_of(msg: applier_pb2.ApplierPosition) -> ApplierPosition:
    """The ``ApplierPosition`` of a record; ``ValueError`` if its GTID ranges are invalid."""
    backfill = None
    if msg.HasField("backfill"):
        b = msg.backfill
        backfill = BackfillProgress(b.snapshot_index, b.last_key, b.rows, b.done,
                                    b.replay_until, b.resumes, tuple(b.tables))
    return ApplierPosition(msg.log_index, GtidSet.from_proto(msg.applied), backfill)


class PositionStore:
    """One applier's durable position in ``directory/<applier>.position``. Thread-safe."""

    def __init__(self, directory: str | os.PathLike[str], applier: str, *,
                 compact_bytes: int = 1 << 16, fs: FileSystem | None = None) -> None:
        self.applier = applier
        self.path = Path(directory) / f"{applier}.position"
        self._fs = fs or local_fs()
        self.compact_bytes = compact_bytes
        self._lock = threading.Lock()
        #: After ``load``: where the file is damaged (one line), or ``None`` if it is intact.
        self.damage: str | None = None
        # A save failed (a write, or an fsync whose dirty pages the kernel may have dropped):
        # the file may hold a hole where that record was, so the next save rewrites the whole
        # file through a new one (``write_atomic``) instead of appending after the hole.
        self._suspect = False

    def load(self) -> ApplierPosition:
        """The last saved position, or position 0 with no GTIDs if none was ever saved."""
        try:
            data = self._fs.read_all(str(self.path))
        except FileNotFoundError:
            return ApplierPosition()
        except OSError as exc:
            raise PositionStoreError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        self.damage = None
        report = records.verify(data)
        if report.damaged:
            # A torn tail (an interrupted save) falls back to the record before it, which is
            # safe (at-least-once); the caller decides whether that position is still usable
            # (``damage`` says where the file is damaged).
            first = report.damaged[0]
            self.damage = (f"{self.path}: byte {first.start}: {first.end - first.start} "
                           f"damaged bytes" + (" (torn tail)" if report.torn_tail and len(
                               report.damaged) == 1 else ""))
        last: applier_pb2.ApplierPosition | None = None
        for rec in records.scan(data):
            try:
                msg = messages.unpack(rec.payload, base_offset=rec.offset)
            except MessageDecodeError as exc:
                raise PositionStoreError(f"{self.path}: {exc}") from None
            if isinstance(msg, applier_pb2.ApplierPosition):
                last = msg
        if last is None:
            # The file exists, so a position was being saved: an empty or unreadable file is
            # damage, not a new applier.
            self.damage = self.damage or (f"{self.path}: byte 0: no valid position record in "
                                          f"{len(data)} bytes")
            return ApplierPosition()
        try:
            return position_of(last)
        except ValueError as exc:
            raise PositionStoreError(f"{self.path}: {exc}") from None

    def save(self, position: ApplierPosition) -> None:
        """Append ``position`` durably (fsync) and compact the file when it is large. After a
        failed save the next one rewrites the file whole (never an fsync retried on the file
        whose write failed)."""
        msg = position_message(self.applier, position, time.time_ns())
        record = records.encode_record(messages.pack(msg))
        with self._lock:
            try:
                fs, path = self._fs, str(self.path)
                fs.makedirs(str(self.path.parent))
                size = fs.size(path) if fs.exists(path) else 0
                if self._suspect or size + len(record) > self.compact_bytes:
                    fs.write_atomic(path, SEPARATOR + record)
                    self._suspect = False
                    return
                # a torn tail (crash mid-append) must not swallow the new record
                fs.append_synced(path, record, boundary=SEPARATOR)
            except OSError as exc:
                self._suspect = True
                raise PositionStoreError(
                    f"{self.path}: cannot write: {exc.strerror or exc}") from exc  # errno kept

