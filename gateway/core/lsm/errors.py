"""Named exceptions of the LSM store.

::

    LSMError                     base of everything raised on purpose by the store
    ├── CorruptionError          a file failed its checksum or structural check (file, offset)
    ├── StoreClosedError         the store (or the snapshot's store) was closed
    ├── StoreLockedError         another LSMStore holds the directory
    ├── BackgroundError          a background flush/compaction failed; the store is inoperable
    └── InvalidArgumentError     bad key, value, metadata or option (also a ``ValueError``)

A storage error makes the store inoperable instead of being papered over (as in etcd-io/raft):
after a :class:`BackgroundError` every write raises it again until the store is reopened.
"""

from __future__ import annotations

__all__ = [
    "BackgroundError",
    "CorruptionError",
    "InvalidArgumentError",
    "LSMError",
    "StoreClosedError",
    "StoreLockedError",
]


class LSMError(Exception):
    """Base class of the store's own exceptions."""


class CorruptionError(LSMError):
    """A file is damaged: a record failed its CRC or a structure is inconsistent.

    ``path`` names the file and ``offset`` the byte where the bad record (or structure) starts,
    so the message always says what and where.
    """

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: byte offset {offset}: {reason}")


class StoreClosedError(LSMError):
    """The store was closed; reads and writes (also through snapshots) are refused."""


class StoreLockedError(LSMError):
    """Another open store holds the directory's LOCK file."""


class BackgroundError(LSMError):
    """A background flush or compaction failed; the cause is chained as ``__cause__``."""


class InvalidArgumentError(LSMError, ValueError):
    """A key, value, metadata field or option is out of range or of the wrong type."""
