"""The WAL's meta file: the log's start and the hard state saved by structural operations.

The file ``meta`` in the WAL directory starts with ``FE FD`` and holds ``HARD_STATE`` and
``LOG_START`` records (``gateway.core.wal.codec``; generation 0). A save appends its records in
one ``write`` and syncs them before returning; on open the last valid record of each kind wins.
A torn save leaves a prefix of its records (each has its own CRC); a save that did not return
was never acknowledged.

The hard state of ordinary batches lives in the segments (commit markers, see
``docs/formats/wal.md``). The meta file's ``HARD_STATE`` record is written only by the
structural operations (``truncate_suffix``, ``compact``, ``reset``), which remove or punch
markers: it carries the same ``seq`` counter as the markers (the highest ``seq`` anywhere is the
current hard state) and ``log_end``, the last entry that was complete when it was saved.

When the file grows past ``rewrite_bytes`` it is rewritten with just the latest records:
written to ``meta.tmp``, synced, renamed over ``meta``, and the directory synced. Recovery
removes a leftover ``meta.tmp`` (the rename never happened, so ``meta`` is still current).

Damage rules are the segments' rules: a torn tail is cut and reported, damage followed by a
valid record raises `WalCorruptionError` (an append-and-sync file never has unsynced bytes
before synced ones, so that is not a crash artefact).
"""

from __future__ import annotations

import os
import threading

from gateway.core.fileio import FileSystem, WritableFile
from gateway.core.records import SEPARATOR, encode_record, scan
from gateway.core.wal.codec import (
    LogStart,
    Marker,
    PayloadError,
    WalHardState,
    WalTag,
    decode_log_start,
    decode_marker,
    encode_log_start,
    encode_marker,
)
from gateway.core.wal.errors import WalCorruptionError, WalFormatError
from gateway.core.wal.report import RecoveryEvent, RecoveryEventKind, RecoveryReport

__all__ = ["META_NAME", "MetaFile"]

#: File name of the meta file inside the WAL directory.
META_NAME = "meta"
#: Generation of every record in the meta file.
META_GENERATION = 0


class MetaFile:
    """The hard state and log start of one WAL directory. Thread-safe."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        report: RecoveryReport,
        *,
        rewrite_bytes: int = 64 * 1024,
    ) -> None:
        self._fs = fs
        self._dir = directory
        self.path = os.path.join(directory, META_NAME)
        self._tmp = self.path + ".tmp"
        self._rewrite_bytes = rewrite_bytes
        self._lock = threading.Lock()
        self._marker = Marker()
        self._log_start = LogStart()
        if fs.exists(self._tmp):
            fs.remove(self._tmp)
            fs.sync_dir(directory)
            report.events.append(RecoveryEvent(
                RecoveryEventKind.STALE_FILE_REMOVED, self._tmp, 0, 0,
                "interrupted meta rewrite"))
        if fs.exists(self.path):
            self._writer = self._recover(report)
        else:
            self._writer = self._write_fresh(self.path)

    @property
    def hard_state(self) -> WalHardState:
        """The last saved hard state (all zeros if none was ever saved)."""
        return self._marker.hard_state

    @property
    def marker(self) -> Marker:
        """The last saved hard-state record with its ``seq`` and ``log_end``."""
        return self._marker

    @property
    def log_start(self) -> LogStart:
        """The last saved log start (``LogStart(1, 0)`` if none was ever saved)."""
        return self._log_start

    def save_state(self, marker: Marker | None = None, log_start: LogStart | None = None) -> None:
        """Append ``log_start`` then ``marker`` (either may be omitted) in one write and make
        them durable before returning."""
        payloads = []
        if log_start is not None:
            payloads.append(encode_log_start(log_start))
        if marker is not None:
            payloads.append(encode_marker(marker))
        if not payloads:
            return
        with self._lock:
            self._append(payloads, True)
            if log_start is not None:
                self._log_start = log_start
            if marker is not None:
                self._marker = marker

    def save_hard_state(self, hs: WalHardState, *, sync: bool = True) -> None:
        """Append ``hs`` (keeping the current ``seq`` and ``log_end``); with ``sync`` (the
        default) it is durable when this returns."""
        with self._lock:
            m = Marker(hs.term, hs.vote, hs.commit, self._marker.seq, self._marker.log_end)
            self._append([encode_marker(m)], sync)
            self._marker = m

    def save_log_start(self, ls: LogStart) -> None:
        """Append ``ls`` and make it durable before returning."""
        self.save_state(log_start=ls)

    def sync(self) -> None:
        """Make every saved record durable."""
        with self._lock:
            self._writer.sync()

    def close(self) -> None:
        """Close the file (saves were already synced or are given up, as requested)."""
        with self._lock:
            self._writer.close()

    # ---------------------------------------------------------------------------- internals

    def _append(self, payloads: list[bytes], sync: bool) -> None:
        self._writer.write(b"".join(encode_record(p, META_GENERATION) for p in payloads))
        if sync:
            self._writer.sync()
        if self._writer.size() > self._rewrite_bytes:
            self._rewrite_after(payloads)

    def _rewrite_after(self, latest: list[bytes]) -> None:
        # The in-memory values are not yet updated for ``latest``: build the content from them
        # and put ``latest`` last so it wins.
        content = [encode_marker(self._marker), encode_log_start(self._log_start), *latest]
        fresh = self._write_fresh(self._tmp, content)
        self._fs.rename(self._tmp, self.path)
        self._fs.sync_dir(self._dir)
        self._writer.close()
        self._writer = fresh

    def _write_fresh(self, path: str, payloads: list[bytes] | None = None) -> WritableFile:
        writer = self._fs.open_writable(path)
        writer.truncate(0)
        writer.write(SEPARATOR + b"".join(encode_record(p, META_GENERATION)
                                          for p in payloads or []))
        writer.sync()
        self._fs.sync_dir(self._dir)
        return writer

    def _recover(self, report: RecoveryReport) -> WritableFile:
        buf = self._fs.read_all(self.path)
        n = len(buf)
        pos = 2 if buf.startswith(SEPARATOR) else 0
        for rec in scan(buf):
            if rec.offset != pos or rec.generation != META_GENERATION:
                raise WalCorruptionError(self.path, pos,
                                         f"damaged bytes before a valid record at {rec.offset}")
            payload = rec.payload
            try:
                if payload and payload[0] == WalTag.HARD_STATE:
                    self._marker = decode_marker(payload)
                elif payload and payload[0] == WalTag.LOG_START:
                    self._log_start = decode_log_start(payload)
                else:
                    raise WalFormatError(self.path, rec.offset,
                                         f"unexpected record in meta file (tag "
                                         f"{payload[0] if payload else None})")
            except PayloadError as exc:
                raise WalFormatError(self.path, rec.offset + exc.offset, exc.reason) from None
            pos = rec.end + 2
        writer = self._fs.open_writable(self.path)
        if pos != n:
            cut = min(pos, n) if pos > 2 or buf.startswith(SEPARATOR) else 0
            report.events.append(RecoveryEvent(
                RecoveryEventKind.TORN_TAIL, self.path, cut, n - cut,
                "bytes after the last valid record cut" if pos <= n else
                "final separator missing; restored"))
            writer.truncate(cut)
            if cut == 0 or pos > n:
                writer.write(SEPARATOR)
            writer.sync()
        return writer
