"""Helpers for in-process node tests: free loopback ports, node configs, a cluster runner.

Tests are plain functions that call ``run(coro)``; every node of a test runs in that one event
loop over real gRPC on loopback ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from gateway.node import GatewayNode, NodeConfig
from gateway.node.base.config import TlsConfig

from .snapshot_stores import open_store

T = TypeVar("T")


_HANDED_OUT: set[int] = set()


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, none handed out before in this process: two calls could
    otherwise return the same just-released port (two clusters of one test once did, and
    both API servers bound it)."""
    socks, ports = [], []
    while len(ports) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            ports.append(port)
    for s in socks:
        s.close()
    return ports


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def node_configs(tmp_path: Any, n: int, *, appliers: dict | None = None,
                 tls: TlsConfig | None = None, tokens_file: str = "",
                 **kw: Any) -> list[NodeConfig]:
    ports = free_ports(2 * n)
    peers = {i + 1: f"127.0.0.1:{ports[2 * i]}" for i in range(n)}
    return [NodeConfig(node_id=i + 1, listen=peers[i + 1], api=f"127.0.0.1:{ports[2 * i + 1]}",
                       peers=peers, data_dir=str(tmp_path / f"n{i + 1}"),
                       appliers=appliers if appliers is not None else {}, fsync=False,
                       tick_ms=30, log_format="text", tls=tls or TlsConfig(),
                       tokens_file=tokens_file, **kw).validate()
            for i in range(n)]


@contextlib.asynccontextmanager
async def running(
    *cfgs: NodeConfig, plugins: Callable[[], Any] | None = None
) -> AsyncIterator[list[GatewayNode]]:
    """Start one node per config, in order, and stop every node that started when the block
    ends -- also when it raises (a failing test leaves no node serving, holding ports or
    locking its data directory). The block gets the nodes as a list; nodes it starts later
    and appends to that list (``nodes.append(await started(cfg))``) are stopped too. A node
    the block stopped itself is not stopped twice (``GatewayNode.stop`` is idempotent).
    ``plugins`` makes each node's plugin manager (default: the installed plugins). The one way
    node tests start nodes."""
    nodes: list[GatewayNode] = []
    started_here: list[GatewayNode] = []
    try:
        for cfg in cfgs:
            node = GatewayNode(cfg, plugins()) if plugins is not None else GatewayNode(cfg)
            started_here.append(node)
            await node.start()
            nodes.append(node)
        yield nodes
    finally:
        seen: set[int] = set()
        for node in reversed([*started_here, *nodes]):
            if id(node) in seen:
                continue
            seen.add(id(node))
            with contextlib.suppress(Exception):
                await node.stop()


async def started(cfg: NodeConfig) -> GatewayNode:
    """Start one more node inside a ``running`` block; append it to the block's list so the
    block stops it."""
    node = GatewayNode(cfg)
    await node.start()
    return node


async def wait_for(pred: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what or pred}")
        await asyncio.sleep(0.02)


async def leader_of(nodes: list[GatewayNode], timeout: float = 15.0) -> GatewayNode:
    await wait_for(lambda: any(n.driver.is_leader for n in nodes), timeout, "a leader")
    return next(n for n in nodes if n.driver.is_leader)


@pytest.fixture()
def store(tmp_path):
    """An LSM store to export (``snapshot_stores.open_store``)."""
    yield from open_store(tmp_path)
