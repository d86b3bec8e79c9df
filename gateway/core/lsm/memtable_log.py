"""The optional write-ahead log for standalone use (the Raft log is the WAL in a node).

A WAL file ``NNNNNN.wal`` is a stuffed record stream with one record per atomic write batch
(tag ``0xE9``)::

    tag:u8 log_index:u64 pairs (format.encode_pairs: count, lengths, keys and cells)

One WAL file belongs to one memtable; once that memtable's table is installed in the manifest
the file is deleted. Replay tolerates a torn tail (an interrupted append: the last damaged
range reaches the end of the file) and refuses anything else that fails its checksum.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from gateway.core.fileio import FileSystem, WritableFile, local_fs
from gateway.core.lsm.errors import CorruptionError
from gateway.core.lsm.format import TAG_WAL_BATCH, decode_pairs, encode_pairs
from gateway.core.records import SEPARATOR, encode_record, scan, verify

__all__ = ["MemtableLogWriter", "replay_memtable_log"]

_HEAD = struct.Struct("<BQ")


class MemtableLogWriter:
    """Appends batches to one WAL file; ``sync=True`` fsyncs before :meth:`append` returns."""

    def __init__(self, fs: FileSystem, path: str, number: int, sync: bool) -> None:
        self.path = path
        self.number = number
        self.sync = sync
        self._file: WritableFile = fs.create(path)
        self._failed: BaseException | None = None
        self._file.write(SEPARATOR)

    def append(self, keys: list[bytes], cells: list[bytes], log_index: int) -> None:
        """Write one batch record; durable on return when ``sync`` (else in the kernel)."""
        payload = _HEAD.pack(TAG_WAL_BATCH, log_index) + encode_pairs(keys, cells)
        self._io(lambda: self._file.write(encode_record(payload)))
        if self.sync:
            self._io(self._file.sync)

    def fsync(self) -> None:
        """Make every appended batch durable."""
        self._io(self._file.sync)

    def _io(self, op: Callable[[], None]) -> None:
        """Run ``op``; after one failed write or fsync every later call raises: an fsync is
        never retried on this file (the kernel may have dropped the pages it could not
        write, and a second fsync would then report success for data that is gone)."""
        if self._failed is not None:
            raise OSError(f"{self.path}: an earlier write or fsync failed; the file is "
                          f"not written again") from self._failed
        try:
            op()
        except OSError as exc:
            self._failed = exc
            raise

    def close(self) -> None:
        """Close the file (no fsync)."""
        self._file.close()


def replay_memtable_log(
    path: str, fs: FileSystem | None = None
) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """Yield ``(log_index, keys, cells)`` for every batch of ``path`` in write order.

    Raises :class:`CorruptionError` for damage that is not a torn tail.
    """
    data = (fs or local_fs()).read_all(path)
    report = verify(data)
    damaged = report.damaged[:-1] if report.torn_tail else report.damaged
    if damaged:
        raise CorruptionError(path, damaged[0].start, "WAL record fails its checksum")
    for rec in scan(data):
        payload = rec.payload
        try:
            tag, log_index = _HEAD.unpack_from(payload)
            if tag != TAG_WAL_BATCH:
                raise ValueError(f"tag {tag:#x} is not a WAL batch")
            keys, cells = decode_pairs(payload, _HEAD.size)
        except (ValueError, struct.error) as e:
            raise CorruptionError(path, rec.offset, f"invalid WAL record: {e}") from None
        yield log_index, keys, cells
