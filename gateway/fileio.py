"""The product's durable file operations, as a small public shape for plugin packages.

Gateway writes every file it must not lose through ``gateway.core.fileio`` (a ``FileSystem``
with fsync'd appends and atomic replaces, and a fault-injecting twin the tests crash at any
step). A plugin package should do the same instead of ``open``/``os.rename``; this module is
the stable part of that layer it may import:

- ``write_atomic(path, data)``: replace ``path`` so a crash leaves the old or the new content
  (write ``path.tmp``, fsync, rename, fsync the directory);
- ``append_synced(path, data, boundary=b"")``: append and fsync before returning (a new
  file's directory entry too); with ``boundary``, a torn tail is closed first;
- ``read_file(path)``: the whole content, or None if the file does not exist;
- ``FileSystem``, ``local_fs()``: the layer itself, for code that takes a ``fs`` argument;
- ``FaultInjectingFileSystem``, ``SimulatedCrash``: an in-memory twin for tests that crashes
  at any chosen write, sync or rename (``arm_crash(n)``) and shows what a reboot would find
  (``crash_image()``).
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.core.fileio import FaultInjectingFileSystem, FileSystem, SimulatedCrash, local_fs

__all__ = ["FaultInjectingFileSystem", "FileSystem", "SimulatedCrash", "append_synced",
           "local_fs", "read_file", "write_atomic"]


def write_atomic(path: str, data: bytes | Iterable[bytes], *,
                 fs: FileSystem | None = None) -> int:
    """Replace ``path`` with ``data`` atomically and durably; return the bytes written."""
    return (fs or local_fs()).write_atomic(path, data)


def append_synced(path: str, data: bytes, *, boundary: bytes = b"",
                  fs: FileSystem | None = None) -> int:
    """Append ``data`` to ``path`` durably; return the offset at which it starts."""
    return (fs or local_fs()).append_synced(path, data, boundary=boundary)


def read_file(path: str, *, fs: FileSystem | None = None) -> bytes | None:
    """The content of ``path``, or None if it does not exist."""
    f = fs or local_fs()
    if not f.exists(path):
        return None
    reader = f.open_readable(path)
    try:
        return bytes(reader.pread(0, reader.size()))
    finally:
        reader.close()
