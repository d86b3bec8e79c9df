"""Snapshot export and import: a store's state as a set of files with a checksum manifest.

Used for Raft InstallSnapshot. ``export_snapshot(store, dest)`` flushes the store, then
hard-links (or copies) every table of the current version into ``dest`` and writes
``SNAPSHOT``, a record stream of one header record (tag ``0xEC``: format, applied log index,
file count) and one record per file (tag ``0xED``: name, level, size, CRC-32C of the whole
file -- the store computes it as it writes a table (``SSTableWriter.file_crc``), and for a
table it opened from disk once, kept by number in ``LSMStore.table_crcs``, since tables never
change -- entries, key range), all JSON. ``import_snapshot(src, dest)`` checks every
file against its size and checksum before it creates a store in ``dest`` whose manifest is
built from the layout; a mismatch raises :class:`~.errors.CorruptionError` naming the file.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import crc32c as _crc32c

from gateway.core.fileio import FileSystem, local_fs
from gateway.core.lsm.errors import CorruptionError, InvalidArgumentError
from gateway.core.lsm.format import TAG_SNAPSHOT_FILE, TAG_SNAPSHOT_HEADER
from gateway.core.lsm.manifest import NUM_LEVELS, Manifest, VersionState
from gateway.core.lsm.sstable_writer import TableMeta
from gateway.core.records import SEPARATOR, encode_record, scan, verify

if TYPE_CHECKING:
    from gateway.core.lsm.store import LSMStore

__all__ = ["SNAPSHOT_NAME", "check_export_files", "export_snapshot", "file_crc32c",
           "import_snapshot", "read_snapshot_manifest"]

SNAPSHOT_NAME = "SNAPSHOT"


def file_crc32c(path: str, fs: FileSystem | None = None) -> int:
    """CRC-32C (standard form) of the whole file at ``path``."""
    crc = 0
    reader = (fs or local_fs()).open_readable(path)
    try:
        offset = 0
        while chunk := reader.pread(offset, 1 << 20):
            crc = _crc32c.crc32c(chunk, crc)
            offset += len(chunk)
    finally:
        reader.close()
    return crc


def _record(tag: int, body: dict[str, object]) -> bytes:
    return encode_record(
        bytes([tag]) + json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    )


def export_snapshot(store: LSMStore, dest: str, fs: FileSystem | None = None) -> int:
    """Write the store's state into the new directory ``dest``; return its applied index.

    May run on any thread while other threads keep writing, flushing and compacting. The
    export is exactly the store's state at the returned index ``i``, and ``i`` is at least
    the applied index of the moment of the call:

    - ``flush`` puts every write made before the call into tables (``i`` covers them);
    - the version and the durable applied index are read together under the version lock,
      and flush installs both in one step (``_install``). Memtables are flushed whole and
      oldest first, and a write batch carries one log index and lands in one memtable, so
      the tables of that version hold exactly the writes with log index ``<= i`` (writes
      made meanwhile are in newer memtables, not in the version);
    - the store is pinned before the version is read, so a compaction that replaces its
      tables defers deleting them until the files are linked into ``dest``; table files are
      immutable, so the links are the version's contents.
    """
    from gateway.core.lsm.store import table_name

    fs = fs or store._fs
    if fs.exists(dest) and fs.listdir(dest):
        raise InvalidArgumentError(f"{dest}: export target must be a new or empty directory")
    fs.makedirs(dest)
    store.flush()
    with store._pinned():
        with store._version_lock:
            version = store._version
            applied = store.durable_applied_index
        records = [SEPARATOR]
        files = list(version.tables())
        records.append(
            _record(
                TAG_SNAPSHOT_HEADER, {"format": 1, "applied_index": applied, "files": len(files)}
            )
        )
        crcs = store.table_crcs  # tables never change: each one's CRC is computed once
        for level, table in files:
            name = table_name(table.number)
            target = os.path.join(dest, name)
            fs.link(table.path, target)
            crc = table.file_crc if table.file_crc is not None else crcs.get(table.number)
            if crc is None:
                crc = crcs[table.number] = file_crc32c(target, fs)
            records.append(
                _record(
                    TAG_SNAPSHOT_FILE,
                    {
                        "name": name,
                        "level": level,
                        "number": table.number,
                        "size": table.size,
                        "crc32c": crc,
                        "entries": table.entries,
                        "smallest": table.smallest.hex(),
                        "largest": table.largest.hex(),
                    },
                )
            )
        live = {table.number for _, table in files}
        for number in [n for n in crcs if n not in live]:
            del crcs[number]
    fs.write_atomic(os.path.join(dest, SNAPSHOT_NAME), b"".join(records))
    return applied


def read_snapshot_manifest(
    src: str, fs: FileSystem | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """Parse ``src/SNAPSHOT``: ``(applied_index, file records)``; raises CorruptionError."""
    path = os.path.join(src, SNAPSHOT_NAME)
    try:
        data = (fs or local_fs()).read_all(path)
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"{src}: no {SNAPSHOT_NAME} file; not a snapshot export"
        ) from None
    report = verify(data)
    if report.damaged:
        raise CorruptionError(path, report.damaged[0].start, "snapshot record fails its checksum")
    header: dict[str, Any] | None = None
    files: list[dict[str, Any]] = []
    for rec in scan(data):
        try:
            body = json.loads(rec.payload[1:])
        except ValueError:
            raise CorruptionError(path, rec.offset, "snapshot record is not JSON") from None
        tag = rec.payload[0]
        if tag == TAG_SNAPSHOT_HEADER and header is None:
            header = body
        elif tag == TAG_SNAPSHOT_FILE and header is not None:
            files.append(body)
        else:
            raise CorruptionError(path, rec.offset, f"unexpected record tag {tag:#x}")
    if header is None or header.get("format") != 1 or header.get("files") != len(files):
        raise CorruptionError(path, 0, "snapshot header missing or file count mismatch")
    return int(header["applied_index"]), files


def check_export_files(
    src: str, files: list[dict[str, Any]], fs: FileSystem | None = None, *, checksums: bool = True
) -> None:
    """Check that every file the manifest records ``files`` (``read_snapshot_manifest``) list
    is in ``src`` with its size and, with ``checksums``, its CRC-32C (read whole); raises
    :class:`~.errors.CorruptionError` naming the first that is not."""
    fs = fs or local_fs()
    for f in files:
        path = os.path.join(src, f["name"])
        if not fs.exists(path):
            raise CorruptionError(path, 0, "file listed in the snapshot is missing")
        size = fs.size(path)
        if size != f["size"]:
            raise CorruptionError(
                path, min(size, f["size"]), f"size {size}, snapshot says {f['size']}"
            )
        if checksums:
            crc = file_crc32c(path, fs)
            if crc != f["crc32c"]:
                raise CorruptionError(
                    path, 0, f"crc32c {crc:#010x}, snapshot says {f['crc32c']:#010x}"
                )


def import_snapshot(src: str, dest: str, fs: FileSystem | None = None) -> int:
    """Verify the export in ``src`` and create a store from it in ``dest``; return applied index.

    ``dest`` must be new or empty. Nothing is created in ``dest`` unless every file checks out.
    """
    fs = fs or local_fs()
    applied, files = read_snapshot_manifest(src, fs)
    check_export_files(src, files, fs)
    if fs.exists(dest) and fs.listdir(dest):
        raise InvalidArgumentError(f"{dest}: import target must be a new or empty directory")
    fs.makedirs(dest)
    state = VersionState(applied_index=applied)
    for f in files:
        level = int(f["level"])
        if not 0 <= level < NUM_LEVELS:
            raise CorruptionError(
                os.path.join(src, SNAPSHOT_NAME), 0, f"level {level} out of range"
            )
        fs.link(os.path.join(src, f["name"]), os.path.join(dest, f["name"]))
        meta = TableMeta(
            int(f["number"]),
            int(f["size"]),
            int(f["entries"]),
            bytes.fromhex(f["smallest"]),
            bytes.fromhex(f["largest"]),
        )
        state.levels[level][meta.number] = meta
        state.next_file = max(state.next_file, meta.number + 1)
    fs.sync_dir(dest)
    Manifest.create(fs, dest, state)
    return applied
