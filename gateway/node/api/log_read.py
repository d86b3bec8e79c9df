"""``LogRead``: byte-range reads of this node's WAL for readers on other machines.

The Spark data source ``gateway_wal`` reads a log by byte range (any cut reads every record
once: docs/spark.md). With a ``gateway://HOST:PORT`` source its driver plans partitions from
``Layout`` and each task fetches its range with ``ReadRange``, so executors need no access to
the node's data directory (docs/spark.md, "Running on a cluster").

Contracts:

- ``Layout`` derives what a local reader derives from the files (``spark_applier.layout``):
  segments in log order with their sizes, the log start and the commit index (the newest hard
  state of ``meta`` or a commit marker near the end of the newest segment), and each
  segment's byte range after the requested index bounds (found by the index-free search).
- ``ReadRange`` serves only names of the form ``NNNNNNNNNNNNNNNNNNNN.wal`` that are regular
  files directly in the WAL directory: anything else is ``INVALID_ARGUMENT``, a segment that
  is gone (compacted since the layout) ``NOT_FOUND``, each with one line naming it.
- The file work runs in a small thread pool of its own, never on the event loop: a reader's
  scan or a large range does not stall the node's Raft loop and writes.
- Tokens: the methods need the ``read`` permission (``security.TokenAuthInterceptor``).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

from gateway.core import records
from gateway.core.wal.codec import PayloadError, WalTag, decode_log_start
from gateway.core.wal.segment_read import (
    close_segment,
    entry_index_key,
    entry_position,
    last_commit,
    open_segment,
)
from gateway.node.api.call_context import CallContext
from gateway.v1 import log_read_pb2, log_read_pb2_grpc

__all__ = ["CHUNK_BYTES", "LogReadServicer", "wal_layout"]

#: The largest chunk of a ``ReadRange`` stream (well under gRPC's 4 MiB message limit).
CHUNK_BYTES = 1 << 20
_SEGMENT = re.compile(r"^(\d{20})\.wal$")
_LOG_START = bytes((WalTag.LOG_START,))
#: How far from a segment's end commit markers are looked for (as the local reader does).
_MARKER_TAIL = 1 << 20

_T = TypeVar("_T")


class _Refused(Exception):
    """A request this servicer refuses: ``code`` and the one-line detail."""

    def __init__(self, code: grpc.StatusCode, detail: str) -> None:
        self.code = code
        super().__init__(detail)


def wal_layout(wal_dir: str, req: log_read_pb2.LogLayoutRequest
               ) -> log_read_pb2.LogLayoutResponse:
    """The layout of the WAL in ``wal_dir`` (module docstring); blocking file work."""
    segments = []
    for name in os.listdir(wal_dir):
        m = _SEGMENT.match(name)
        path = os.path.join(wal_dir, name)
        if m and os.path.isfile(path):
            segments.append((int(m.group(1)), name, os.path.getsize(path)))
    segments.sort()
    out = log_read_pb2.LogLayoutResponse(log_start=1)
    commit: int | None = None
    try:
        with open(os.path.join(wal_dir, "meta"), "rb") as f:
            meta = f.read()
    except FileNotFoundError:
        meta = b""
    try:
        for rec in records.scan(meta):
            if rec.payload[:1] == _LOG_START:
                out.log_start = max(1, decode_log_start(rec.payload).first_index)
        commit = last_commit(meta, 0)
    except PayloadError as exc:
        raise _Refused(grpc.StatusCode.DATA_LOSS, f"wal/meta: {exc}") from None
    bufs: dict[int, Any] = {}
    try:
        if segments:
            first, name, _size = segments[-1]
            buf = bufs[first] = open_segment(os.path.join(wal_dir, name))
            try:
                marked = last_commit(buf, max(0, len(buf) - _MARKER_TAIL))
            except PayloadError:
                marked = None
            if marked is not None and (commit is None or marked > commit):
                commit = marked
        if req.all_entries:
            commit = None
        if commit is not None:
            out.has_commit, out.commit = True, commit
        lo = max(req.index_from, out.log_start)
        hi = req.index_to or None
        if commit is not None:
            hi = commit if hi is None else min(hi, commit)
        for i, (first, name, size) in enumerate(segments):
            seg = out.segments.add(name=name, first_index=first, size=size, start=0, stop=0)
            nxt = segments[i + 1][0] if i + 1 < len(segments) else None
            if (hi is not None and first > hi) or (nxt is not None and nxt <= lo):
                continue
            buf = bufs.get(first)
            if buf is None:
                buf = bufs[first] = open_segment(os.path.join(wal_dir, name))
            start, stop = 0, min(size, len(buf))
            generation = first & 0xFFFFFFFF
            if lo > first:
                start = entry_position(buf, lo, entry_index_key(generation), start, stop)
            if hi is not None and start < stop:
                stop = entry_position(buf, hi + 1, entry_index_key(generation), start, stop)
            if start < stop:
                seg.start, seg.stop = start, stop
        if segments:
            first = segments[-1][0]
            buf = bufs.get(first)
            out.segments[-1].last_separator = max(buf.rfind(records.SEPARATOR), 0) \
                if buf is not None and len(buf) else 0
    except FileNotFoundError as exc:  # a segment compacted while the layout was taken
        raise _Refused(grpc.StatusCode.UNAVAILABLE,
                       f"wal/{os.path.basename(exc.filename or '')}: removed while the "
                       f"layout was taken (compaction); retry") from None
    finally:
        for b in bufs.values():
            close_segment(b)
    return out


def _segment_path(wal_dir: str, name: str) -> str:
    """The path of segment ``name`` in ``wal_dir``; ``_Refused`` for any other name."""
    if not _SEGMENT.match(name):
        raise _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                       f"segment: {name[:80]!r} is not a WAL segment name "
                       f"(NNNNNNNNNNNNNNNNNNNN.wal)")
    path = os.path.join(wal_dir, name)
    if os.path.dirname(os.path.realpath(path)) != os.path.realpath(wal_dir):
        raise _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                       f"segment: wal/{name} is not a file of the WAL directory")
    return path


class LogReadServicer(log_read_pb2_grpc.LogReadServicer):
    """``gateway.v1.LogRead`` over the WAL in ``wal_dir`` (module docstring)."""

    def __init__(self, wal_dir: str, threads: int = 2) -> None:
        self._wal_dir = wal_dir
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="log-read")

    def close(self) -> None:
        """Stop the thread pool (calls in progress finish their current chunk)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def Layout(self, request: log_read_pb2.LogLayoutRequest, context: CallContext
                     ) -> log_read_pb2.LogLayoutResponse:
        try:
            return await self._off_loop(wal_layout, self._wal_dir, request)
        except _Refused as exc:
            await context.abort(exc.code, str(exc))

    async def ReadRange(self, request: log_read_pb2.LogReadRangeRequest, context: CallContext
                        ) -> AsyncIterator[log_read_pb2.LogChunk]:
        try:
            path = _segment_path(self._wal_dir, request.segment)
            try:
                f = await self._off_loop(open, path, "rb")
            except FileNotFoundError:
                raise _Refused(grpc.StatusCode.NOT_FOUND,
                               f"segment wal/{request.segment} is not in the log any more "
                               f"(compacted since the read was planned)") from None
        except _Refused as exc:
            await context.abort(exc.code, str(exc))
        try:
            offset, end = request.offset, request.offset + request.length
            while offset < end:
                want = min(CHUNK_BYTES, end - offset)
                data = await self._off_loop(os.pread, f.fileno(), want, offset)
                eof = len(data) < want
                yield log_read_pb2.LogChunk(offset=offset, data=data, eof=eof)
                if eof:
                    return
                offset += len(data)
        finally:
            f.close()
