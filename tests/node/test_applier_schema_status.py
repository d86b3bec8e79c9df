"""Status shows each applier's schema position (issue 57): each table's version as of the
applier's position, beside the node's own ``tables``. An applier with ``schema_policy =
"stop"`` halted before a change shows the version before it while the node shows the newer
one, in ``gateway status`` too."""

from __future__ import annotations

import asyncio
import dataclasses

from click.testing import CliRunner

from gateway.cli import main
from gateway.client import GatewayClient, row_insert
from gateway.node.api.applier_schema import versions_at
from gateway.node.state.schema_apply import HistoryItem
from gateway.schema.model import SchemaEvent

from .conftest import node_configs, running, wait_for


def _sql(api: str, text: str) -> None:
    out = CliRunner().invoke(main, ["sql", text, "--target", api])
    assert out.exit_code == 0, out.output


def _versions(node, table: str) -> tuple[int, int]:
    """(the node's version of ``table``, the only applier's; 0 when it shows none)."""
    st = node.status()
    mine = {t.table: t.version for t in st.tables}
    (applier,) = st.appliers
    theirs = {t.table: t.version for t in applier.schema}
    return mine.get(table, 0), theirs.get(table, 0)


def test_a_stopped_applier_shows_the_older_table_version_than_the_node(tmp_path) -> None:
    db = str(tmp_path / "sink.db")
    cfg = node_configs(tmp_path, 1, appliers={"sqlite": {"path": db}})[0]

    async def first() -> None:
        async with running(cfg) as (node,):
            api = node.config.api
            await asyncio.to_thread(_sql, api, "CREATE TABLE shop.items (id INT PRIMARY KEY, "
                                               "a INT)")
            c = GatewayClient(api, timeout=30)
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.items", {"id": 1}, {"a": 10})]))
            await wait_for(lambda: _versions(node, "shop.items") == (1, 1), 20,
                           "the applier at version 1")

    async def second() -> None:
        stop = dataclasses.replace(cfg, appliers={"sqlite": {"path": db,
                                                             "schema_policy": "stop"}})
        async with running(stop) as (node,):
            api = node.config.api
            await asyncio.to_thread(_sql, api, "ALTER TABLE shop.items ADD COLUMN c INT "
                                               "DEFAULT 0")
            await wait_for(lambda: any("stopped by schema_policy" in s.error
                                       for s in node.applier_status()), 20,
                           "the applier stopped at the ADD COLUMN")
            assert _versions(node, "shop.items") == (2, 1)
            out = await asyncio.to_thread(CliRunner().invoke, main,
                                          ["status", "--target", api])
            assert out.exit_code == 0, out.output
            assert "schema shop.items v1" in out.output

    asyncio.run(first())
    asyncio.run(second())


def _event(table: str, version: int, kind: str = "add_column", implicit: bool = False
           ) -> SchemaEvent:
    return SchemaEvent(table=table, version=version, kind=kind, implicit=implicit)


def test_versions_at_takes_each_tables_last_event_at_or_before_the_position() -> None:
    histories = {"s.a": [HistoryItem(5, _event("s.a", 1, "create")),
                         HistoryItem(9, _event("s.a", 2)),
                         HistoryItem(12, _event("s.a", 3, "drop_table"))],
                 "s.b": [HistoryItem(11, _event("s.b", 1, "create", implicit=True))]}
    assert versions_at(histories, 4) == []
    at_9 = versions_at(histories, 9)
    assert [(t.table, t.version, t.dropped) for t in at_9] == [("s.a", 2, False)]
    at_12 = versions_at(histories, 12)
    assert [(t.table, t.version, t.dropped, t.implicit) for t in at_12] == [
        ("s.a", 3, True, False), ("s.b", 1, False, True)]
