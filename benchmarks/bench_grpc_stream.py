"""The cost of one peer stream message, the unit the node's peer transport pays per batch:
grpc.aio (what the transport used until stop 27, and still uses towards older nodes) beside a
framed TCP stream (asyncio, the 2008 transport frame of ``gateway.core.frame``: what
``gateway.node.peers.peer_stream`` now speaks), each plain and with mutual TLS, in the same run.

    python benchmarks/bench_grpc_stream.py [--messages 20000]

For each transport, a receiver in its own process only counts what it receives; this process
writes ``--messages`` messages of 100 B and of 2000 B back to back -- grpc.aio: a
client-streaming call, ``await call.write`` per message; TCP: ``encode_frame`` +
``writer.write`` + ``await writer.drain()`` per message, the receiver decoding frames from
``data_received`` chunks (CRC checked) -- and waits until the receiver has them all. Prints
messages/s, the CPU microseconds per message of the sender (this process) and of the receiver
(from ``/proc``), and each transport's CPU per message against grpc.aio's with the same TLS
setting. TLS uses a throw-away CA (``gateway.node.api.security.make_test_ca``), client
certificates required, as a node's peer TLS does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
from bench_node import cpu_seconds  # noqa: E402  -- the same /proc reading as the node benchmark

from gateway.core.frame import TruncatedFrameError, decode_frame, encode_frame  # noqa: E402

METHOD = "/bench.S/Send"
_DATA, _END = 0x01, 0x02  # frame tags: a message; the sender's last (answered by the count)


def _server_tls(tls: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=f"{tls}/ca.pem")
    ctx.load_cert_chain(f"{tls}/node.pem", f"{tls}/node.key")
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _client_tls(tls: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=f"{tls}/ca.pem")
    ctx.load_cert_chain(f"{tls}/client.pem", f"{tls}/client.key")
    return ctx


async def _serve_grpc(port: int, tls: str) -> None:
    async def send(it, ctx):  # type: ignore[no-untyped-def]
        n = 0
        async for _ in it:
            n += 1
        return str(n).encode()

    handler = grpc.method_handlers_generic_handler(
        "bench.S", {"Send": grpc.stream_unary_rpc_method_handler(send)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    if tls:
        creds = grpc.ssl_server_credentials(
            [(Path(f"{tls}/node.key").read_bytes(), Path(f"{tls}/node.pem").read_bytes())],
            root_certificates=Path(f"{tls}/ca.pem").read_bytes(), require_client_auth=True)
        server.add_secure_port(f"127.0.0.1:{port}", creds)
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


class _Counter(asyncio.Protocol):
    """Decodes frames from whatever chunks arrive; answers the end frame with the number of
    frames received, as a line."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.frames = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            try:
                tag, _, end = decode_frame(self.buf, self.pos)
            except TruncatedFrameError:
                break
            self.pos = end
            self.frames += 1
            if tag == _END and self.transport is not None:
                self.transport.write(b"%d\n" % self.frames)
        if self.pos > 1 << 20:
            del self.buf[:self.pos]
            self.pos = 0


async def _serve_tcp(port: int, tls: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Counter, "127.0.0.1", port,
                                      ssl=_server_tls(tls) if tls else None)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


async def _send_grpc(port: int, tls: str, n: int, size: int) -> tuple[float, float]:
    if tls:
        creds = grpc.ssl_channel_credentials(
            Path(f"{tls}/ca.pem").read_bytes(), Path(f"{tls}/client.key").read_bytes(),
            Path(f"{tls}/client.pem").read_bytes())
        channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", creds)
    else:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    async with channel as ch:
        call = ch.stream_unary(METHOD)()
        msg = b"x" * size
        t0, c0 = time.perf_counter(), cpu_seconds(os.getpid())
        for _ in range(n):
            await call.write(msg)
        await call.done_writing()
        await call
        return time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0


async def _send_tcp(port: int, tls: str, n: int, size: int) -> tuple[float, float]:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=_client_tls(tls) if tls else None,
        server_hostname="127.0.0.1" if tls else None)
    msg = b"x" * size
    t0, c0 = time.perf_counter(), cpu_seconds(os.getpid())
    for _ in range(n):
        writer.write(encode_frame(_DATA, msg))
        await writer.drain()
    writer.write(encode_frame(_END, b""))
    await writer.drain()
    got = await reader.readline()
    if got != b"%d\n" % (n + 1):
        raise RuntimeError(f"the TCP receiver decoded {got!r} frames, not {n + 1}")
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0
    writer.close()
    await writer.wait_closed()
    return elapsed, cpu


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--serve":
        kind, port, tls = sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else ""
        asyncio.run((_serve_grpc if kind == "grpc" else _serve_tcp)(port, tls))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=20000)
    n = p.parse_args().messages
    import socket

    from gateway.node.api.security import make_test_ca

    print("| transport | message | msgs/s | sender CPU us/msg | receiver CPU us/msg "
          "| CPU per message / grpc.aio's |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        make_test_ca(tmp)
        grpc_cpu: dict[tuple[str, int], float] = {}
        for tls in ("", tmp):
            for kind in ("grpc", "tcp"):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
                server = subprocess.Popen(
                    [sys.executable, __file__, "--serve", kind, str(port), tls],
                    stdout=subprocess.PIPE, text=True)
                try:
                    assert server.stdout is not None
                    server.stdout.readline()
                    for size in (100, 2000):
                        before = cpu_seconds(server.pid)
                        send = _send_grpc if kind == "grpc" else _send_tcp
                        seconds, cpu = asyncio.run(send(port, tls, n, size))
                        recv = cpu_seconds(server.pid) - before
                        per = 1e6 * (cpu + recv) / n
                        if kind == "grpc":
                            grpc_cpu[(tls, size)] = per
                        ratio = per / grpc_cpu[(tls, size)]
                        name = ("grpc.aio" if kind == "grpc" else "framed TCP") + \
                            (" + mTLS" if tls else "")
                        print(f"| {name} | {size} B | {n / seconds:,.0f} | "
                              f"{1e6 * cpu / n:.0f} | {1e6 * recv / n:.0f} | {ratio:.2f} |",
                              flush=True)
                finally:
                    server.kill()
                    server.wait(10)


if __name__ == "__main__":
    main()
