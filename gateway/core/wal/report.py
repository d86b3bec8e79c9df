"""What recovery found and did: a list of `RecoveryEvent` values, one per finding.

Damage that recovery may resolve without losing acknowledged data is *reported* here (and
passed to the WAL's ``on_recovery_event`` callback as it happens); damage it may not resolve
raises `~gateway.core.wal.errors.WalCorruptionError` instead. Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["RecoveryEvent", "RecoveryEventKind", "RecoveryReport"]


class RecoveryEventKind(Enum):
    """Kinds of findings."""

    TORN_TAIL = "torn-tail"
    """Bytes after the last valid record of the newest file (an interrupted append) were cut;
    ``offset`` is where the cut was made, ``length`` how many bytes went."""
    TORN_BATCH = "torn-batch"
    """Entries after the newest segment's last commit marker (a batch whose marker never
    reached the disk) were cut; ``offset`` is the first cut entry's record, ``length`` how
    many bytes went. Such a batch was never acknowledged (it is made durable as a whole)."""
    STALE_ENTRIES_CUT = "stale-entries-cut"
    """Entries that an interrupted ``truncate_suffix`` or ``reset`` had committed to removing
    (the meta file's hard state is newer than their markers) were cut, or their segment
    removed."""
    SEAL_DAMAGED = "seal-damaged"
    """A sealed segment's footer or index record did not verify; the segment was rescanned
    and its entries were checked against its neighbours (nothing was cut)."""
    STALE_SEGMENT_REMOVED = "stale-segment-removed"
    """A segment wholly below the log's first index (an interrupted compaction) was removed."""
    STALE_FILE_REMOVED = "stale-file-removed"
    """A leftover temporary file of an interrupted meta-file rewrite was removed."""


@dataclass(frozen=True)
class RecoveryEvent:
    """One finding: what, in which file, at which byte offset, how many bytes, and why."""

    kind: RecoveryEventKind
    path: str
    offset: int
    length: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.path}: byte {self.offset} (+{self.length}): {self.detail}"


@dataclass
class RecoveryReport:
    """Every `RecoveryEvent` of one open, in the order they happened."""

    events: list[RecoveryEvent] = field(default_factory=list)

    def of_kind(self, kind: RecoveryEventKind) -> list[RecoveryEvent]:
        """The events of one kind."""
        return [e for e in self.events if e.kind is kind]

    @property
    def clean(self) -> bool:
        """True when recovery found nothing to report."""
        return not self.events
