"""The manifest: which tables make up the store, at which level, and how far the log is applied.

The file ``MANIFEST`` is a stuffed record stream of *version edits* (tag ``0xE8``, JSON body,
``docs/formats/sstable.md``). Replaying the edits in order over an empty version gives the
current version. Every change is installed atomically: the new file (old edits plus the new
one, or a single full snapshot edit once ``MAX_EDITS`` pile up) is written to ``MANIFEST.tmp``,
fsynced, renamed over ``MANIFEST`` and the directory fsynced. There is no torn-tail case to
tolerate, so any record that fails its CRC is corruption and the store refuses to open.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from gateway.core.fileio import FileSystem, local_fs
from gateway.core.lsm.errors import CorruptionError
from gateway.core.lsm.format import TAG_MANIFEST_EDIT
from gateway.core.lsm.sstable_writer import TableMeta
from gateway.core.records import SEPARATOR, encode_record, scan, verify

__all__ = ["MANIFEST_NAME", "MAX_EDITS", "Edit", "Manifest", "VersionState", "read_manifest"]

MANIFEST_NAME = "MANIFEST"
#: Edits kept before the manifest is rewritten as one snapshot edit.
MAX_EDITS = 64
NUM_LEVELS = 7


@dataclass
class Edit:
    """A change to the version: tables added/removed and counters moved forward."""

    add: list[tuple[int, TableMeta]] = field(default_factory=list)
    remove: list[tuple[int, int]] = field(default_factory=list)  # (level, number)
    next_file: int | None = None
    applied_index: int | None = None
    wal_number: int | None = None
    pointers: dict[int, bytes] = field(default_factory=dict)

    def to_payload(self) -> bytes:
        """The record payload: tag byte + compact JSON."""
        body: dict[str, object] = {}
        if self.next_file is not None:
            body["next_file"] = self.next_file
        if self.applied_index is not None:
            body["applied_index"] = self.applied_index
        if self.wal_number is not None:
            body["wal_number"] = self.wal_number
        if self.add:
            body["add"] = [
                [lvl, m.number, m.size, m.entries, m.smallest.hex(), m.largest.hex()]
                for lvl, m in self.add
            ]
        if self.remove:
            body["remove"] = [[lvl, num] for lvl, num in self.remove]
        if self.pointers:
            body["pointers"] = {str(k): v.hex() for k, v in sorted(self.pointers.items())}
        return bytes([TAG_MANIFEST_EDIT]) + json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_payload(cls, payload: bytes) -> Edit:
        """Parse a record payload; ``ValueError`` (with the reason) if it is not an edit."""
        if not payload or payload[0] != TAG_MANIFEST_EDIT:
            raise ValueError(f"record tag {payload[:1].hex() or 'none'} is not a manifest edit")
        body = json.loads(payload[1:])
        if not isinstance(body, dict):
            raise ValueError("edit body is not a JSON object")
        edit = cls(
            next_file=body.get("next_file"),
            applied_index=body.get("applied_index"),
            wal_number=body.get("wal_number"),
        )
        for lvl, num, size, entries, lo, hi in body.get("add", []):
            edit.add.append(
                (
                    int(lvl),
                    TableMeta(
                        int(num), int(size), int(entries), bytes.fromhex(lo), bytes.fromhex(hi)
                    ),
                )
            )
        edit.remove = [(int(lvl), int(num)) for lvl, num in body.get("remove", [])]
        edit.pointers = {int(k): bytes.fromhex(v) for k, v in body.get("pointers", {}).items()}
        return edit


@dataclass
class VersionState:
    """The manifest's view of the store: tables per level and the counters."""

    next_file: int = 1
    applied_index: int = 0
    wal_number: int = 0
    levels: list[dict[int, TableMeta]] = field(
        default_factory=lambda: [{} for _ in range(NUM_LEVELS)]
    )
    pointers: dict[int, bytes] = field(default_factory=dict)

    def apply(self, edit: Edit) -> None:
        """Apply ``edit`` in place; ``ValueError`` if it removes a table that is not there."""
        for lvl, num in edit.remove:
            if not 0 <= lvl < NUM_LEVELS or num not in self.levels[lvl]:
                raise ValueError(f"edit removes table {num} from level {lvl}, which lacks it")
            del self.levels[lvl][num]
        for lvl, meta in edit.add:
            if not 0 <= lvl < NUM_LEVELS:
                raise ValueError(f"edit adds table {meta.number} to level {lvl}")
            self.levels[lvl][meta.number] = meta
        if edit.next_file is not None:
            self.next_file = max(self.next_file, edit.next_file)
        if edit.applied_index is not None:
            self.applied_index = max(self.applied_index, edit.applied_index)
        if edit.wal_number is not None:
            self.wal_number = max(self.wal_number, edit.wal_number)
        self.pointers.update(edit.pointers)

    def snapshot_edit(self) -> Edit:
        """One edit that rebuilds this whole state from an empty version."""
        return Edit(
            add=[(lvl, m) for lvl, tables in enumerate(self.levels) for m in tables.values()],
            next_file=self.next_file,
            applied_index=self.applied_index,
            wal_number=self.wal_number,
            pointers=dict(self.pointers),
        )

    def live_numbers(self) -> set[int]:
        """Numbers of every table in the version."""
        return {num for tables in self.levels for num in tables}


def read_manifest(path: str, fs: FileSystem | None = None) -> tuple[VersionState, bytes, int]:
    """Load ``path``: returns ``(state, file bytes, number of edits)``.

    Raises :class:`CorruptionError` naming the file and the offset of the first damaged or
    invalid record.
    """
    data = (fs or local_fs()).read_all(path)
    if not data.startswith(SEPARATOR):
        raise CorruptionError(path, 0, "manifest does not start with a record separator")
    report = verify(data)
    if report.damaged:
        bad = report.damaged[0]
        raise CorruptionError(path, bad.start, "manifest record fails its checksum")
    state = VersionState()
    count = 0
    for rec in scan(data):
        try:
            state.apply(Edit.from_payload(rec.payload))
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptionError(path, rec.offset, f"invalid manifest edit: {e}") from None
        count += 1
    if count == 0:
        raise CorruptionError(path, 0, "manifest holds no edit")
    return state, data, count


class Manifest:
    """Writer side: installs edits atomically and keeps the state they add up to."""

    def __init__(
        self, fs: FileSystem, directory: str, state: VersionState, data: bytes, edits: int
    ) -> None:
        self._fs = fs
        self.path = os.path.join(directory, MANIFEST_NAME)
        self.state = state
        self._data = data
        self._edits = edits

    @classmethod
    def create(cls, fs: FileSystem, directory: str, state: VersionState) -> Manifest:
        """Write a fresh manifest holding ``state`` as one snapshot edit."""
        m = cls(fs, directory, state, b"", 0)
        m._rewrite()
        return m

    def _rewrite(self) -> None:
        data = SEPARATOR + encode_record(self.state.snapshot_edit().to_payload())
        self._fs.write_atomic(self.path, data)
        self._data, self._edits = data, 1

    def install(self, edit: Edit) -> None:
        """Apply ``edit`` and make it durable before returning (write, fsync, rename, fsync dir).

        If writing fails the in-memory state is rolled back, so state and file always agree.
        """
        before = VersionState(
            self.state.next_file,
            self.state.applied_index,
            self.state.wal_number,
            [dict(t) for t in self.state.levels],
            dict(self.state.pointers),
        )
        self.state.apply(edit)
        try:
            if self._edits >= MAX_EDITS:
                self._rewrite()
            else:
                data = self._data + encode_record(edit.to_payload())
                self._fs.write_atomic(self.path, data)
                self._data, self._edits = data, self._edits + 1
        except BaseException:
            self.state = before
            raise
