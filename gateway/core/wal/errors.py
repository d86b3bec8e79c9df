"""Named errors of the segmented WAL.

::

    WalError
    ├── WalCorruptionError       stored bytes are damaged where data must be (file, offset)
    │   └── WalFormatError       a valid record that this version cannot interpret
    ├── WalIndexError            a request names an index the log cannot serve  (ValueError)
    │   ├── WalCompactedError    the index is below the first index (compacted away)
    │   └── WalUnavailableError  the index is beyond the last index
    ├── WalFailedError           an earlier I/O error made the WAL inoperable
    └── WalClosedError           the WAL was closed

A storage error is never papered over: after a failed write or fsync the WAL raises
`WalFailedError` (chained to the cause) on every call, because the kernel may have dropped the
dirty pages (an fsync error cannot be retried safely).
"""

from __future__ import annotations

__all__ = [
    "WalClosedError",
    "WalCompactedError",
    "WalCorruptionError",
    "WalError",
    "WalFailedError",
    "WalFormatError",
    "WalIndexError",
    "WalUnavailableError",
]


class WalError(Exception):
    """Base class of every error raised by ``gateway.core.wal``."""


class WalCorruptionError(WalError):
    """Damaged bytes where the WAL needs data: ``path`` and byte ``offset`` say where.

    Raised on open for a damaged record followed by valid ones (only a damaged *tail* is an
    interrupted write, which recovery cuts and reports instead), for entries out of sequence,
    and for segments that do not join up; raised on read when a record no longer verifies.
    """

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: byte {offset}: {reason}")


class WalFormatError(WalCorruptionError):
    """A record with a valid checksum that this version cannot interpret (unknown tag, newer
    format version, malformed message)."""


class WalIndexError(WalError, ValueError):
    """The requested index (or range) is not in the log, or an append is not contiguous."""


class WalCompactedError(WalIndexError):
    """The requested index is below ``first_index()``: it was compacted away."""


class WalUnavailableError(WalIndexError):
    """The requested index is beyond ``last_index()``."""


class WalFailedError(WalError):
    """An earlier write, fsync or file operation failed; the WAL accepts no further calls."""


class WalClosedError(WalError):
    """The WAL was closed."""
