"""``UndoableFileSystem``: a file layer that can put back every change made through it.

A node's start recovers its files before it knows whether it may start: the WAL's recovery
cuts a torn tail, finishes an interrupted truncation, removes stale segments and rewrites its
meta file. When a later check then refuses the start (the store is ahead of the recovered log,
say), the refusal must leave the data directory exactly as it found it: an operator's next
step (a backup, ``gateway log verify``, a copy sent with a bug report) needs the damaged bytes,
and a second start must refuse the same way (issue 52).

So recovery runs over this layer, which journals the original bytes of a file before a change
made to it through the layer: the bytes a cut removes (files are only appended to and cut), or
the whole file before it is removed, renamed over, recreated or punched (a file that did not
exist is journaled as absent, a directory made is remembered). ``undo`` writes the originals
back and removes what was made; ``keep`` accepts the changes and stops journaling (every later
call goes straight to the layer below). Contracts:

- only changes made through this layer are journaled; the caller closes every file it opened
  through it before ``undo``;
- journaling holds the removed bytes in memory: meant for the short window of a start, never
  kept on for a running node (``keep`` ends it);
- ``undo`` is not atomic across files: a crash in the middle leaves some files restored; every
  journaled change was one recovery makes again at the next start.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from gateway.core.fileio import FileLock, FileSystem, Mapped, ReadableFile, WritableFile

__all__ = ["UndoableFileSystem"]


class UndoableFileSystem(FileSystem):
    """``base`` with a journal of the original state of every path changed (module docstring)."""

    def __init__(self, base: FileSystem) -> None:
        self.base = base
        self._lock = threading.Lock()
        self._active = True
        #: By path, in the order first changed: None (the path did not exist), or
        #: ``(offset, tail)``: the original is the file's bytes before ``offset`` (which no
        #: change reached: files are appended to and cut, never rewritten in place) followed
        #: by ``tail``. ``offset`` 0 holds the whole original.
        self._saved: dict[str, tuple[int, bytes] | None] = {}
        self._made_dirs: list[str] = []

    @property
    def journaling(self) -> bool:
        return self._active

    @property
    def changed(self) -> list[str]:
        """The paths changed through this layer since it was made (while journaling)."""
        return list(self._saved)

    def _read(self, path: str, lo: int, hi: int) -> bytes:
        if hi <= lo:
            return b""
        f = self.base.open_readable(path)
        try:
            return f.pread(lo, hi - lo)
        finally:
            f.close()

    def save(self, path: str) -> None:
        """Journal all of ``path`` (before a change anywhere in it) unless it is journaled
        whole already, or journaling ended."""
        if not self._active:
            return
        with self._lock:
            if path not in self._saved:
                exists = self.base.exists(path) and not self.base.is_dir(path)
                self._saved[path] = (0, self.base.read_all(path)) if exists else None
                return
            entry = self._saved[path]
            if entry is not None and entry[0] > 0:
                self._saved[path] = (0, self._read(path, 0, entry[0]) + entry[1])

    def save_from(self, path: str, offset: int) -> None:
        """Journal ``path`` from byte ``offset`` on (before it is cut to ``offset`` or
        appended to at its end ``offset``): only the bytes a cut removes are read."""
        if not self._active:
            return
        with self._lock:
            if path not in self._saved:
                if not self.base.exists(path):
                    self._saved[path] = None
                    return
                size = self.base.size(path)
                at = min(offset, size)
                self._saved[path] = (at, self._read(path, at, size))
                return
            entry = self._saved[path]
            if entry is not None and offset < entry[0]:
                self._saved[path] = (offset, self._read(path, offset, entry[0]) + entry[1])

    def keep(self) -> None:
        """Accept every change and stop journaling."""
        with self._lock:
            self._active = False
            self._saved.clear()
            self._made_dirs.clear()

    def undo(self) -> list[str]:
        """Put back every journaled path and remove the directories made (when empty again);
        stop journaling. Returns the paths put back."""
        with self._lock:
            self._active = False
            saved, self._saved = self._saved, {}
            made, self._made_dirs = self._made_dirs, []
        dirs: set[str] = set()
        for path, entry in saved.items():
            if entry is None:
                self.base.discard(path)
            elif entry[0] == 0:
                self.base.write_atomic(path, entry[1])
            else:
                f = self.base.open_writable(path)
                try:
                    f.truncate(entry[0])
                    f.write(entry[1])
                    f.sync()
                finally:
                    f.close()
            dirs.add(os.path.dirname(path) or ".")
        for directory in reversed(made):
            try:
                os.rmdir(directory)
            except OSError:
                continue
            dirs.discard(directory)
        for directory in dirs:
            if self.base.is_dir(directory):
                self.base.sync_dir(directory)
        return list(saved)

    # -- changes: journaled first -----------------------------------------------------------

    def open_writable(self, path: str) -> WritableFile:
        if self._active and not self.base.exists(path):
            self.save(path)  # opening creates it
        inner = self.base.open_writable(path)
        return _JournaledWritable(self, path, inner) if self._active else inner

    def create(self, path: str) -> WritableFile:
        self.save(path)
        return self.base.create(path)

    def remove(self, path: str) -> None:
        self.save(path)
        self.base.remove(path)

    def rename(self, src: str, dst: str) -> None:
        self.save(src)
        self.save(dst)
        self.base.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        self.save(dst)
        self.base.link(src, dst)

    def punch_hole(self, path: str, offset: int, length: int) -> bool:
        self.save(path)
        return self.base.punch_hole(path, offset, length)

    def makedirs(self, directory: str) -> None:
        if self._active:
            missing = []
            d = os.path.abspath(directory)
            while d and not self.base.is_dir(d):
                missing.append(d)
                parent = os.path.dirname(d)
                if parent == d:
                    break
                d = parent
            with self._lock:
                self._made_dirs.extend(reversed(missing))
        self.base.makedirs(directory)

    def lock(self, path: str) -> FileLock:
        if self._active and not self.base.exists(path):
            self.save(path)
        return self.base.lock(path)

    def write_atomic(self, path: str, data: bytes | Iterable[bytes]) -> int:
        self.save(path)
        return super().write_atomic(path, data)

    # -- reads and syncs: straight through --------------------------------------------------

    def open_readable(self, path: str) -> ReadableFile:
        return self.base.open_readable(path)

    def read_all(self, path: str) -> bytes:
        return self.base.read_all(path)

    def size(self, path: str) -> int:
        return self.base.size(path)

    def exists(self, path: str) -> bool:
        return self.base.exists(path)

    def listdir(self, directory: str) -> list[str]:
        return self.base.listdir(directory)

    def sync_dir(self, directory: str) -> None:
        self.base.sync_dir(directory)

    def map(self, path: str) -> Mapped:
        return self.base.map(path)

    def is_dir(self, path: str) -> bool:
        return self.base.is_dir(path)

    def free_bytes(self, path: str) -> int:
        return self.base.free_bytes(path)

    def __getattr__(self, name: str) -> object:
        # Attributes of the layer below (its I/O counters, ...) read through.
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)


class _JournaledWritable(WritableFile):
    """A file opened while journaling: its first change journals it."""

    def __init__(self, fs: UndoableFileSystem, path: str, inner: WritableFile) -> None:
        self._fs = fs
        self._path = path
        self._inner = inner

    def write(self, data: bytes) -> None:
        self._fs.save_from(self._path, self._inner.size())  # an append
        self._inner.write(data)

    def write_parts(self, parts: list[bytes]) -> None:
        self._fs.save_from(self._path, self._inner.size())
        self._inner.write_parts(parts)

    def truncate(self, size: int) -> None:
        self._fs.save_from(self._path, size)
        self._inner.truncate(size)

    def sync(self) -> None:
        self._inner.sync()

    def drop_cache(self, min_bytes: int = 0, *, whole: bool = False) -> None:
        self._inner.drop_cache(min_bytes, whole=whole)

    def size(self) -> int:
        return self._inner.size()

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> object:
        # Anything else the file below offers (read-only helpers) answers as it does.
        return getattr(self._inner, name)
