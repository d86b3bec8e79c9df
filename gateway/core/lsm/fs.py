"""The file layer the store writes through, and a fault-injecting double for crash tests.

Like LevelDB's ``Env``: every mutation of the store's directory (create, write, fsync, rename,
remove, directory fsync) goes through a :class:`FileSystem`, so tests can crash the store
between any two steps. Reads go straight to the real files (mmap), which the double keeps
identical to what the store wrote until the simulated crash.

:class:`FaultInjectingFileSystem` models a machine crash the way POSIX allows it: file contents
survive only up to their last ``fsync``, and a directory's entries (creates, renames, removes)
only up to its last directory fsync. :meth:`FaultInjectingFileSystem.crash_state` rewrites the
directory to that durable state (or, with ``keep_unsynced=True``, keeps everything: a process
crash with the kernel surviving).
"""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

__all__ = ["FaultInjectingFileSystem", "FileSystem", "SimulatedCrash", "WritableFile"]


class SimulatedCrash(Exception):
    """Raised by the fault-injecting file system at its crash point (and on every later step)."""


class WritableFile:
    """An open file being written: ``write``, ``fsync``, ``close``. Appends only."""

    def __init__(self, fs: FileSystem, path: str, handle: BinaryIO) -> None:
        self._fs = fs
        self.path = path
        self._handle = handle
        self.size = handle.tell()

    def write(self, data: bytes) -> None:
        """Append ``data`` (buffered; reaches the kernel at ``flush``/``fsync``/``close``)."""
        self._fs._step("write", self.path)
        self._handle.write(data)
        self.size += len(data)

    def flush(self) -> None:
        """Hand buffered bytes to the kernel (no durability)."""
        self._handle.flush()

    def fsync(self) -> None:
        """Make everything written so far durable."""
        self._fs._step("fsync", self.path)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._fs._synced(self.path)

    def close(self) -> None:
        """Close the file (flushes to the kernel; does not fsync)."""
        if not self._handle.closed:
            self._handle.close()


class FileSystem:
    """The real file system. Subclasses intercept each step through :meth:`_step`."""

    def _step(self, op: str, path: str) -> None:
        """Hook called before every mutating step."""

    def _synced(self, path: str) -> None:
        """Hook called after a file's fsync completed."""

    def create(self, path: str) -> WritableFile:
        """Create (truncate) ``path`` for writing."""
        self._step("create", path)
        return WritableFile(self, path, open(path, "wb"))

    def append(self, path: str) -> WritableFile:
        """Open an existing ``path`` for appending."""
        self._step("open-append", path)
        return WritableFile(self, path, open(path, "ab"))

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src`` (durable after :meth:`fsync_dir`)."""
        self._step("rename", dst)
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        """Unlink ``path`` if it exists."""
        self._step("remove", path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def link(self, src: str, dst: str) -> None:
        """Hard-link ``src`` as ``dst``, copying when the file systems differ."""
        self._step("link", dst)
        try:
            os.link(src, dst)
        except OSError:
            with open(src, "rb") as fin, open(dst, "wb") as fout:
                while chunk := fin.read(1 << 20):
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries durable."""
        self._step("fsync-dir", path)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dir_synced(path)

    def _dir_synced(self, path: str) -> None:
        """Hook called after a directory fsync completed."""

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` atomically: write tmp, fsync, rename, fsync dir."""
        tmp = path + ".tmp"
        f = self.create(tmp)
        try:
            f.write(data)
            f.fsync()
        finally:
            f.close()
        self.rename(tmp, path)
        self.fsync_dir(os.path.dirname(path) or ".")


class FaultInjectingFileSystem(FileSystem):
    """A :class:`FileSystem` that raises :class:`SimulatedCrash` at step ``crash_at``.

    Steps are counted from 1 over every mutating call (``create``, ``write``, ``fsync``,
    ``rename``, ``remove``, ``link``, ``fsync-dir``); ``crash_at=None`` never crashes (use it
    to count the steps of a workload: :attr:`steps`). After the crash every further step
    raises too, as if the process were gone. Thread-safe enough for the store's threads: the
    GIL serialises the counter.
    """

    def __init__(self, root: str, crash_at: int | None = None) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.crash_at = crash_at
        self.steps = 0
        self.crashed = False
        self.log: list[tuple[str, str]] = []
        # Durable state: file contents at their last fsync, and the directory's entries at its
        # last fsync (name -> identity of the content, tracked through renames).
        self._content: dict[int, bytes] = {}
        self._ident: dict[str, int] = {}
        self._next_ident = 0
        self._durable_dir: dict[str, int] = {}
        for name in os.listdir(self.root):
            full = os.path.join(self.root, name)
            if os.path.isfile(full):
                ident = self._new_ident()
                self._ident[name] = ident
                self._durable_dir[name] = ident
                with open(full, "rb") as f:
                    self._content[ident] = f.read()

    def _new_ident(self) -> int:
        self._next_ident += 1
        return self._next_ident

    def _name(self, path: str) -> str | None:
        full = os.path.abspath(path)
        if os.path.dirname(full) != self.root:
            return None
        return os.path.basename(full)

    def _step(self, op: str, path: str) -> None:
        if self.crashed:
            raise SimulatedCrash(f"process is gone (after step {self.crash_at})")
        self.steps += 1
        self.log.append((op, os.path.basename(path)))
        if self.crash_at is not None and self.steps >= self.crash_at:
            self.crashed = True
            raise SimulatedCrash(f"crash before step {self.steps}: {op} {path}")

    def create(self, path: str) -> WritableFile:
        f = super().create(path)
        name = self._name(path)
        if name is not None:
            ident = self._new_ident()
            self._ident[name] = ident
            self._content.setdefault(ident, b"")
        return f

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        s, d = self._name(src), self._name(dst)
        if s is not None and d is not None and s in self._ident:
            self._ident[d] = self._ident.pop(s)

    def remove(self, path: str) -> None:
        super().remove(path)
        name = self._name(path)
        if name is not None:
            self._ident.pop(name, None)

    def link(self, src: str, dst: str) -> None:
        super().link(src, dst)
        s, d = self._name(src), self._name(dst)
        if d is not None:
            if s is not None and s in self._ident:
                self._ident[d] = self._ident[s]
            else:
                ident = self._new_ident()
                self._ident[d] = ident
                with open(dst, "rb") as f:
                    self._content[ident] = f.read()

    def _synced(self, path: str) -> None:
        name = self._name(path)
        if name is not None and name in self._ident:
            with open(path, "rb") as f:
                self._content[self._ident[name]] = f.read()

    def _dir_synced(self, path: str) -> None:
        if os.path.abspath(path) == self.root:
            self._durable_dir = dict(self._ident)

    def crash_state(self, *, keep_unsynced: bool = False) -> None:
        """Rewrite the directory to what survives a crash now (call after the store is gone).

        Without ``keep_unsynced`` only fsynced contents under directory-fsynced names remain;
        unsynced files vanish and unsynced renames/removes are undone. Files the store created
        outside the root (none today) are left alone.
        """
        self.crashed = True
        if keep_unsynced:
            return
        for name in os.listdir(self.root):
            full = os.path.join(self.root, name)
            if os.path.isfile(full):
                os.unlink(full)
        for name, ident in self._durable_dir.items():
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(self._content.get(ident, b""))
