#!/usr/bin/env python3
"""Ask a Cassandra node a real CQL query over the native protocol (v4), using only the stdlib.

    python3 cql_ping.py [host] [port]

Sends STARTUP, then ``SELECT release_version FROM system.local`` and prints the version.
Exit status 0 when the node answered the query, 1 otherwise (the reason goes to stderr).
No driver needed, so the launcher works before ``pip install cassandra-driver``.
"""

from __future__ import annotations

import socket
import struct
import sys

VERSION = 0x04
OP_ERROR, OP_STARTUP, OP_READY, OP_QUERY, OP_RESULT = 0x00, 0x01, 0x02, 0x07, 0x08
CONSISTENCY_ONE = 0x0001
RESULT_ROWS = 0x0002
FLAG_GLOBAL_TABLES_SPEC, FLAG_HAS_MORE_PAGES, FLAG_NO_METADATA = 0x0001, 0x0002, 0x0004


class CqlError(Exception):
    pass


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">H", len(raw)) + raw


def _long_string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">i", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CqlError("truncated response body")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def short(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def int(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self) -> str:
        return self.take(self.short()).decode()

    def bytes_(self) -> bytes | None:
        n = self.int()
        return None if n < 0 else self.take(n)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise CqlError("connection closed by the server")
        buf += chunk
    return bytes(buf)


def _request(sock: socket.socket, stream: int, opcode: int, body: bytes) -> tuple[int, bytes]:
    sock.sendall(struct.pack(">BBhBi", VERSION, 0, stream, opcode, len(body)) + body)
    version, _flags, _stream, op, length = struct.unpack(">BBhBi", _recv_exact(sock, 9))
    if version != (0x80 | VERSION):
        raise CqlError(f"unexpected protocol version byte {version:#x} in response")
    payload = _recv_exact(sock, length)
    if op == OP_ERROR:
        r = _Reader(payload)
        code = r.int()
        raise CqlError(f"server error {code:#06x}: {r.string()}")
    return op, payload


def _skip_type(r: _Reader) -> None:
    kind = r.short()
    if kind == 0x0000:  # custom
        r.string()
    elif kind in (0x0020, 0x0022):  # list, set
        _skip_type(r)
    elif kind == 0x0021:  # map
        _skip_type(r)
        _skip_type(r)
    elif kind == 0x0030:  # UDT
        r.string()
        r.string()
        for _ in range(r.short()):
            r.string()
            _skip_type(r)
    elif kind == 0x0031:  # tuple
        for _ in range(r.short()):
            _skip_type(r)


def release_version(host: str = "127.0.0.1", port: int = 9042, timeout: float = 5.0) -> str:
    """Return the node's release_version, or raise OSError / CqlError."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        startup = struct.pack(">H", 1) + _string("CQL_VERSION") + _string("3.0.0")
        op, _ = _request(sock, 0, OP_STARTUP, startup)
        if op != OP_READY:
            raise CqlError(f"STARTUP answered with opcode {op:#x} (authentication required?)")
        query = _long_string("SELECT release_version FROM system.local")
        query += struct.pack(">HB", CONSISTENCY_ONE, 0)
        op, body = _request(sock, 1, OP_QUERY, query)
        if op != OP_RESULT:
            raise CqlError(f"QUERY answered with opcode {op:#x}")
        r = _Reader(body)
        if r.int() != RESULT_ROWS:
            raise CqlError("QUERY did not return rows")
        flags, columns = r.int(), r.int()
        if flags & FLAG_HAS_MORE_PAGES:
            r.bytes_()
        if not flags & FLAG_NO_METADATA:
            if flags & FLAG_GLOBAL_TABLES_SPEC:
                r.string()
                r.string()
            for _ in range(columns):
                if not flags & FLAG_GLOBAL_TABLES_SPEC:
                    r.string()
                    r.string()
                r.string()
                _skip_type(r)
        if r.int() < 1 or columns < 1:
            raise CqlError("system.local returned no row")
        value = r.bytes_()
        if value is None:
            raise CqlError("release_version is null")
        return value.decode()


def main(argv: list[str]) -> int:
    host = argv[1] if len(argv) > 1 else "127.0.0.1"
    port = int(argv[2]) if len(argv) > 2 else 9042
    try:
        print(release_version(host, port))
    except (OSError, CqlError) as exc:
        print(f"cql_ping: {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
