"""Offline verification of a store directory (``gateway store verify DIR``).

Checks the manifest (every record's CRC and every edit), every table it names (metadata
records at open, then every data block: CRC, structure, key order, counts) and every WAL file
(a torn tail is reported as a note, not as corruption). Never raises on damaged data: each
problem becomes one line ``file: byte offset N: reason``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from gateway.core.fileio import FileSystem, local_fs
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.errors import CorruptionError
from gateway.core.lsm.manifest import MANIFEST_NAME, read_manifest
from gateway.core.lsm.memtable_log import replay_memtable_log
from gateway.core.lsm.sstable_reader import SSTableReader

__all__ = ["NotAStoreError", "VerifyReport", "verify_store"]

_FILE_RE = re.compile(r"^(\d{6,})\.(sst|wal)$")


class NotAStoreError(ValueError):
    """The directory does not exist or holds no manifest."""


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_store`: problems (corruption) and notes (harmless findings)."""

    tables: int = 0
    entries: int = 0
    bytes: int = 0
    applied_index: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_store(path: str, fs: FileSystem | None = None) -> VerifyReport:
    """Verify the store in ``path``; raises :class:`NotAStoreError` if it is not one."""
    fs = fs or local_fs()
    if not fs.is_dir(path):
        raise NotAStoreError(f"{path}: no such directory")
    manifest = os.path.join(path, MANIFEST_NAME)
    if not fs.exists(manifest):
        raise NotAStoreError(f"{path}: no {MANIFEST_NAME}; not an LSM store directory")
    report = VerifyReport()
    try:
        state, _, _ = read_manifest(manifest, fs)
    except CorruptionError as e:
        report.problems.append(str(e))
        return report
    report.applied_index = state.applied_index
    cache = BlockCache(0)
    live = set()
    for tables in state.levels:
        for number in tables:
            live.add(number)
            table_path = os.path.join(path, f"{number:06d}.sst")
            if not fs.exists(table_path):
                report.problems.append(
                    f"{table_path}: byte offset 0: table named by the manifest is missing"
                )
                continue
            try:
                reader = SSTableReader(table_path, number, cache, fs=fs)
            except CorruptionError as e:
                report.problems.append(str(e))
                continue
            try:
                reader.verify_all()
                report.tables += 1
                report.entries += reader.entries
                report.bytes += reader.size
            except CorruptionError as e:
                report.problems.append(str(e))
            finally:
                reader.close()
    for name in fs.listdir(path):
        m = _FILE_RE.match(name)
        if not m:
            continue
        full = os.path.join(path, name)
        if m.group(2) == "sst" and int(m.group(1)) not in live:
            report.notes.append(f"{full}: not in the manifest (orphan; removed at next open)")
        elif m.group(2) == "wal" and int(m.group(1)) >= state.wal_number:
            try:
                for _ in replay_memtable_log(full, fs):
                    pass
            except CorruptionError as e:
                report.problems.append(str(e))
    return report
