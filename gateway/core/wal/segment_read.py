"""Reading closed WAL segments from outside the node: a segment mapped read-only, the commit
its hard-state records mark, and the byte position of an entry index. The node's ``LogRead``
service and the Spark bulk applier share these, so a byte range one of them computes is the
range the other would (docs/formats/wal.md).

Contracts: ``open_segment`` gives a read-only ``mmap`` (``b""`` for an empty file) the
caller releases with ``close_segment``; ``last_commit`` returns the commit of the newest
hard-state record (highest ``seq``, the last of equals) in ``buf[start:]`` or None and may
raise ``PayloadError`` on a damaged hard state; ``entry_position`` never raises on a damaged
entry (its key is None and the search passes over it)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from typing import Any

from gateway.core import records
from gateway.core.wal.codec import PayloadError, WalTag, decode_fields, decode_wal_entry

__all__ = ["close_segment", "entry_index_key", "entry_position", "last_commit",
           "open_segment"]

_ENTRY = bytes((WalTag.ENTRY,))
_HARD_STATE = bytes((WalTag.HARD_STATE,))


def open_segment(path: str) -> Any:
    """A read-only ``mmap`` of ``path`` (``b""`` for an empty file): the records functions'
    buffer. The caller closes it with ``close_segment``."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def close_segment(buf: Any) -> None:
    """Release a buffer from ``open_segment`` (nothing to do for ``b""``)."""
    if isinstance(buf, mmap.mmap):
        buf.close()


def last_commit(buf: Any, start: int) -> int | None:
    """The commit index of the newest hard-state record in ``buf[start:]`` (highest ``seq``,
    then the last), or None."""
    best: tuple[int, int] | None = None
    for rec in records.scan(buf, start):
        if rec.payload[:1] != _HARD_STATE:
            continue
        fields = decode_fields(rec.payload)
        seq, commit = fields.get(4, 0), fields.get(3, 0)
        if isinstance(seq, int) and isinstance(commit, int) and (best is None
                                                                 or seq >= best[0]):
            best = (seq, commit)
    return None if best is None else best[1]


def entry_index_key(generation: int | None) -> Callable[[records.Record], int | None]:
    """Search key of WAL records: an entry record's index (of ``generation`` when given),
    None for any other record or a damaged entry."""

    def key(rec: records.Record) -> int | None:
        if rec.payload[:1] != _ENTRY or (generation is not None
                                         and rec.generation != generation):
            return None
        try:
            return decode_wal_entry(rec.payload).index
        except PayloadError:
            return None

    return key


def entry_position(buf: Any, target: int, key: Callable[[records.Record], int | None],
                   start: int, stop: int) -> int:
    """Byte position of the first record in ``[start, stop)`` whose ``key`` is at least
    ``target``, else ``stop``."""
    found = records.search(buf, target, key, start=start, stop=stop)
    return stop if found is None else found.position
