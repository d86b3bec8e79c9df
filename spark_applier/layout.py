"""What a ``gateway_wal`` path holds, and how it is cut into byte ranges for parallel reads.

A path is either a WAL directory (``NNNNNNNNNNNNNNNNNNNN.wal`` segments and a ``meta`` file,
docs/formats/wal.md) or one standalone log file (``gateway log write``: a record stream of
tagged messages). No index is needed anywhere: a range ``[start, stop)`` of a file yields the
records whose separator lies in it (``gateway.core.records.scan``), so any cut reads every
record exactly once, and the index-free ``records.search`` turns an index or GTID bound into a
byte bound with O(log size) probes.

Contracts:

- WAL entries are numbered by their Raft index; only entries ``log_start <= index <= commit``
  (from ``meta``) are read when ``committed_only`` (the default): uncommitted entries may still
  be truncated away by Raft, so they are never handed out.
- In a standalone log file an entry's index is its record ordinal from 1, which is what
  ``gateway apply`` uses. Every record is followed by ``FE FD`` and the file starts with one, so
  the ordinal of the record at separator position ``p`` is 1 + the number of separators before
  ``p``; the planner counts them once (at memory speed) and hands each range its base.
- Bad input (missing path, no segments, unreadable meta) raises ``LogLayoutError`` with one line
  naming the path; damaged records never raise (the reader counts them).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gateway.formats import (
    SEPARATOR,
    PayloadError,
    WalTag,
    decode_log_start,
    decode_wal_entry,
    entry_index_key,
    entry_position,
    last_commit,
    records,
)
from gateway.formats import open_segment as open_buffer
from gateway.v1 import transaction_pb2

_ENTRY_TAG = bytes((WalTag.ENTRY,))  # the first byte of a WAL record holding an entry

__all__ = [
    "GtidRange",
    "LogFile",
    "LogLayout",
    "LogLayoutError",
    "ReadRange",
    "discover",
    "entry_index_key",
    "open_buffer",
    "parse_gtid_range",
    "plan_ranges",
    "resolve_path",
]

_SEGMENT_NAME = re.compile(r"^(\d{20})\.wal$")
_TRANSACTION_TAG = 1


class LogLayoutError(Exception):
    """The path is not a WAL directory or a log file; ``str()`` is one line naming it."""


@dataclass(frozen=True, slots=True)
class LogFile:
    """One file of a log: ``segment`` is a WAL segment's first index (0 for a log file)."""

    path: str
    kind: str  # "wal" or "log"
    segment: int
    size: int

    @property
    def generation(self) -> int | None:
        """The record generation a WAL segment's records carry (None: any, log files)."""
        return self.segment & 0xFFFFFFFF if self.kind == "wal" else None


@dataclass(frozen=True, slots=True)
class LogLayout:
    """The files of a log in log order, and the committed index range of a WAL."""

    kind: str
    files: tuple[LogFile, ...]
    log_start: int = 1
    commit: int | None = None  # None: no limit (log files, or committed_only=False)


@dataclass(frozen=True, slots=True)
class GtidRange:
    """Transactions of origin ``server_id`` with ``first <= trans_id <= last``."""

    server_id: int
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.server_id}:{self.first}-{self.last}"


@dataclass(frozen=True, slots=True)
class ReadRange:
    """One input partition: records of ``file`` whose position is in ``[start, stop)``.

    ``ordinal_base`` (log files) is the number of separators before ``start``. Rows outside
    ``[index_from, index_to]`` or ``gtids`` are dropped by the reader even when the byte bounds
    (found by search) are wider.
    """

    file: LogFile
    start: int
    stop: int
    ordinal_base: int = 0
    index_from: int = 1
    index_to: int | None = None
    gtids: GtidRange | None = None


def parse_gtid_range(text: str) -> GtidRange:
    """``"1:100-200"`` (or ``"1:100"``) -> ``GtidRange(1, 100, 200)``; ``ValueError`` if bad."""
    m = re.fullmatch(r"\s*(\d+):(\d+)(?:-(\d+))?\s*", text)
    if not m:
        raise ValueError(f"invalid GTID range {text!r}: expected SERVER:FIRST[-LAST], e.g. 1:5-9")
    server, first = int(m.group(1)), int(m.group(2))
    last = int(m.group(3)) if m.group(3) else first
    if last < first:
        raise ValueError(f"invalid GTID range {text!r}: last {last} < first {first}")
    return GtidRange(server, first, last)


def resolve_path(path: str | os.PathLike[str]) -> str:
    """``path`` as every executor must see it: absolute, resolved on the host that calls this
    (the driver), since tasks run in other working directories (a standalone worker's
    ``work/app-*/N``) or on other machines. A ``file:`` URI becomes its local path; other URIs
    are returned unchanged."""
    text = os.fspath(path)
    if text.startswith("file:"):
        text = re.sub(r"^file:(//(localhost)?)?", "", text)
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        return text
    return os.path.abspath(text)


def discover(path: str | os.PathLike[str], *, committed_only: bool = True) -> LogLayout:
    """The layout of ``path``: a WAL directory or a standalone log file."""
    p = Path(path)
    if p.is_file():
        return LogLayout("log", (LogFile(str(p), "log", 0, p.stat().st_size),))
    if not p.is_dir():
        raise LogLayoutError(f"{p}: no such file or directory")
    segments = []
    for child in p.iterdir():
        m = _SEGMENT_NAME.match(child.name)
        if m and child.is_file():
            segments.append(LogFile(str(child), "wal", int(m.group(1)), child.stat().st_size))
    if not segments:
        raise LogLayoutError(f"{p}: no WAL segments (NNNNNNNNNNNNNNNNNNNN.wal) in this directory")
    segments.sort(key=lambda f: f.segment)
    log_start, commit = _read_meta(p / "meta")
    marked = _segment_commit(segments[-1])
    if marked is not None and (commit is None or marked > commit):
        commit = marked
    return LogLayout("wal", tuple(segments), log_start, commit if committed_only else None)


def _read_meta(path: Path) -> tuple[int, int | None]:
    """``(log start, commit index)`` from a WAL meta file: the last valid record of each kind,
    or among hard states the one with the highest ``seq`` (field 4) when they carry one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 1, None
    except OSError as exc:
        raise LogLayoutError(f"{path}: cannot read: {exc.strerror or exc}") from None
    start = 1
    try:
        for rec in records.scan(data):
            if rec.payload[:1] == bytes((WalTag.LOG_START,)):
                start = max(1, decode_log_start(rec.payload).first_index)
        commit = last_commit(data, 0)
    except PayloadError as exc:
        raise LogLayoutError(f"{path}: {exc}") from None
    return start, commit


def _segment_commit(f: LogFile) -> int | None:
    """Commit markers (hard-state records) near the end of a segment, if the WAL writes them."""
    buf = open_buffer(f.path)
    try:
        return last_commit(buf, max(0, len(buf) - (1 << 20)))
    except PayloadError:
        return None
    finally:
        if not isinstance(buf, bytes):
            buf.close()


# --- search keys ------------------------------------------------------------------------------


def _transaction_of(file: LogFile, rec: records.Record) -> transaction_pb2.Transaction | None:
    payload = rec.payload
    if file.kind == "wal":
        if payload[:1] != _ENTRY_TAG or rec.generation != file.generation:
            return None
        try:
            payload = decode_wal_entry(payload).data
        except PayloadError:
            return None
    if payload[:1] != bytes((_TRANSACTION_TAG,)):
        return None
    try:
        return transaction_pb2.Transaction.FromString(payload[1:])
    except Exception:  # a damaged payload is simply not a key
        return None


def _gtid_key(file: LogFile, server_id: int) -> Callable[[records.Record], int | None]:
    def key(rec: records.Record) -> int | None:
        txn = _transaction_of(file, rec)
        if txn is None or txn.gtid.server_id != server_id:
            return None
        return txn.gtid.trans_id

    return key


# --- planning ---------------------------------------------------------------------------------


def _count(buf: Any, a: int, b: int) -> int:
    """Number of separators whose position is in ``[a, b)``."""
    step = 16 << 20
    total = 0
    for x in range(a, b, step):
        y = min(x + step, b)
        total += bytes(buf[x : y + 1]).count(SEPARATOR)
    return total


def _nth_separator(buf: Any, n: int, start: int, stop: int) -> int:
    """Position of the ``n``-th separator (1-based) at or after ``start``, else ``stop``."""
    step = 1 << 20
    pos = start
    while pos < stop and n > 0:
        end = min(pos + step, stop)
        count = _count(buf, pos, end)
        if count >= n:
            while True:
                q: int = buf.find(SEPARATOR, pos, end + 1)
                n -= 1
                if n == 0:
                    return q
                pos = q + 2
        n -= count
        pos = end
    return stop


def plan_ranges(layout: LogLayout, *, partition_bytes: int, index_from: int = 1,
                index_to: int | None = None, gtids: GtidRange | None = None,
                bounds: dict[int, tuple[int, int]] | None = None) -> list[ReadRange]:
    """Cut the log into ``ReadRange`` partitions of about ``partition_bytes`` each.

    ``index_from``/``index_to`` (inclusive) and ``gtids`` narrow the byte range of each file
    by search before cutting. ``bounds`` maps a file's ``segment`` to a byte range to read
    (the streaming reader's offsets); files not in it are skipped when it is given.
    """
    if partition_bytes < 64:
        raise ValueError(f"partition_bytes must be >= 64, not {partition_bytes}")
    lo = max(index_from, layout.log_start if layout.kind == "wal" else 1)
    hi = index_to
    if layout.commit is not None:
        hi = layout.commit if hi is None else min(hi, layout.commit)
    out: list[ReadRange] = []
    files = layout.files
    for i, f in enumerate(files):
        if bounds is not None and f.segment not in bounds:
            continue
        if f.kind == "wal":
            nxt = files[i + 1].segment if i + 1 < len(files) else None
            if (hi is not None and f.segment > hi) or (nxt is not None and nxt <= lo):
                continue
        start, stop = bounds[f.segment] if bounds is not None else (0, f.size)
        if start >= stop:
            continue
        out.extend(_plan_file(f, start, stop, lo, hi, gtids, partition_bytes))
    return out


def _plan_file(f: LogFile, start: int, stop: int, lo: int, hi: int | None,
               gtids: GtidRange | None, partition_bytes: int) -> Iterator[ReadRange]:
    buf = open_buffer(f.path)
    try:
        stop = min(stop, len(buf))
        if f.kind == "wal":
            key = entry_index_key(f.generation)
            if lo > f.segment:
                start = max(start, entry_position(buf, lo, key, start, stop))
            if hi is not None:
                stop = entry_position(buf, hi + 1, key, start, stop)
        else:
            if lo > 1:
                start = max(start, _nth_separator(buf, lo, 0, stop))
            if hi is not None:
                stop = min(stop, _nth_separator(buf, hi + 1, 0, stop))
        if gtids is not None and start < stop:
            key = _gtid_key(f, gtids.server_id)
            start = entry_position(buf, gtids.first, key, start, stop)
            stop = entry_position(buf, gtids.last + 1, key, start, stop)
        if start >= stop:
            return
        cuts = [*range(start, stop, partition_bytes), stop]
        base = _count(buf, 0, start) if f.kind == "log" else 0
        template = ReadRange(f, 0, 0, 0, lo, hi, gtids)
        for a, b in itertools.pairwise(cuts):
            yield replace(template, start=a, stop=b, ordinal_base=base)
            if f.kind == "log":
                base += _count(buf, a, b)
    finally:
        if not isinstance(buf, bytes):
            buf.close()


def last_index(layout_: LogLayout) -> int:
    """Index of the last entry a read would see now: the commit index of a WAL (or, without
    one, its newest entry), the number of complete records of a log file."""
    if layout_.kind == "wal" and layout_.commit is not None:
        return layout_.commit
    f = layout_.files[-1]
    buf = open_buffer(f.path)
    try:
        end = buf.rfind(SEPARATOR) if len(buf) else -1
        if end < 0:
            return f.segment - 1 if f.kind == "wal" else 0
        if f.kind == "log":
            return _count(buf, 0, end)
        key = entry_index_key(f.generation)
        last = f.segment - 1
        for rec in records.scan(buf, 0, end):
            k = key(rec)
            if k is not None:
                last = k
        return last
    finally:
        if not isinstance(buf, bytes):
            buf.close()
