"""Raft snapshots of a node on disk, and the byte archive they travel in.

A snapshot is the LSM store exported at an applied index (``gateway.core.lsm.export``) packed
into one byte string, the ``data`` of a Raft ``Snapshot``::

    archive = magic "GWSNAP1\\n", then per file: name_len u16 BE, name, size u64 BE, bytes

Files in the snapshot directory (``DATA/raft/snapshots``):

- ``NNNNNNNNNNNNNNNNNNNN.snap``: the archive of the snapshot at index N (20 digits);
- ``CURRENT``: JSON ``{"index", "term", "conf_state": {...}}`` of the newest snapshot, written
  atomically (temporary file, fsync, rename, directory fsync) after its archive is durable.

Opening checks ``CURRENT`` (``SnapshotMetadataError``) and the framing of its archive
(``check_archive``: ``SnapshotArchiveError``), naming the file and byte offset. Only the
newest snapshot is kept. ``SnapshotFiles`` is thread-safe: ``load`` (the Raft core
sending a snapshot, on the event-loop thread) may run while ``save`` or ``commit`` replaces the
newest snapshot on another thread and sees either the old snapshot or the new one, whole (the
metadata switch and the removal of the old archive happen under the lock ``load`` opens the
archive under). Writers (``save``, ``stage``, ``commit``) must be serialized by the caller
(``RaftLogStorage`` does).
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Iterable, Iterator

from gateway.core.fileio import FileSystem, local_fs
from gateway.raft import ConfState, Snapshot, SnapshotMetadata

__all__ = ["SnapshotArchiveError", "SnapshotFiles", "SnapshotMetadataError", "archive_chunks",
           "check_archive", "pack_dir", "unpack_dir"]

_MAGIC = b"GWSNAP1\n"
_NAME = struct.Struct(">H")
_SIZE = struct.Struct(">Q")


class SnapshotArchiveError(ValueError):
    """A snapshot archive is malformed; ``str()`` names the byte offset."""


class SnapshotMetadataError(ValueError):
    """A snapshot metadata file (``CURRENT``, ``N.pending``) is damaged; ``str()`` is one line
    naming the file and the byte offset."""


def _read_metadata(path: str) -> SnapshotMetadata:
    """The metadata in the JSON file ``path``; ``SnapshotMetadataError`` if it is damaged
    (empty, truncated, not UTF-8, not JSON, missing or mistyped fields)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SnapshotMetadataError(f"{path}: byte {exc.start}: not UTF-8 text (damaged "
                                    f"snapshot metadata)") from None
    except json.JSONDecodeError as exc:
        raise SnapshotMetadataError(f"{path}: byte {exc.pos}: not valid JSON ({exc.msg}; "
                                    f"file of {len(raw)} bytes, damaged snapshot "
                                    f"metadata)") from None
    try:
        meta = SnapshotMetadata(_conf_from_json(doc["conf_state"]), int(doc["index"]),
                                int(doc["term"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotMetadataError(f"{path}: byte 0: snapshot metadata lacks a valid "
                                    f"field ({type(exc).__name__}: {exc})") from None
    if meta.index < 0 or meta.term < 0 or (meta.index > 0 and not meta.conf_state.voters
                                           and not meta.conf_state.voters_outgoing):
        raise SnapshotMetadataError(f"{path}: byte 0: snapshot metadata out of range "
                                    f"(index {meta.index}, term {meta.term}, no voters)")
    return meta


_CHUNK = 1 << 20


def archive_chunks(directory: str) -> Iterator[bytes]:
    """The archive of every regular file directly in ``directory`` (sorted by name), in
    pieces of at most 1 MiB read as they are consumed (``FileSystem.write_atomic`` writes a
    store's archive this way without ever holding it whole). The files must not change
    meanwhile (an export's are links to immutable tables): one whose size moved raises
    ``OSError``."""
    yield _MAGIC
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        raw = name.encode()
        expected = os.path.getsize(path)
        yield _NAME.pack(len(raw)) + raw + _SIZE.pack(expected)
        copied = 0
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                copied += len(chunk)
                yield chunk
        if copied != expected:
            raise OSError(f"{path}: {copied} bytes read, {expected} expected (the file "
                          f"changed while it was archived)")


def pack_dir(directory: str) -> bytes:
    """The archive of every regular file directly in ``directory`` (sorted by name)."""
    return b"".join(archive_chunks(directory))


def unpack_dir(data: bytes, directory: str, fs: FileSystem | None = None) -> int:
    """Write the files of archive ``data`` into the new directory ``directory``, each synced,
    and sync the directory; return the file count. Raises ``SnapshotArchiveError`` on a
    malformed archive."""
    fs = fs or local_fs()
    if not data.startswith(_MAGIC):
        raise SnapshotArchiveError("snapshot archive: bad magic at offset 0")
    fs.makedirs(directory)
    pos, count, view = len(_MAGIC), 0, memoryview(data)
    while pos < len(data):
        if pos + _NAME.size > len(data):
            raise SnapshotArchiveError(f"snapshot archive: truncated name at offset {pos}")
        (n,) = _NAME.unpack_from(data, pos)
        name = bytes(view[pos + 2 : pos + 2 + n]).decode()
        pos += 2 + n
        if "/" in name or name in ("", ".", "..") or pos + _SIZE.size > len(data):
            raise SnapshotArchiveError(f"snapshot archive: bad entry at offset {pos}")
        (size,) = _SIZE.unpack_from(data, pos)
        pos += _SIZE.size
        if pos + size > len(data):
            raise SnapshotArchiveError(f"snapshot archive: {name} truncated at offset {pos}")
        out = fs.create(os.path.join(directory, name))
        try:
            out.write(view[pos : pos + size])  # type: ignore[arg-type]
            out.sync()
        finally:
            out.close()
        pos += size
        count += 1
    fs.sync_dir(directory)
    return count


def check_archive(path: str) -> None:
    """Check the framing of the archive file ``path`` without reading the files it holds
    (their own checksums are checked when a snapshot is imported): the magic, every name and
    size field, and that the last file ends exactly at the end. Raises
    ``SnapshotArchiveError`` naming the file and byte offset."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if f.read(len(_MAGIC)) != _MAGIC:
            raise SnapshotArchiveError(f"{path}: byte 0: not a snapshot archive (bad magic; "
                                       f"file of {size} bytes)")
        pos = len(_MAGIC)
        while pos < size:
            head = f.read(_NAME.size)
            (n,) = _NAME.unpack(head) if len(head) == _NAME.size else (-1,)
            name = f.read(n) if n > 0 else b""
            raw = f.read(_SIZE.size)
            if n <= 0 or len(name) != n or len(raw) != _SIZE.size or b"/" in name:
                raise SnapshotArchiveError(f"{path}: byte {pos}: bad or truncated file entry")
            (length,) = _SIZE.unpack(raw)
            body = pos + _NAME.size + n + _SIZE.size
            if body + length > size:
                raise SnapshotArchiveError(
                    f"{path}: byte {pos}: entry {name.decode(errors='replace')!r} of {length} "
                    f"bytes runs past the end of the file ({size} bytes): truncated")
            pos = body + length
            f.seek(pos)


def _conf_to_json(cs: ConfState) -> dict[str, object]:
    return {"voters": list(cs.voters), "learners": list(cs.learners),
            "voters_outgoing": list(cs.voters_outgoing),
            "learners_next": list(cs.learners_next), "auto_leave": cs.auto_leave}


def _conf_from_json(d: dict[str, object]) -> ConfState:
    def ids(key: str) -> tuple[int, ...]:
        return tuple(int(x) for x in d.get(key, ()))  # type: ignore[attr-defined]

    return ConfState(ids("voters"), ids("learners"), ids("voters_outgoing"),
                     ids("learners_next"), bool(d.get("auto_leave", False)))


class SnapshotFiles:
    """The newest snapshot of one node: metadata in memory, archive on disk."""

    def __init__(self, directory: str, fs: FileSystem | None = None) -> None:
        self.directory = directory
        self._fs = fs or local_fs()
        self._fs.makedirs(directory)
        self._lock = threading.Lock()
        self._meta = SnapshotMetadata()
        current = os.path.join(directory, "CURRENT")
        if os.path.exists(current):
            self._meta = _read_metadata(current)
            if os.path.exists(self._path(self._meta.index)):  # (bootstrap: no archive)
                check_archive(self._path(self._meta.index))

    @property
    def metadata(self) -> SnapshotMetadata:
        """Metadata of the newest snapshot (index 0 when there is none)."""
        return self._meta

    def _path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:020d}.snap")

    def size(self) -> int:
        """Bytes of the newest snapshot's archive on disk (0 when there is none, or for the
        bootstrap snapshot, which has no file)."""
        with self._lock:
            index = self._meta.index
        try:
            return os.path.getsize(self._path(index)) if index else 0
        except FileNotFoundError:
            return 0

    def save(self, meta: SnapshotMetadata, data: bytes | Iterable[bytes]) -> int:
        """Make the snapshot ``meta``/``data`` the newest, durably; older ones are removed.
        ``data``: the archive, or its chunks (``archive_chunks``); returns its size."""
        size = self.stage(meta, data)
        self.commit(meta)
        return size

    def stage(self, meta: SnapshotMetadata, data: bytes | Iterable[bytes]) -> int:
        """Write the archive of ``meta``/``data`` (bytes or chunks) and its metadata
        (``N.pending``), durably, without making it the newest: `commit` (or `commit_pending`
        after a crash) does. Returns the archive's size."""
        path = self._path(meta.index)
        size = self._fs.write_atomic(path, data)
        self._write_json(path[: -len(".snap")] + ".pending", meta)
        return size

    def commit_pending(self, index: int) -> bool:
        """Finish an install interrupted after its log reset: make the staged snapshot at
        ``index`` the newest. False if there is none."""
        pending = self._path(index)[: -len(".snap")] + ".pending"
        if not os.path.exists(pending) or not os.path.exists(self._path(index)):
            return False
        self.commit(_read_metadata(pending))
        return True

    def _write_json(self, path: str, meta: SnapshotMetadata) -> None:
        doc = {"index": meta.index, "term": meta.term,
               "conf_state": _conf_to_json(meta.conf_state)}
        self._fs.write_atomic(path, json.dumps(doc).encode())

    def commit(self, meta: SnapshotMetadata) -> None:
        """Make the staged snapshot ``meta`` the newest (``CURRENT``); older ones go."""
        path = self._path(meta.index)
        self._write_json(os.path.join(self.directory, "CURRENT"), meta)
        with self._lock:  # a concurrent ``load`` opened the old archive already, or sees meta
            self._meta = meta
            for name in os.listdir(self.directory):
                if (name.endswith(".snap") and name != os.path.basename(path)) or name.endswith(
                        ".pending"):
                    self._fs.discard(os.path.join(self.directory, name))

    def load(self) -> Snapshot:
        """The newest snapshot with its data (an empty ``Snapshot`` when there is none)."""
        with self._lock:  # open under the lock: ``commit`` removes the old archive under it
            meta = self._meta
            if meta.index == 0:
                return Snapshot()
            try:
                f = open(self._path(meta.index), "rb")  # noqa: SIM115 (closed below)
            except FileNotFoundError:
                return Snapshot(meta, _MAGIC)  # bootstrap snapshot: an empty store
        with f:
            return Snapshot(meta, f.read())

    def save_metadata_only(self, meta: SnapshotMetadata) -> None:
        """Record a snapshot whose data is the empty store (cluster bootstrap)."""
        self.save(meta, _MAGIC)
