"""``gateway://HOST:PORT`` sources: a running node's log read over its ``LogRead`` RPC.

The driver plans partitions from the node's ``Layout`` (segments, sizes, commit index, and each
segment's byte range after the index bounds, found on the node by the index-free search); each
task fetches only its byte range with ``ReadRange`` and decodes it with the same decoder as a
local file (``decode.read_range``). No file of the node's data directory needs to be visible
to the driver or the executors (docs/spark.md, "Running on a cluster").

Resync slack: a range ``[start, stop)`` yields the records whose separator lies in it, and the
last such record ends at the first separator at or after ``stop``; the reader also needs to
know whether the file's first nonzero byte (its head) lies before ``start``. So a task fetches
``[start, stop)``, then more after ``stop`` until a separator is in hand (or the file ends),
and a few bytes before ``start`` until one of them is nonzero (or the file's start). The bytes
are placed at their own offsets in an anonymous memory map (pages never written cost no
memory), so every position the decoder computes is the file's.

Errors are ``RemoteLogError``: one line naming the node and what failed (unreachable, refused
token, a segment compacted between the plan and the read, a segment shorter than planned) --
never fewer rows in silence.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from gateway.formats import SEPARATOR

from .layout import GtidRange, LogFile, LogLayout, ReadRange

__all__ = ["SCHEME", "RemoteLayout", "RemoteLogError", "RemoteSource", "fetch_layout",
           "is_remote", "last_index", "plan_ranges", "read_ca", "read_window", "source_of"]

SCHEME = "gateway://"
_ADDRESS = re.compile(r"^gateway://([^/\s]+):(\d{1,5})/?$")
#: How much is fetched at a time past a range's end (to the next separator) or before its
#: start (to a nonzero byte): records are usually far smaller.
_SLACK = 64 << 10
_LAYOUT_TIMEOUT = 60.0
_READ_TIMEOUT = 600.0

_T = TypeVar("_T")


class RemoteLogError(Exception):
    """A remote read failed; ``str()`` is one line naming the node and what failed."""


def is_remote(path: object) -> bool:
    """True for a ``gateway://`` source."""
    return isinstance(path, str) and path.startswith(SCHEME)


@dataclass(frozen=True)
class RemoteSource:
    """A node's API address and the credentials to read its log: ``token`` (bearer, with the
    ``read`` permission) and ``ca_pem`` (the PEM of the CA of a TLS API; None: plaintext).
    Pickled into every task: the CA goes as bytes, never as a path an executor may not see."""

    target: str
    token: str = ""
    ca_pem: bytes | None = None

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.target}"

    @classmethod
    def parse(cls, uri: str, token: str = "", ca_pem: bytes | None = None) -> RemoteSource:
        """``gateway://HOST:PORT`` -> a source; ``ValueError`` with one line if malformed."""
        m = _ADDRESS.match(uri.strip())
        if not m or not 0 < int(m.group(2)) < 65536:
            raise ValueError(f"{uri}: expected gateway://HOST:PORT (a node's API address)")
        return cls(f"{m.group(1)}:{m.group(2)}", token, ca_pem)


@dataclass(frozen=True, slots=True)
class RemoteLayout(LogLayout):
    """A node's ``LogLayout`` (files named ``gateway://HOST:PORT/NAME``), with each segment's
    byte range to read after the index bounds (``ranges``, by first index) and the position of
    the newest segment's last separator."""

    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    last_separator: int = 0


class _Client:
    """One channel to the node; ``call`` maps gRPC errors to ``RemoteLogError``."""

    def __init__(self, source: RemoteSource) -> None:
        import grpc

        from gateway.v1 import log_read_pb2_grpc

        self.source = source
        opts = [("grpc.max_receive_message_length", 8 << 20)]
        if source.ca_pem is not None:
            self.channel = grpc.secure_channel(
                source.target, grpc.ssl_channel_credentials(source.ca_pem), options=opts)
        else:
            self.channel = grpc.insecure_channel(source.target, options=opts)
        self.stub = log_read_pb2_grpc.LogReadStub(self.channel)
        self.metadata = (("authorization", f"Bearer {source.token}"),) if source.token else ()

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.close()

    def call(self, what: str, fn: Callable[[], _T]) -> _T:
        import grpc

        try:
            return fn()
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = (exc.details() if hasattr(exc, "details") else str(exc)) or ""
            details = details.splitlines()[0] if details else ""
            name = code.name if code is not None else "ERROR"
            if name == "UNAVAILABLE":
                raise RemoteLogError(f"{self.source.uri}: cannot reach the node for {what} "
                                     f"(UNAVAILABLE: {details})") from None
            raise RemoteLogError(f"{self.source.uri}: {what}: {name}: {details}") from None


def read_ca(path: str | None) -> bytes | None:
    """The PEM bytes of a CA certificate file, read where the job is planned (the driver);
    None without one; ``ValueError`` naming the file when it cannot be read."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"ca: cannot read {path}: {exc.strerror or exc}") from None


def source_of(uri: str, options: Mapping[str, Any]) -> RemoteSource:
    """The source ``uri`` with the ``token`` and ``ca`` (a file path) of ``options``, by
    default ``$GATEWAY_TOKEN`` and ``$GATEWAY_CA`` (as the other ``gateway`` commands)."""
    opts = {str(k).lower(): v for k, v in options.items()}
    return RemoteSource.parse(uri, str(opts.get("token") or os.environ.get("GATEWAY_TOKEN", "")),
                              read_ca(opts.get("ca") or os.environ.get("GATEWAY_CA")))


def last_index(source: RemoteSource) -> int:
    """The node's commit index (0 when it has none yet): what a reader would see now."""
    return fetch_layout(source).commit or 0


def fetch_layout(source: RemoteSource, *, committed_only: bool = True, index_from: int = 1,
                 index_to: int | None = None) -> RemoteLayout:
    """The node's layout, with each segment's byte range narrowed to ``[index_from,
    index_to]`` and the commit index by the node."""
    from gateway.v1 import log_read_pb2

    req = log_read_pb2.LogLayoutRequest(all_entries=not committed_only,
                                        index_from=max(0, index_from), index_to=index_to or 0)
    with _Client(source) as c:
        resp = c.call("Layout", lambda: c.stub.Layout(req, timeout=_LAYOUT_TIMEOUT,
                                                      metadata=c.metadata))
    if not resp.segments:
        raise RemoteLogError(f"{source.uri}: the node's WAL has no segments")
    files = tuple(LogFile(f"{source.uri}/{s.name}", "wal", s.first_index, s.size)
                  for s in resp.segments)
    ranges = {s.first_index: (s.start, s.stop) for s in resp.segments}
    return RemoteLayout("wal", files, resp.log_start, resp.commit if resp.has_commit else None,
                        ranges, resp.segments[-1].last_separator)


def plan_ranges(lay: RemoteLayout, *, partition_bytes: int, index_from: int = 1,
                index_to: int | None = None, gtids: GtidRange | None = None,
                bounds: dict[int, tuple[int, int]] | None = None) -> list[ReadRange]:
    """``layout.plan_ranges`` for a node's layout: the node narrowed each segment by index
    (``fetch_layout``); ``bounds`` (streaming offsets) narrow it further; GTID bounds are not
    searched (the reader filters rows by GTID exactly)."""
    if partition_bytes < 64:
        raise ValueError(f"partition_bytes must be >= 64, not {partition_bytes}")
    lo = max(index_from, lay.log_start)
    hi = index_to if lay.commit is None else (
        lay.commit if index_to is None else min(index_to, lay.commit))
    out: list[ReadRange] = []
    for f in lay.files:
        start, stop = lay.ranges.get(f.segment, (0, 0))
        if bounds is not None:
            if f.segment not in bounds:
                continue
            start, stop = max(start, bounds[f.segment][0]), min(stop, bounds[f.segment][1])
        if start >= stop:
            continue
        template = ReadRange(f, 0, 0, 0, lo, hi, gtids)
        cuts = [*range(start, stop, partition_bytes), stop]
        out.extend(replace(template, start=a, stop=b) for a, b in itertools.pairwise(cuts))
    return out


def _segment_name(f: LogFile) -> str:
    return f.path.rsplit("/", 1)[-1]


def _fetch(c: _Client, name: str, offset: int, length: int) -> tuple[bytes, bool]:
    """Bytes ``[offset, offset + length)`` of segment ``name`` and whether the file ended."""
    from gateway.v1 import log_read_pb2

    req = log_read_pb2.LogReadRangeRequest(segment=name, offset=offset, length=length)

    def run() -> tuple[bytes, bool]:
        parts, eof = [], False
        for chunk in c.stub.ReadRange(req, timeout=_READ_TIMEOUT, metadata=c.metadata):
            parts.append(chunk.data)
            eof = eof or chunk.eof
        data = b"".join(parts)
        return data, eof or len(data) < length

    return c.call(f"ReadRange of {name} bytes {offset}-{offset + length}", run)


def read_window(source: RemoteSource, rr: ReadRange) -> Any:
    """The bytes ``rr`` needs, at their file offsets in an anonymous map (module docstring);
    ``RemoteLogError`` when the segment is gone or shorter than planned."""
    name = _segment_name(rr.file)
    with _Client(source) as c:
        body, eof = _fetch(c, name, rr.start, rr.stop - rr.start)
        if len(body) < rr.stop - rr.start:
            raise RemoteLogError(f"{source.uri}: segment wal/{name} ends at byte "
                                 f"{rr.start + len(body)}, before the planned {rr.stop} "
                                 f"(truncated or replaced since the read was planned)")
        tail: list[bytes] = []
        at, last = rr.stop, b""  # (a separator ending at ``stop`` belongs to the range)
        while not eof:
            more, eof = _fetch(c, name, at, _SLACK)
            tail.append(more)
            # a separator at or after ``stop``: the last record of the range ends there
            if (last + more).find(SEPARATOR) >= 0:
                break
            at += len(more)
            last = more[-1:]
        a = rr.start
        head: list[bytes] = []
        while a > 0:
            b = max(0, a - _SLACK)
            more, _ = _fetch(c, name, b, a - b)
            head.insert(0, more)
            a = b
            if more.strip(b"\0"):
                break
    data = b"".join(head) + body + b"".join(tail)
    end = a + len(data)
    buf = mmap.mmap(-1, max(end, 1))
    buf[a:end] = data
    if end == 0:
        buf.close()
        return b""
    return buf
