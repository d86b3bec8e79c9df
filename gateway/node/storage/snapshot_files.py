"""Raft snapshots of a node on disk, and the byte archive they travel in.

A snapshot is the LSM store exported at an applied index (``gateway.core.lsm.export``: its
tables hard-linked, and a ``SNAPSHOT`` manifest with every file's size and CRC-32C). It
travels as one byte string, the ``data`` of a Raft ``Snapshot``::

    archive = magic "GWSNAP1\\n", then per file: name_len u16 BE, name, size u64 BE, bytes

Files in the snapshot directory (``DATA/raft/snapshots``):

- ``NNNNNNNNNNNNNNNNNNNN.snapdir/``: a snapshot this node took at index N (20 digits): the
  export directory itself, moved here -- links to the store's immutable tables and the
  manifest, so taking a snapshot writes no table bytes (RocksDB's checkpoints do the same).
  Its archive is read from the files, a range at a time, as it is sent (``load`` returns an
  ``ArchiveReader``: a leader never holds a follower's snapshot whole).
- ``NNNNNNNNNNNNNNNNNNNN.snap``: the archive of a snapshot at index N received from the
  leader (or written by a version before the directories);
- ``CURRENT``: JSON ``{"index", "term", "conf_state": {...}}`` of the newest snapshot, written
  atomically (temporary file, fsync, rename, directory fsync) after its data is durable.

Opening checks ``CURRENT`` (``SnapshotMetadataError``) and the newest snapshot's data without
reading the tables (``SnapshotArchiveError`` naming the file and byte offset): an archive's
framing (``check_archive``), or a directory's manifest and every file it lists, present with
its size (``check_snapshot_dir``); the tables' checksums are checked when a snapshot is
imported. Only the newest snapshot is kept. ``SnapshotFiles`` is thread-safe: ``load`` (the
Raft core sending a snapshot, on the event-loop thread) may run while ``save``, ``save_dir``
or ``commit`` replaces the newest snapshot on another thread and sees either the old snapshot
or the new one, whole (the metadata switch and the removal of the old files happen under the
lock ``load`` opens the files under). Writers (``save``, ``save_dir``, ``stage``, ``commit``)
must be serialized by the caller (``RaftLogStorage`` does).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import itertools
import json
import os
import shutil
import struct
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Literal, TypedDict

from gateway.core.fileio import FileSystem, WritableFile, local_fs
from gateway.core.lsm.errors import CorruptionError, InvalidArgumentError
from gateway.core.lsm.export import SNAPSHOT_NAME, check_export_files, read_snapshot_manifest
from gateway.raft import ConfState, Snapshot, SnapshotMetadata

__all__ = ["ArchiveReader", "FileSpool", "SnapshotArchiveError", "SnapshotFiles",
           "SnapshotMetadataError", "SpooledArchive", "archive_chunks", "archive_size",
           "check_archive", "check_snapshot_dir", "pack_dir", "unpack_dir"]

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
#: Incoming snapshots are spooled (``FileSpool``) to ``incoming-<n>.spool`` files in the
#: snapshot directory, ``n`` counting transfers since the process started.
_SPOOL_SUFFIX = ".spool"


def _regular_files(directory: str) -> list[tuple[str, str, int]]:
    """``(name, path, size)`` of every regular file directly in ``directory``, by name."""
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            out.append((name, path, os.path.getsize(path)))
    return out


def _framed(files: Iterable[tuple[str, str, int]]) -> Iterator[bytes]:
    """The archive of ``(name, path, size)``: each file opened and read in pieces of at most
    1 MiB; a file whose length is not ``size`` raises ``OSError``."""
    yield _MAGIC
    for name, path, expected in files:
        raw = name.encode()
        yield _NAME.pack(len(raw)) + raw + _SIZE.pack(expected)
        copied = 0
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                copied += len(chunk)
                yield chunk
        if copied != expected:
            raise OSError(f"{path}: {copied} bytes read, {expected} expected (the file "
                          f"changed while it was archived)")


#: One piece of an ``ArchiveReader``: bytes as they are (the magic, a file's header), or
#: ``(path, fd, size)``: ``size`` bytes of the open file ``fd`` from its start.
_Part = bytes | tuple[str, int, int]


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class ArchiveReader:
    """A snapshot archive read from open files a byte range at a time, never held whole:
    ``len(reader)``, ``reader[a:b]`` (those bytes, read now; what the Raft core's snapshot
    sender slices into chunks), ``bytes(reader)`` (all of it), ``iter(reader)`` (it in pieces
    of at most 1 MiB: what ``write_atomic`` takes). The files are open from the
    moment it is made, so removing them afterwards (a newer snapshot's ``commit``) does not
    disturb it; they are closed by ``close()`` or when the reader is collected. A file
    shorter than it was when opened raises ``OSError`` naming it (the archive is not silently
    cut short)."""

    __slots__ = ("__weakref__", "_closer", "_parts", "_size", "_starts")

    def __init__(self, parts: list[_Part], fds: list[int]) -> None:
        self._parts = parts
        self._starts: list[int] = []
        pos = 0
        for part in parts:
            self._starts.append(pos)
            pos += len(part) if isinstance(part, bytes) else part[2]
        self._size = pos
        self._closer = weakref.finalize(self, _close_fds, fds)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice):
            raise TypeError("an archive reader is read by slices: reader[a:b]")
        start, stop, step = key.indices(self._size)
        if step != 1:
            raise ValueError("an archive reader reads contiguous ranges (step 1)")
        out: list[bytes] = []
        pos = start
        i = bisect.bisect_right(self._starts, start) - 1
        while pos < stop:
            part, base = self._parts[i], self._starts[i]
            if isinstance(part, bytes):
                piece = part[pos - base:stop - base]
            else:
                path, fd, size = part
                want = min(stop, base + size) - pos
                piece = os.pread(fd, want, pos - base)
                while 0 < len(piece) < want:  # a short read that is not the end of the file
                    more = os.pread(fd, want - len(piece), pos - base + len(piece))
                    if not more:
                        break
                    piece += more
                if len(piece) != want:
                    raise OSError(f"{path}: ended at byte {pos - base + len(piece)}, "
                                  f"{size} expected (the file changed while it was archived)")
            out.append(piece)
            pos += len(piece)
            i += 1
        return out[0] if len(out) == 1 else b"".join(out)

    def __bytes__(self) -> bytes:
        return self[:]

    def __iter__(self) -> Iterator[bytes]:
        """The archive in pieces of at most 1 MiB, read as they are consumed."""
        for at in range(0, self._size, _CHUNK):
            yield self[at : at + _CHUNK]

    def close(self) -> None:
        """Close the files (idempotent)."""
        self._closer()


class FileSpool:
    """The Raft core's ``SnapshotSpool`` on disk: an incoming snapshot's archive written to
    ``path`` (a name of its own) as its chunks arrive (to the page cache: no sync per chunk),
    so a follower never holds a snapshot whole. ``finish`` returns a ``SpooledArchive``
    reading it back; ``SnapshotFiles.stage`` syncs and renames that file into place instead
    of copying it (``keep_as``); ``discard`` removes it -- also done when a finished archive
    that was never staged (the core refused the snapshot) is collected."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.path = path
        self._fs = fs
        self._out: WritableFile | None = fs.create(path)

    def append(self, data: bytes) -> None:
        assert self._out is not None, "append after finish or discard"
        self._out.write(data)

    def finish(self) -> SpooledArchive:
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return SpooledArchive(self, [(self.path, fd, os.fstat(fd).st_size)], [fd])

    def keep_as(self, path: str) -> None:
        """Sync the spooled archive and rename it to ``path`` (same directory), durably."""
        assert self._out is not None, "keep_as after discard"
        self._out.sync()
        self._out.close()
        self._out = None
        self._fs.rename(self.path, path)
        self._fs.sync_dir(os.path.dirname(path) or ".")
        self.path = path

    def discard(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
            self._fs.discard(self.path)


class SpooledArchive(ArchiveReader):
    """An ``ArchiveReader`` over a ``FileSpool``'s file (what ``FileSpool.finish`` returns):
    ``SnapshotFiles.stage`` keeps the file itself (``spool.keep_as``)."""

    __slots__ = ("spool",)

    def __init__(self, spool: FileSpool, parts: list[_Part], fds: list[int]) -> None:
        super().__init__(parts, fds)
        self.spool = spool
        weakref.finalize(self, spool.discard)  # a no-op once kept

    def keep_as(self, path: str) -> None:
        """Keep the spooled file as ``path`` (``FileSpool.keep_as``); the reader goes on
        reading it through the descriptor it holds, and its errors name ``path`` from now on
        (the spool's name no longer exists)."""
        old = self.spool.path
        self.spool.keep_as(path)
        self._parts = [(path, part[1], part[2])
                       if not isinstance(part, bytes) and part[0] == old else part
                       for part in self._parts]


def archive_chunks(directory: str) -> Iterator[bytes]:
    """The archive of every regular file directly in ``directory`` (sorted by name), in
    pieces of at most 1 MiB read as they are consumed (``FileSystem.write_atomic`` can write
    a store's archive this way without ever holding it whole). The files must not change
    meanwhile (an export's are links to immutable tables): one whose size moved raises
    ``OSError``."""
    return _framed(_regular_files(directory))


def archive_size(directory: str) -> int:
    """Bytes of ``archive_chunks(directory)``, from the files' sizes (nothing is read)."""
    return len(_MAGIC) + sum(_NAME.size + len(name.encode()) + _SIZE.size + size
                             for name, _, size in _regular_files(directory))


def pack_dir(directory: str) -> bytes:
    """The archive of every regular file directly in ``directory`` (sorted by name)."""
    return b"".join(archive_chunks(directory))


def unpack_dir(data: bytes | ArchiveReader, directory: str,
               fs: FileSystem | None = None) -> int:
    """Write the files of archive ``data`` (bytes, or an ``ArchiveReader``: read a MiB at a
    time) into the new directory ``directory``, each synced, and sync the directory; return
    the file count. Raises ``SnapshotArchiveError`` on a malformed archive."""
    fs = fs or local_fs()
    view = data if isinstance(data, ArchiveReader) else memoryview(data)
    total = len(view)
    if bytes(view[: len(_MAGIC)]) != _MAGIC:
        raise SnapshotArchiveError("snapshot archive: bad magic at offset 0")
    fs.makedirs(directory)
    pos, count = len(_MAGIC), 0
    while pos < total:
        if pos + _NAME.size > total:
            raise SnapshotArchiveError(f"snapshot archive: truncated name at offset {pos}")
        (n,) = _NAME.unpack(view[pos : pos + _NAME.size])
        name = bytes(view[pos + 2 : pos + 2 + n]).decode()
        pos += 2 + n
        if "/" in name or name in ("", ".", "..") or pos + _SIZE.size > total:
            raise SnapshotArchiveError(f"snapshot archive: bad entry at offset {pos}")
        (size,) = _SIZE.unpack(view[pos : pos + _SIZE.size])
        pos += _SIZE.size
        if pos + size > total:
            raise SnapshotArchiveError(f"snapshot archive: {name} truncated at offset {pos}")
        out = fs.create(os.path.join(directory, name))
        try:
            for at in range(pos, pos + size, _CHUNK):
                # (a memoryview slice: ``WritableFile.write`` says bytes, and every file
                # system's takes any bytes-like object)
                out.write(view[at : min(at + _CHUNK, pos + size)])  # type: ignore[arg-type]
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


def check_snapshot_dir(directory: str) -> None:
    """Check a snapshot directory without reading its tables: its ``SNAPSHOT`` manifest
    (record checksums, header, file count) and that every file it lists is there with the
    size it lists (``check_export_files`` without the checksums, which are checked when the
    snapshot is imported). Raises ``SnapshotArchiveError`` naming the file and byte offset."""
    manifest = os.path.join(directory, SNAPSHOT_NAME)
    if not os.path.isfile(manifest):
        raise SnapshotArchiveError(f"{manifest}: byte 0: missing (the manifest of the "
                                   f"snapshot directory)")
    try:
        _, files = read_snapshot_manifest(directory)
    except (CorruptionError, InvalidArgumentError) as exc:
        raise SnapshotArchiveError(f"{exc} (the manifest of the snapshot directory)") from None
    try:
        check_export_files(directory, files, checksums=False)
    except CorruptionError as exc:
        raise SnapshotArchiveError(f"{exc} (a file of the snapshot directory)") from None
    except (KeyError, TypeError) as exc:
        raise SnapshotArchiveError(f"{manifest}: byte 0: a file record lacks a valid name or "
                                   f"size ({type(exc).__name__}: {exc})") from None


class _ConfJson(TypedDict, total=False):
    """A ``ConfState`` in a snapshot's metadata file (a key left out: empty, false)."""

    voters: list[int]
    learners: list[int]
    voters_outgoing: list[int]
    learners_next: list[int]
    auto_leave: bool


def _conf_to_json(cs: ConfState) -> _ConfJson:
    return {"voters": list(cs.voters), "learners": list(cs.learners),
            "voters_outgoing": list(cs.voters_outgoing),
            "learners_next": list(cs.learners_next), "auto_leave": cs.auto_leave}


def _conf_from_json(d: _ConfJson) -> ConfState:
    def ids(key: Literal["voters", "learners", "voters_outgoing", "learners_next"]
            ) -> tuple[int, ...]:
        return tuple(int(x) for x in d.get(key, ()))

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
        for name in os.listdir(directory):  # transfers a restart cut short
            if name.endswith(_SPOOL_SUFFIX):
                self._fs.discard(os.path.join(directory, name))
        self._spools = itertools.count(1)
        current = os.path.join(directory, "CURRENT")
        if os.path.exists(current):
            self._meta = _read_metadata(current)
            if os.path.isdir(self._dir(self._meta.index)):
                check_snapshot_dir(self._dir(self._meta.index))
            elif os.path.exists(self._path(self._meta.index)):  # (bootstrap: no archive)
                check_archive(self._path(self._meta.index))

    @property
    def metadata(self) -> SnapshotMetadata:
        """Metadata of the newest snapshot (index 0 when there is none)."""
        return self._meta

    def _path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:020d}.snap")

    def spool(self, meta: SnapshotMetadata, total: int) -> FileSpool:
        """The Raft core's spool factory (``Config.snapshot_spool``): a ``FileSpool`` of its
        own for the incoming snapshot ``meta``, in this directory so ``stage`` renames it into
        place."""
        name = f"incoming-{next(self._spools)}{_SPOOL_SUFFIX}"
        return FileSpool(self._fs, os.path.join(self.directory, name))

    def _dir(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:020d}.snapdir")

    def size(self) -> int:
        """Bytes of the newest snapshot's archive (0 when there is none, or for the bootstrap
        snapshot, which has no file): the archive file's size, or the size of the archive a
        snapshot directory makes (nothing is read)."""
        with self._lock:
            index = self._meta.index
            if not index:
                return 0
            try:
                if os.path.isdir(self._dir(index)):
                    return archive_size(self._dir(index))
                return os.path.getsize(self._path(index))
            except FileNotFoundError:
                return 0

    def save(self, meta: SnapshotMetadata, data: bytes | Iterable[bytes]) -> int:
        """Make the snapshot ``meta``/``data`` the newest, durably; older ones are removed.
        ``data``: the archive, or its chunks (``archive_chunks``); returns its size."""
        size = self.stage(meta, data)
        self.commit(meta)
        return size

    def save_dir(self, meta: SnapshotMetadata, source: str) -> int:
        """Make the snapshot ``meta`` whose data is the export directory ``source`` the newest,
        durably; older ones are removed. ``source`` (its files immutable: links to the store's
        tables, and the manifest) is *moved* to ``N.snapdir`` (same file system), its entries
        and the move synced. Returns the size of the archive it stands for."""
        target = self._dir(meta.index)
        if os.path.isdir(target):  # moved here by an earlier attempt that never committed
            shutil.rmtree(target)
        self._fs.discard(self._path(meta.index))  # an archive staged at N and never committed
        self._fs.sync_dir(source)  # the links' names (the tables' bytes were synced)
        try:
            self._fs.rename(source, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            # The snapshot directory is on another file system than the data directory:
            # link (there: copy) every file, synced, into a staging name, then rename it.
            staging = target + ".tmp"
            shutil.rmtree(staging, ignore_errors=True)
            self._fs.makedirs(staging)
            for name, path, _ in _regular_files(source):
                self._fs.link(path, os.path.join(staging, name))
            self._fs.sync_dir(staging)
            self._fs.rename(staging, target)
        self._fs.sync_dir(self.directory)
        self.commit(meta)
        return archive_size(target)

    def stage(self, meta: SnapshotMetadata, data: bytes | Iterable[bytes]) -> int:
        """Write the archive of ``meta``/``data`` (bytes, chunks or an ``ArchiveReader``; a
        ``SpooledArchive``'s file is synced and renamed, not copied) and its metadata
        (``N.pending``), durably, without making it the newest: `commit` (or
        `commit_pending` after a crash) does. Returns the archive's size."""
        path = self._path(meta.index)
        shutil.rmtree(self._dir(meta.index), ignore_errors=True)  # one never committed
        if isinstance(data, SpooledArchive):
            data.keep_as(path)
            size = len(data)
        else:
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
        keep = {os.path.basename(self._path(meta.index)), os.path.basename(self._dir(meta.index))}
        self._write_json(os.path.join(self.directory, "CURRENT"), meta)
        with self._lock:  # a concurrent ``load`` opened the old files already, or sees meta
            self._meta = meta
            for name in os.listdir(self.directory):
                path = os.path.join(self.directory, name)
                if name.endswith(".snapdir") and name not in keep:
                    shutil.rmtree(path, ignore_errors=True)
                elif (name.endswith(".snap") and name not in keep) or name.endswith(".pending"):
                    self._fs.discard(path)

    def load(self) -> Snapshot:
        """The newest snapshot (an empty ``Snapshot`` when there is none); its ``data`` an
        ``ArchiveReader`` over the snapshot's files, opened now and read as it is sliced."""
        with self._lock:  # open under the lock: ``commit`` removes the old files under it
            meta = self._meta
            if meta.index == 0:
                return Snapshot()
            directory = self._dir(meta.index)
            fds: list[int] = []
            parts: list[_Part] = []
            try:
                if os.path.isdir(directory):
                    parts.append(_MAGIC)
                    for name, path, _ in _regular_files(directory):
                        fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                        size = os.fstat(fds[-1]).st_size
                        raw = name.encode()
                        parts.append(_NAME.pack(len(raw)) + raw + _SIZE.pack(size))
                        parts.append((path, fds[-1], size))
                else:
                    path = self._path(meta.index)
                    try:
                        fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                    except FileNotFoundError:
                        return Snapshot(meta, _MAGIC)  # bootstrap snapshot: an empty store
                    parts.append((path, fds[-1], os.fstat(fds[-1]).st_size))
            except BaseException:
                _close_fds(fds)  # all or none stay open
                raise
        return Snapshot(meta, ArchiveReader(parts, fds))

    def save_metadata_only(self, meta: SnapshotMetadata) -> None:
        """Record a snapshot whose data is the empty store (cluster bootstrap)."""
        self.save(meta, _MAGIC)
