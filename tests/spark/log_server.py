"""A ``LogRead`` server over a WAL directory, in a thread of the test process: the node's own
servicer (``gateway.node.api.log_read``) and token interceptor, on a free loopback port, for
tests that read a WAL written by ``tests.spark.workload.write_wal`` through ``gateway://``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from gateway.node.api.log_read import LogReadServicer
from gateway.node.api.security import TokenAuthInterceptor, Tokens
from gateway.v1 import log_read_pb2_grpc

__all__ = ["serve_wal"]


@contextmanager
def serve_wal(wal_dir: str, tokens: Tokens | None = None) -> Iterator[str]:
    """Serve ``LogRead`` over ``wal_dir``; yields ``gateway://127.0.0.1:PORT``."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, object] = {}

    async def start() -> None:
        interceptors = [TokenAuthInterceptor(tokens)] if tokens is not None else []
        server = grpc.aio.server(interceptors=interceptors)
        servicer = LogReadServicer(wal_dir)
        log_read_pb2_grpc.add_LogReadServicer_to_server(servicer, server)
        state["port"] = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        state["server"], state["servicer"] = server, servicer

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(30)
    try:
        yield f"gateway://127.0.0.1:{state['port']}"
    finally:
        server = state["server"]
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(10)  # type: ignore[attr-defined]
        state["servicer"].close()  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
