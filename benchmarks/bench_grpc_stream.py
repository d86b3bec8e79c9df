"""The cost of one grpc.aio stream message, the unit the node's peer transport pays per batch.

    python benchmarks/bench_grpc_stream.py [--messages 20000]

A client-streaming call from this process to a grpc.aio server in its own process that only
counts what it receives; the client writes ``--messages`` messages of 100 B and of 2000 B
back to back (``await call.write``). Prints messages/s and the CPU microseconds per message of
the sender (this process) and of the receiver (from ``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import grpc
from bench_node import cpu_seconds  # the same /proc reading as the node benchmark

METHOD = "/bench.S/Send"


async def _serve(port: int) -> None:
    async def send(it, ctx):  # type: ignore[no-untyped-def]
        n = 0
        async for _ in it:
            n += 1
        return str(n).encode()

    handler = grpc.method_handlers_generic_handler(
        "bench.S", {"Send": grpc.stream_unary_rpc_method_handler(send)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


async def _send(port: int, n: int, size: int) -> tuple[float, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.stream_unary(METHOD)()
        msg = b"x" * size
        t0, c0 = time.perf_counter(), cpu_seconds(os.getpid())
        for _ in range(n):
            await call.write(msg)
        await call.done_writing()
        await call
        return time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        asyncio.run(_serve(int(sys.argv[2])))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=20000)
    n = p.parse_args().messages
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        print("| message | msgs/s | sender CPU us/msg | receiver CPU us/msg |")
        print("|---|---|---|---|")
        for size in (100, 2000):
            before = cpu_seconds(server.pid)
            seconds, cpu = asyncio.run(_send(port, n, size))
            recv = cpu_seconds(server.pid) - before
            print(f"| {size} B | {n / seconds:,.0f} | {1e6 * cpu / n:.0f} | {1e6 * recv / n:.0f} |")
    finally:
        server.kill()
        server.wait(10)


if __name__ == "__main__":
    main()
