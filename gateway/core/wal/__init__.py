"""The segmented write-ahead log: Raft log storage on word-stuffed record streams.

Modules, one job each:

- `codec`: the record payloads (type tag + hand-encoded protobuf of ``wal.proto``);
- `segment`: one segment file's in-memory offset index and the bytes that build and seal it;
- `recovery`: loading a segment on open (footer fast path, scan fallback, torn-tail cut);
- `meta`: the meta file holding Raft's hard state and the log's start after compaction;
- `log`: `SegmentedWal`, the storage interface Raft uses, with fsync policies and group commit;
- `report`, `errors`: what recovery reports, and the named errors (tree in `errors`).

The on-disk format is specified in ``docs/formats/wal.md``.
"""

from __future__ import annotations

from gateway.core.wal.codec import LogStart, WalEntry, WalHardState, WalTag
from gateway.core.wal.errors import (
    WalClosedError,
    WalCompactedError,
    WalCorruptionError,
    WalError,
    WalFailedError,
    WalFormatError,
    WalIndexError,
    WalUnavailableError,
)
from gateway.core.wal.log import FsyncPolicy, SegmentedWal, WalOptions
from gateway.core.wal.report import RecoveryEvent, RecoveryEventKind, RecoveryReport

__all__ = [
    "FsyncPolicy",
    "LogStart",
    "RecoveryEvent",
    "RecoveryEventKind",
    "RecoveryReport",
    "SegmentedWal",
    "WalClosedError",
    "WalCompactedError",
    "WalCorruptionError",
    "WalEntry",
    "WalError",
    "WalFailedError",
    "WalFormatError",
    "WalHardState",
    "WalIndexError",
    "WalOptions",
    "WalTag",
    "WalUnavailableError",
]
