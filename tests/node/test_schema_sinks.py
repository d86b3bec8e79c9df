"""A running node's SQLite applier receives the schema changes made through the API in log
order between the rows (issue 57): CREATE TABLE, ADD COLUMN with a default, RENAME and DROP
COLUMN alter its table, and an applier with ``schema_policy = "stop"`` stops at the first
change, naming it in its status."""

from __future__ import annotations

import asyncio
import sqlite3

from click.testing import CliRunner

from gateway.cli import main
from gateway.client import GatewayClient, row_insert

from .conftest import node_configs, running, wait_for


def _sql(api: str, text: str) -> None:
    out = CliRunner().invoke(main, ["sql", text, "--target", api])
    assert out.exit_code == 0, out.output


def _table(db: str) -> tuple[list[str], list[tuple]]:
    conn = sqlite3.connect(db)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(items)")]
        return cols, conn.execute("SELECT * FROM items ORDER BY 1").fetchall()
    finally:
        conn.close()


def test_a_nodes_sqlite_sink_alters_its_table_with_each_schema_change(tmp_path) -> None:
    db = str(tmp_path / "sink.db")
    cfg = node_configs(tmp_path, 1, appliers={"sqlite": {"path": db}})[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            api = node.config.api
            c = GatewayClient(api, timeout=30)
            await asyncio.to_thread(_sql, api, "CREATE TABLE shop.items (id INT PRIMARY KEY, "
                                               "a INT, b VARCHAR(10))")
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.items", {"id": 1}, {"a": 10, "b": "x"})]))
            await asyncio.to_thread(_sql, api, "ALTER TABLE shop.items ADD COLUMN c INT "
                                               "DEFAULT 7")
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.items", {"id": 2}, {"a": 20, "b": "y", "c": 1})]))
            await asyncio.to_thread(_sql, api, "ALTER TABLE shop.items RENAME COLUMN a TO qty")
            await asyncio.to_thread(_sql, api, "ALTER TABLE shop.items DROP COLUMN b")
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.items", {"id": 3}, {"qty": 30, "c": 3})]))

            def done() -> bool:
                try:
                    return _table(db) == (["id", "qty", "c"],
                                          [(1, 10, 7), (2, 20, 1), (3, 30, 3)])
                except sqlite3.Error:
                    return False

            await wait_for(done, 20, "the sink's table after the changes")

    asyncio.run(go())


def test_a_sink_with_policy_stop_stops_at_the_first_change_naming_it(tmp_path) -> None:
    db = str(tmp_path / "sink.db")
    cfg = node_configs(tmp_path, 1, appliers={"sqlite": {"path": db,
                                                         "schema_policy": "stop"}})[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            api = node.config.api
            await asyncio.to_thread(_sql, api, "CREATE TABLE shop.items (id INT PRIMARY KEY, "
                                               "a INT)")

            def stopped() -> bool:
                return any("stopped by schema_policy 'stop'" in s.error
                           for s in node.applier_status())

            await wait_for(stopped, 20, "the sink stopped at the CREATE")
            (status,) = node.applier_status()
            assert "table shop.items version 1 (create)" in status.error

    asyncio.run(go())
