"""A node holding rows that an external sink is added to (issue 54 item 4), for the RabbitMQ
and Cassandra backfill tests: the node's plugins, filling it, its rows, a steady writer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

import pluggy

import gateway.appliers.sqlite as sqlite_plugin
from gateway import hookspecs
from gateway.client import AsyncGatewayClient, row_delete, row_insert, row_update
from gateway.core.rowops import RowOp
from gateway.node import GatewayNode
from gateway.node.appliers.applier_rebuild import stored_row_ops


def plugins_with(module: ModuleType, name: str) -> Callable[[], pluggy.PluginManager]:
    """Each node's plugin manager: the built-ins plus the plugin ``module`` as ``name`` (so
    the test runs whether or not the plugin's entry point is installed)."""
    def make() -> pluggy.PluginManager:
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        pm.register(sqlite_plugin, name="sqlite")
        pm.register(module, name=name)
        return pm
    return make


async def fill(api: str, table: str, n: int, batch: int = 1000) -> None:
    """Insert rows ``id`` 0..n-1 of ``table`` (``v`` = ``"v<id>"``, ``n`` = ``id``)."""
    async with AsyncGatewayClient(api) as c:
        for start in range(0, n, batch):
            await c.write([row_insert(table, {"id": i}, {"v": f"v{i}", "n": i})
                           for i in range(start, min(n, start + batch))])


def stored_rows(node: GatewayNode) -> dict[tuple[str, str, Any], dict[str, Any]]:
    """Every row of the node's store: ``{(schema, table, id): {column: value}}``."""
    with node.sm.store.snapshot() as view:
        ops: list[RowOp] = list(stored_row_ops(view.scan_prefix(b"r")))
    return {(op.table.schema, op.table.name, op.key[0]): dict(
        zip((c.name for c in op.columns), op.values, strict=True)) for op in ops}


@contextlib.asynccontextmanager
async def writing(api: str, table: str, n: int) -> AsyncIterator[list[int]]:
    """A writer updating, deleting and inserting rows of ``table`` (ids spread over 0..n-1,
    new ones from ``n``) until the block ends; yields a one-item list, the count of its
    transactions so far."""
    count = [0]
    stop = asyncio.Event()

    async def run() -> None:
        k = 0
        async with AsyncGatewayClient(api) as c:
            while not stop.is_set():
                # even ids are updated, odd ones deleted once each, new ones inserted
                await c.write([row_update(table, {"id": (2 * k) % n}, {"v": f"u{k}"})])
                if 2 * k + 1 < n:
                    await c.write([row_delete(table, {"id": 2 * k + 1})])
                await c.write([row_insert(table, {"id": n + k}, {"v": "new", "n": n + k})])
                count[0] += 3
                k += 1

    task = asyncio.create_task(run())
    try:
        yield count
    finally:
        stop.set()
        await task
