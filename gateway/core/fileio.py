"""The file layer: every byte the storage code reads or writes goes through a `FileSystem`.

Like LevelDB's ``Env``, the interface is small and says exactly what the storage code needs:
append-only writable files with ``sync``, positional reads, whole-file read-only maps,
directory listing, atomic rename, hard links, directory sync, an exclusive lock file, hole
punching, and `FileSystem.write_atomic` (the one tmp-write-sync-rename-sync-dir sequence).
The Raft WAL, the LSM store, applier positions, dead letters, node snapshots and the log tools
all go through it; nothing else calls ``os.fsync`` or ``os.replace``. Two implementations:

- `OsFileSystem`: the real one (``os.open``/``os.pwrite``-free appends, ``fdatasync``,
  ``fallocate(PUNCH_HOLE)`` through ``ctypes`` where the platform has it).
- `FaultInjectingFileSystem`: in memory, for tests: the one crash model of every storage
  user (WAL, LSM, positions, snapshots). It remembers which bytes and which directory
  entries were made durable (``sync`` / ``sync_dir``), can be armed to crash after a number of
  mutating operations (a crashing write is torn: only a prefix of it lands), and produces the
  image a machine would see after a power cut (`FaultInjectingFileSystem.crash_image`): synced
  data survives, unsynced appends survive as a random prefix (optionally ending in zero bytes,
  as when a file's size reached the disk before its data), unsynced directory changes are lost.

Both count operations in an `IoStats`, so tests can assert what was (not) read or synced.

Contracts shared by every implementation:

- ``WritableFile.write(data)`` appends all of ``data`` at the end of the file or raises.
- Data is durable only after ``WritableFile.sync()`` returned; a new, removed or renamed
  directory entry is durable only after ``FileSystem.sync_dir(directory)`` returned.
- A ``ReadableFile`` sees every byte written before the read started, also through another
  handle; it keeps working after its file was removed (POSIX unlink semantics).
- ``map`` is a stable view of the file as it is when mapped; callers map only files that no
  longer change (sealed segments, finished tables).
- ``WritableFile.drop_cache`` only advises: it gives the OS page cache's copy of synced bytes
  back (``POSIX_FADV_DONTNEED``) and never changes what a read returns.
- ``punch_hole`` returns ``False`` when the platform or file system cannot free the range; the
  bytes are then left as they were (callers must not rely on them reading as zeros).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import random
import sys
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

__all__ = [
    "FaultInjectingFileSystem",
    "FileLock",
    "FileSystem",
    "IoStats",
    "MappedBytes",
    "OsFileSystem",
    "ReadableFile",
    "SimulatedCrash",
    "WritableFile",
    "local_fs",
]


class SimulatedCrash(Exception):
    """Raised by `FaultInjectingFileSystem` at its armed crash point and on every call after."""


@dataclass
class IoStats:
    """Operation counters of one file system. ``bytes_read``/``syncs`` are also kept per path."""

    reads: int = 0
    bytes_read: int = 0
    writes: int = 0
    bytes_written: int = 0
    syncs: int = 0
    dir_syncs: int = 0
    cache_drops: int = 0
    bytes_dropped: int = 0
    bytes_read_by_path: Counter[str] = field(default_factory=Counter)
    syncs_by_path: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count_read(self, path: str, n: int) -> None:
        with self._lock:
            self.reads += 1
            self.bytes_read += n
            self.bytes_read_by_path[path] += n

    def count_write(self, n: int) -> None:
        with self._lock:
            self.writes += 1
            self.bytes_written += n

    def count_sync(self, path: str) -> None:
        with self._lock:
            self.syncs += 1
            self.syncs_by_path[path] += 1

    def count_dir_sync(self) -> None:
        with self._lock:
            self.dir_syncs += 1

    def count_drop(self, n: int) -> None:
        with self._lock:
            self.cache_drops += 1
            self.bytes_dropped += n

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self.reads = self.bytes_read = self.writes = self.bytes_written = 0
            self.syncs = self.dir_syncs = self.cache_drops = self.bytes_dropped = 0
            self.bytes_read_by_path.clear()
            self.syncs_by_path.clear()


class WritableFile(ABC):
    """An append-only handle. Not safe for concurrent ``write`` calls (one writer per file)."""

    path: str

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Append all of ``data`` at the end of the file (or raise ``OSError``)."""

    def write_parts(self, parts: list[bytes]) -> None:
        """Append the concatenation of ``parts`` (or raise ``OSError``), without building it
        where the file allows: the OS file hands the list to ``writev``. A crash may leave any
        prefix of the concatenation, as with :meth:`write`."""
        self.write(b"".join(parts))

    @abstractmethod
    def sync(self) -> None:
        """Make every byte written so far (and the file's size) durable."""

    @abstractmethod
    def drop_cache(self, min_bytes: int = 0, *, whole: bool = False) -> None:
        """Advise that the bytes made durable by the last ``sync`` will not be read soon:
        the OS may give their page-cache pages back now (``POSIX_FADV_DONTNEED``) instead of
        keeping them until memory runs short. Only bytes synced and not dropped yet count,
        and nothing happens unless there are at least ``min_bytes`` of them. The page that
        holds the synced end stays cached (the next append writes into it; dropping it would
        make that write read it back from disk) unless ``whole``: the file is finished and
        will not be appended to. Reads still return the same bytes (from disk if need be).
        Where the platform cannot drop pages this only counts (``IoStats.cache_drops``,
        ``bytes_dropped``)."""

    @abstractmethod
    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes; later writes append after them. Not durable until
        ``sync``."""

    @abstractmethod
    def size(self) -> int:
        """Current size in bytes, including unsynced writes."""

    @abstractmethod
    def close(self) -> None:
        """Release the handle (no implicit sync). Idempotent."""


class ReadableFile(ABC):
    """A positional-read handle; safe to share between threads."""

    path: str

    @abstractmethod
    def pread(self, offset: int, length: int) -> bytes:
        """Return up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""

    @abstractmethod
    def size(self) -> int:
        """Current size in bytes."""

    @abstractmethod
    def close(self) -> None:
        """Release the handle. Idempotent."""


class MappedBytes(bytes):
    """An in-memory file map: ``bytes`` with the ``close`` of an ``mmap`` (a no-op)."""

    def close(self) -> None:
        """Nothing to release."""


#: What `FileSystem.map` returns: a read-only buffer with ``find``/``rfind``/slicing/``close``.
Mapped = mmap.mmap | MappedBytes


class FileLock(ABC):
    """An exclusive lock on a lock file, held until `release` (or the process ends)."""

    path: str

    @abstractmethod
    def release(self) -> None:
        """Give the lock up. Idempotent."""


class FileSystem(ABC):
    """The operations storage code may perform. Paths are ``str``; directories use ``/``."""

    stats: IoStats

    @abstractmethod
    def open_writable(self, path: str) -> WritableFile:
        """Open ``path`` for appending, creating it empty if it does not exist."""

    @abstractmethod
    def open_readable(self, path: str) -> ReadableFile:
        """Open an existing file for positional reads (``FileNotFoundError`` if missing)."""

    def read_all(self, path: str) -> bytes:
        """Return the whole content of ``path``."""
        reader = self.open_readable(path)
        try:
            return reader.pread(0, reader.size())
        finally:
            reader.close()

    @abstractmethod
    def size(self, path: str) -> int:
        """Size of ``path`` in bytes."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether ``path`` names a file or directory."""

    @abstractmethod
    def listdir(self, directory: str) -> list[str]:
        """Names (not paths) of the entries of ``directory``, sorted."""

    @abstractmethod
    def makedirs(self, directory: str) -> None:
        """Create ``directory`` and its parents if missing (durably)."""

    @abstractmethod
    def remove(self, path: str) -> None:
        """Remove the directory entry ``path``; open handles keep working."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` (if any) with ``src``."""

    @abstractmethod
    def sync_dir(self, directory: str) -> None:
        """Make every entry change in ``directory`` durable."""

    @abstractmethod
    def punch_hole(self, path: str, offset: int, length: int) -> bool:
        """Free ``[offset, offset + length)`` keeping the file size; the range then reads as
        zeros. Return ``False`` (and change nothing) when unsupported."""

    @abstractmethod
    def create(self, path: str) -> WritableFile:
        """Open ``path`` for appending from empty: an existing file is truncated first."""

    @abstractmethod
    def link(self, src: str, dst: str) -> None:
        """Give the file ``src`` the second name ``dst`` (a hard link; where the two names are
        on different file systems, a synced copy). Durable after ``sync_dir`` of ``dst``'s
        directory."""

    @abstractmethod
    def map(self, path: str) -> Mapped:
        """Map the whole of ``path`` read-only (``FileNotFoundError`` if missing). Empty files
        map to an empty buffer."""

    @abstractmethod
    def lock(self, path: str) -> FileLock:
        """Create ``path`` if needed and lock it exclusively; ``BlockingIOError`` if another
        holder (another process or another handle in this one) has it."""

    @abstractmethod
    def is_dir(self, path: str) -> bool:
        """Whether ``path`` names a directory."""

    @abstractmethod
    def free_bytes(self, path: str) -> int:
        """Bytes an unprivileged writer may still add on the file system holding ``path``
        (``statvfs``: available blocks times the fragment size). One system call: cheap
        enough for a periodic check, not meant for every write."""

    def discard(self, path: str) -> None:
        """`remove` ``path`` if it exists (no error when it does not)."""
        with contextlib.suppress(FileNotFoundError):
            self.remove(path)

    def append_synced(self, path: str, data: bytes, *, boundary: bytes = b"") -> int:
        """Append ``data`` to ``path`` (created if missing) and make it durable before
        returning; a new file's name is made durable too (``sync_dir``). With ``boundary``, a
        file that does not end with it (a torn tail left by a crash mid-append) gets it
        written first, so the new data never merges into a torn record. Returns the offset
        at which ``data`` starts."""
        existed = self.exists(path)
        f = self.open_writable(path)
        try:
            size = f.size()
            prefix = b""
            if boundary:
                tail = b""
                if size >= len(boundary):
                    reader = self.open_readable(path)
                    try:
                        tail = reader.pread(size - len(boundary), len(boundary))
                    finally:
                        reader.close()
                if tail != boundary:
                    prefix = boundary
            f.write(prefix + data if prefix else data)
            f.sync()
        finally:
            f.close()
        if not existed:
            self.sync_dir(os.path.dirname(path) or ".")
        return size + len(prefix)

    def write_atomic(self, path: str, data: bytes | Iterable[bytes]) -> int:
        """Replace ``path`` with ``data`` -- bytes, or chunks written one at a time (never all
        in memory) -- so that a crash leaves the old or the new content, never a mix: write
        ``path.tmp``, sync it, rename it over ``path``, sync the directory; return the bytes
        written. A stale ``path.tmp`` from an interrupted earlier call is overwritten; if
        ``data`` raises, ``path`` is left as it was."""
        tmp = path + ".tmp"
        f = self.create(tmp)
        size = 0
        try:
            for chunk in (data,) if isinstance(data, bytes) else data:
                f.write(chunk)
                size += len(chunk)
            f.sync()
        finally:
            f.close()
        self.rename(tmp, path)
        self.sync_dir(os.path.dirname(path) or ".")
        return size


# --------------------------------------------------------------------------------------------
# The real file system


_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    """Return libc's ``fallocate`` through ctypes, or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = getattr(libc, "fallocate64", None) or libc.fallocate
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        fn.restype = ctypes.c_int
        return cast("Callable[[int, int, int, int], int]", fn)  # what argtypes/restype say
    except (OSError, AttributeError):
        return None


_fallocate = _load_fallocate()
_fdatasync = getattr(os, "fdatasync", os.fsync)
_fadvise = getattr(os, "posix_fadvise", None)
_PAGE = mmap.PAGESIZE
#: Buffers per ``writev`` call (POSIX guarantees at least 16; Linux takes 1024).
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16
#: ``write_parts`` hands parts to ``writev`` when they average at least this many bytes (a
#: copy of large parts costs more than the iovecs; small ones are joined).
_WRITEV_MIN_PART = 16 << 10


class _DropRange:
    """What `WritableFile.drop_cache` may drop: the synced bytes not dropped yet, cut at the
    page that holds the synced end unless the file is finished."""

    __slots__ = ("dropped", "synced")

    def __init__(self) -> None:
        self.synced = 0  # bytes made durable by the last sync
        self.dropped = 0  # bytes before this offset were dropped already

    def take(self, min_bytes: int, whole: bool) -> tuple[int, int] | None:
        """The ``(offset, length)`` to drop now, marked dropped; None when there is nothing
        or less than ``min_bytes``."""
        end = self.synced if whole else self.synced - self.synced % _PAGE
        if end <= self.dropped or end - self.dropped < min_bytes:
            return None
        span = (self.dropped, end - self.dropped)
        self.dropped = end
        return span

    def truncate(self, size: int) -> None:
        """The file was cut to ``size``: later bytes are new (not synced, not dropped)."""
        self.synced = min(self.synced, size)
        self.dropped = min(self.dropped, size - size % _PAGE)


def _named(exc: OSError, path: str) -> OSError:
    """``exc`` raised on a file descriptor (``write``, ``fdatasync``: no file name) as the same
    error naming ``path``, so that "no space" or "I/O error" says which file. (A ``try``
    costs nothing until it raises: the write path stays as it was.)"""
    if exc.filename is None and exc.errno is not None:
        return type(exc)(exc.errno, exc.strerror, path)
    return exc


class _OsWritable(WritableFile):
    def __init__(self, path: str, stats: IoStats, truncate: bool = False) -> None:
        self.path = path
        self._stats = stats
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd: int | None = os.open(path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._drops = _DropRange()

    def _handle(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: file is closed")
        return self._fd

    def write(self, data: bytes) -> None:
        fd = self._handle()
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view)
                view = view[n:]
                self._size += n
        except OSError as exc:
            raise _named(exc, self.path) from None
        self._stats.count_write(len(data))

    def write_parts(self, parts: list[bytes]) -> None:
        total = sum(map(len, parts))
        if total < _WRITEV_MIN_PART * len(parts):
            # Small parts on average (a batch of short records): one join and one write cost
            # less than an iovec each.
            self.write(b"".join(parts))
            return
        fd = self._handle()
        # What is left to write: a short write leaves a memoryview of a part at its head.
        pending = cast("list[bytes | memoryview]", parts)
        written = 0
        while pending:
            batch = pending[:_IOV_MAX]
            try:
                n = os.writev(fd, batch)
            except OSError as exc:
                raise _named(exc, self.path) from None
            written += n
            self._size += n
            # Drop what was written; a short write resumes inside the part it stopped in.
            k = 0
            while k < len(batch) and n >= len(batch[k]):
                n -= len(batch[k])
                k += 1
            pending = pending[k:]
            if n:
                pending[0] = memoryview(pending[0])[n:]
        self._stats.count_write(written)

    def sync(self) -> None:
        end = self._size  # every byte before it was written before the sync began
        try:
            _fdatasync(self._handle())
        except OSError as exc:
            raise _named(exc, self.path) from None
        self._drops.synced = end
        self._stats.count_sync(self.path)

    def drop_cache(self, min_bytes: int = 0, *, whole: bool = False) -> None:
        span = self._drops.take(min_bytes, whole)
        if span is None:
            return
        if _fadvise is not None:
            # Advice only: a file system that refuses it keeps its pages.
            with contextlib.suppress(OSError):
                _fadvise(self._handle(), span[0], span[1], os.POSIX_FADV_DONTNEED)
        self._stats.count_drop(span[1])

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self._handle(), size)
        except OSError as exc:
            raise _named(exc, self.path) from None
        self._size = size
        self._drops.truncate(size)

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _OsReadable(ReadableFile):
    def __init__(self, path: str, stats: IoStats) -> None:
        self.path = path
        self._stats = stats
        self._fd: int | None = None  # set first: ``__del__`` runs even when the open fails
        self._fd = os.open(path, os.O_RDONLY)

    def pread(self, offset: int, length: int) -> bytes:
        if self._fd is None:
            raise ValueError(f"{self.path}: file is closed")
        chunks = []
        want = length
        while want > 0:
            chunk = os.pread(self._fd, want, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            want -= len(chunk)
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._stats.count_read(self.path, len(data))
        return data

    def size(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: file is closed")
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # handles are shared with readers; the last reference closes
        self.close()


class _OsLock(FileLock):
    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


class OsFileSystem(FileSystem):
    """The operating system's file system. ``sync`` is ``fdatasync`` (``fsync`` elsewhere)."""

    def __init__(self) -> None:
        self.stats = IoStats()

    def create(self, path: str) -> WritableFile:
        return _OsWritable(path, self.stats, truncate=True)

    def link(self, src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            with open(src, "rb") as fin:
                out = self.create(dst)
                try:
                    while chunk := fin.read(1 << 20):
                        out.write(chunk)
                    out.sync()
                finally:
                    out.close()

    def map(self, path: str) -> Mapped:
        fd = os.open(path, os.O_RDONLY)
        try:
            if os.fstat(fd).st_size == 0:
                return MappedBytes()
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def lock(self, path: str) -> FileLock:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise BlockingIOError(errno.EWOULDBLOCK, "locked by another holder", path) from None
        return _OsLock(path, fd)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def free_bytes(self, path: str) -> int:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize

    def open_writable(self, path: str) -> WritableFile:
        return _OsWritable(path, self.stats)

    def open_readable(self, path: str) -> ReadableFile:
        return _OsReadable(path, self.stats)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, directory: str) -> list[str]:
        return sorted(os.listdir(directory))

    def makedirs(self, directory: str) -> None:
        if not os.path.isdir(directory):
            os.makedirs(directory, exist_ok=True)
            parent = os.path.dirname(os.path.abspath(directory))
            self.sync_dir(parent)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def sync_dir(self, directory: str) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.stats.count_dir_sync()

    def punch_hole(self, path: str, offset: int, length: int) -> bool:
        if _fallocate is None or length <= 0:
            return False
        fd = os.open(path, os.O_WRONLY)
        try:
            rc = _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)
            if rc != 0:
                import ctypes

                err = ctypes.get_errno()
                if err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    return False
                raise OSError(err, os.strerror(err), path)
            return True
        finally:
            os.close(fd)


# --------------------------------------------------------------------------------------------
# The fault-injecting in-memory file system


class _Inode:
    """One file's bytes: ``data`` as the process sees it, ``durable`` as the disk holds it."""

    __slots__ = ("data", "durable")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""


class _MemWritable(WritableFile):
    def __init__(self, fs: FaultInjectingFileSystem, path: str, inode: _Inode) -> None:
        self.path = path
        self._fs = fs
        self._inode = inode
        self._closed = False
        self._drops = _DropRange()

    def write(self, data: bytes) -> None:
        fs = self._fs
        with fs._lock:
            fs._check()
            fs._room(self.path, len(data))
            if fs._tick():
                # The crash lands inside this write: a prefix of it reaches the file.
                cut = fs._rng.randrange(len(data) + 1) if data else 0
                self._inode.data += data[:cut]
                fs._die()
            self._inode.data += data
        fs.stats.count_write(len(data))

    def sync(self) -> None:
        fs = self._fs
        hook = fs.sync_hook
        if hook is not None:
            hook(self.path)
        with fs._lock:
            fs._check()
            if fs._tick():
                fs._die()
            if fs.sync_error is not None:
                raise fs.sync_error
            self._inode.durable = bytes(self._inode.data)
            self._drops.synced = len(self._inode.data)
        fs.stats.count_sync(self.path)

    def drop_cache(self, min_bytes: int = 0, *, whole: bool = False) -> None:
        span = self._drops.take(min_bytes, whole)
        if span is not None:  # nothing is cached in memory: counted, for tests
            self._fs.stats.count_drop(span[1])

    def truncate(self, size: int) -> None:
        fs = self._fs
        with fs._lock:
            fs._check()
            if fs._tick():
                fs._die()
            del self._inode.data[size:]
            self._drops.truncate(size)

    def size(self) -> int:
        return len(self._inode.data)

    def close(self) -> None:
        self._closed = True


class _MemReadable(ReadableFile):
    def __init__(self, fs: FaultInjectingFileSystem, path: str, inode: _Inode) -> None:
        self.path = path
        self._fs = fs
        self._inode = inode

    def pread(self, offset: int, length: int) -> bytes:
        with self._fs._lock:
            self._fs._check()
            data = bytes(self._inode.data[offset : offset + length])
        self._fs.stats.count_read(self.path, len(data))
        return data

    def size(self) -> int:
        return len(self._inode.data)

    def close(self) -> None:
        pass


class _MemLock(FileLock):
    def __init__(self, fs: FaultInjectingFileSystem, path: str) -> None:
        self.path = path
        self._fs: FaultInjectingFileSystem | None = fs

    def release(self) -> None:
        fs = self._fs
        if fs is not None:
            with fs._lock:
                fs._locks.discard(self.path)
            self._fs = None


class FaultInjectingFileSystem(FileSystem):
    """An in-memory file system that can lose unsynced data and crash mid-operation.

    Knobs (all optional):

    - ``arm_crash(after_ops)``: the ``after_ops``-th mutating operation from now (create or
      first open of a file, write, sync, truncate, remove, rename, link, sync_dir, punch_hole;
      counting from 1; `mutations` counts them) crashes: a write lands
      only a random prefix of its bytes, other operations do not happen, and `SimulatedCrash`
      is raised, as by every later call.
    - ``sync_hook``: called with the path before every file ``sync`` (outside the lock), e.g.
      to block a sync and observe group commit.
    - ``sync_error``: an ``OSError`` raised by every file ``sync`` (an fsync failure).
    - ``capacity``: the disk's size in bytes (``None``: unbounded). A write that would take
      the files' total size past it raises ``OSError(ENOSPC)`` naming the file and lands
      nothing; `free_bytes` reports what is left. Lower or raise it at any time (a disk
      filling up, space returning).

    `crash_image` returns the file system a reboot would find (a machine crash: unsynced data
    and directory changes may be lost); `process_crash_image` what a restart finds when only
    the process died. Both work before or after a crash. Paths are absolute; ``/`` exists.
    ``seed`` makes torn-write lengths and crash images reproducible.
    """

    def __init__(self, *, seed: int = 0) -> None:
        self.stats = IoStats()
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._files: dict[str, _Inode] = {}
        self._durable_files: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/"}
        self._countdown: int | None = None
        self._locks: set[str] = set()
        #: Mutating operations so far (what `arm_crash` counts): run a workload once unarmed
        #: to learn how many crash points it has.
        self.mutations = 0
        self.crashed = False
        self.sync_hook: Callable[[str], None] | None = None
        self.sync_error: OSError | None = None
        self.capacity: int | None = None

    # crash machinery ---------------------------------------------------------------------

    def arm_crash(self, after_ops: int) -> None:
        """Crash during the ``after_ops``-th mutating operation from now (``>= 1``)."""
        if after_ops < 1:
            raise ValueError("after_ops must be at least 1")
        self._countdown = after_ops

    def disarm(self) -> None:
        """Cancel an armed crash."""
        self._countdown = None

    def _tick(self) -> bool:
        self.mutations += 1
        if self._countdown is None:
            return False
        self._countdown -= 1
        return self._countdown <= 0

    def _die(self) -> None:
        self.crashed = True
        self._countdown = None
        raise SimulatedCrash("simulated crash")

    def _check(self) -> None:
        if self.crashed:
            raise SimulatedCrash("the file system has crashed")

    def crash_image(self, seed: int | None = None, *, zero_tails: bool = True) -> (
        FaultInjectingFileSystem
    ):
        """Return what a reboot finds: synced bytes and directory entries, plus for each file a
        random prefix of its unsynced appends (with ``zero_tails``, sometimes followed by zero
        bytes standing for data blocks that never reached the disk). A file rewritten below its
        durable size since its last sync comes back either as it was synced or as it is now."""
        rng = random.Random(seed)
        image = FaultInjectingFileSystem(seed=rng.randrange(1 << 30))
        image._dirs = set(self._dirs)
        with self._lock:
            for path, inode in sorted(self._durable_files.items()):
                new = _Inode()
                data, durable = bytes(inode.data), inode.durable
                if data.startswith(durable):
                    extra = len(data) - len(durable)
                    keep = rng.randrange(extra + 1) if extra else 0
                    content = data[: len(durable) + keep]
                    if zero_tails and keep < extra and rng.random() < 0.3:
                        content += bytes(rng.randrange(extra - keep + 1))
                else:
                    content = durable if rng.random() < 0.5 else data
                new.data = bytearray(content)
                new.durable = bytes(content)
                image._files[path] = new
                image._durable_files[path] = new
        return image

    def process_crash_image(self) -> FaultInjectingFileSystem:
        """Return what a restart finds after the process died but the kernel survived: every
        byte written and every directory change, synced or not."""
        image = FaultInjectingFileSystem(seed=self._rng.randrange(1 << 30))
        with self._lock:
            image._dirs = set(self._dirs)
            copies: dict[int, _Inode] = {}
            for path, inode in sorted(self._files.items()):
                new = copies.get(id(inode))
                if new is None:
                    new = copies[id(inode)] = _Inode()
                    new.data = bytearray(inode.data)
                    new.durable = bytes(inode.data)
                image._files[path] = new
                image._durable_files[path] = new
        return image

    def _used(self) -> int:
        """Bytes held by every file (a hard-linked file once). Under ``_lock``."""
        return sum(len(i.data) for i in {id(i): i for i in self._files.values()}.values())

    def _room(self, path: str, n: int) -> None:
        """Raise ``ENOSPC`` (naming ``path``) when ``n`` more bytes pass ``capacity``."""
        if self.capacity is not None and n and self._used() + n > self.capacity:
            raise OSError(errno.ENOSPC, "No space left on device", path)

    # FileSystem --------------------------------------------------------------------------

    def free_bytes(self, path: str) -> int:
        with self._lock:
            if self.capacity is None:
                return 1 << 62
            return max(0, self.capacity - self._used())

    def _mutate(self) -> None:
        self._check()
        if self._tick():
            self._die()

    def open_writable(self, path: str) -> WritableFile:
        with self._lock:
            self._check()
            inode = self._files.get(path)
            if inode is None:
                if os.path.dirname(path) not in self._dirs:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", path)
                self._mutate()
                inode = self._files[path] = _Inode()
            return _MemWritable(self, path, inode)

    def create(self, path: str) -> WritableFile:
        with self._lock:
            self._check()
            if os.path.dirname(path) not in self._dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            self._mutate()
            inode = self._files.get(path)
            if inode is None:
                inode = self._files[path] = _Inode()
            else:
                del inode.data[:]  # O_TRUNC: same file, empty; durable at the next sync
            return _MemWritable(self, path, inode)

    def link(self, src: str, dst: str) -> None:
        with self._lock:
            self._check()
            inode = self._files.get(src)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", src)
            if dst in self._files:
                raise FileExistsError(errno.EEXIST, "file exists", dst)
            self._mutate()
            self._files[dst] = inode

    def map(self, path: str) -> Mapped:
        with self._lock:
            self._check()
            inode = self._files.get(path)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            data = MappedBytes(inode.data)
        self.stats.count_read(path, len(data))
        return data

    def lock(self, path: str) -> FileLock:
        with self._lock:
            self._check()
            if path in self._locks:
                raise BlockingIOError(errno.EWOULDBLOCK, "locked by another holder", path)
            if path not in self._files:
                if os.path.dirname(path) not in self._dirs:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", path)
                self._files[path] = _Inode()  # an empty lock file; its durability is moot
            self._locks.add(path)
            return _MemLock(self, path)

    def is_dir(self, path: str) -> bool:
        with self._lock:
            return path in self._dirs

    def open_readable(self, path: str) -> ReadableFile:
        with self._lock:
            self._check()
            inode = self._files.get(path)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return _MemReadable(self, path, inode)

    def size(self, path: str) -> int:
        with self._lock:
            inode = self._files.get(path)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return len(inode.data)

    def exists(self, path: str) -> bool:
        with self._lock:
            return path in self._files or path in self._dirs

    def listdir(self, directory: str) -> list[str]:
        with self._lock:
            self._check()
            if directory not in self._dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", directory)
            names = [os.path.basename(p) for p in self._files if os.path.dirname(p) == directory]
            names += [os.path.basename(d) for d in self._dirs if os.path.dirname(d) == directory
                      and d != directory]
            return sorted(names)

    def makedirs(self, directory: str) -> None:
        with self._lock:
            self._check()
            while directory not in self._dirs:
                self._dirs.add(directory)
                directory = os.path.dirname(directory)

    def remove(self, path: str) -> None:
        with self._lock:
            if path not in self._files:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            self._mutate()
            del self._files[path]

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            if src not in self._files:
                raise FileNotFoundError(errno.ENOENT, "no such file", src)
            self._mutate()
            self._files[dst] = self._files.pop(src)

    def sync_dir(self, directory: str) -> None:
        with self._lock:
            self._mutate()
            for path in [p for p in self._durable_files if os.path.dirname(p) == directory]:
                del self._durable_files[path]
            for path, inode in self._files.items():
                if os.path.dirname(path) == directory:
                    self._durable_files[path] = inode
        self.stats.count_dir_sync()

    def punch_hole(self, path: str, offset: int, length: int) -> bool:
        with self._lock:
            inode = self._files.get(path)
            if inode is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            self._mutate()
            # Deallocation is modelled as immediately durable: both outcomes (old bytes or
            # zeros) are valid after a crash, and this one is the harder for readers.
            end = min(offset + length, len(inode.data))
            if end > offset:
                inode.data[offset:end] = bytes(end - offset)
                durable = bytearray(inode.durable)
                dend = min(end, len(durable))
                if dend > offset:
                    durable[offset:dend] = bytes(dend - offset)
                    inode.durable = bytes(durable)
            return True

    # test helpers ------------------------------------------------------------------------

    def corrupt(self, path: str, offset: int, data: bytes) -> None:
        """Overwrite bytes of ``path`` at ``offset`` in place, durably (simulated bit rot)."""
        with self._lock:
            inode = self._files[path]
            inode.data[offset : offset + len(data)] = data
            durable = bytearray(inode.durable)
            durable[offset : offset + len(data)] = data
            inode.durable = bytes(durable)

    def raw(self, path: str) -> bytes:
        """The current bytes of ``path`` (not counted in `stats`)."""
        with self._lock:
            return bytes(self._files[path].data)


_LOCAL = OsFileSystem()


def local_fs() -> OsFileSystem:
    """The process-wide `OsFileSystem` (one `IoStats` for everything that takes the default)."""
    return _LOCAL
