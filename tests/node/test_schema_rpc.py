"""Table definitions through the API of a running cluster: ``gateway sql`` DDL and the typed
``Schema`` RPCs (forwarded by a follower), writes checked against the definition on the
leader, the refusals, the implicit version of an undeclared table, ``gateway schema
show|history``, token checks, and the definitions after a restart."""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, row_insert
from gateway.v1 import schema_pb2
from gateway.v1.value_pb2 import FieldType

from .conftest import leader_of, node_configs, run, running, wait_for

_TOKENS = ('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["read", "write", "admin"]\n')


def _cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def test_ddl_through_sql_and_rpc_is_replicated_checked_refused_and_kept(tmp_path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfgs = [dataclasses.replace(c, tokens_file=str(tokens)) for c in node_configs(tmp_path, 3)]

    async def sql(api: str, text: str):  # type: ignore[no-untyped-def]
        return await asyncio.to_thread(_cli, "sql", text, "--target", api, "--token", "a")

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            api = follower.config.api  # every change goes through a follower: forwarded
            out = await sql(api, "CREATE TABLE shop.items (id INT PRIMARY KEY, "
                                 "name VARCHAR(20) NOT NULL DEFAULT '')")
            assert out.exit_code == 0 and "shop.items version 1" in _lines(out), out.output
            c = GatewayClient(api, timeout=30, token="a")
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.items", {"id": 1}, {"name": "a"})]))
            out = await sql(api, "ALTER TABLE shop.items ADD COLUMN c INT DEFAULT 0")
            assert out.exit_code == 0 and "version 2" in out.output, out.output
            # every node rewrote the row: c = 0
            await wait_for(lambda: all(n.sm.tables["shop.items"].version == 2
                                       for n in nodes), 15, "version 2 everywhere")
            for n in nodes:
                row = n.sm.get_row("shop", "items", [_int(1)])
                assert row is not None
                assert [(f.name, v.int_value) for f, v in zip(row.fields, row.values,
                                                              strict=True)][1] == ("c", 0)
            # a write that does not fit: INVALID_ARGUMENT naming the table and the column
            try:
                await asyncio.to_thread(lambda: c.write(
                    [row_insert("shop.items", {"id": 2}, {"color": "red"})]))
                raise AssertionError("a write with an undeclared column was accepted")
            except GatewayError as exc:
                assert exc.code == grpc.StatusCode.INVALID_ARGUMENT
                assert "shop.items has no column 'color'" in exc.details, exc.details
            try:  # a declared NOT NULL column
                await asyncio.to_thread(lambda: c.write(
                    [row_insert("shop.items", {"id": 2}, {"name": None})]))
                raise AssertionError("a NULL in a NOT NULL column was accepted")
            except GatewayError as exc:
                assert exc.code == grpc.StatusCode.INVALID_ARGUMENT
                assert "shop.items.name is NOT NULL" in exc.details, exc.details
            # changes that cannot be applied everywhere: FAILED_PRECONDITION with the reason
            for text, why in (("ALTER TABLE shop.items DROP COLUMN id",
                               "cannot drop a primary-key column"),
                              ("ALTER TABLE shop.items MODIFY COLUMN c BIGINT",
                               "changing a column's type is refused"),
                              ("ALTER TABLE shop.items DROP PRIMARY KEY",
                               "changing the primary key is refused"),
                              ("ALTER TABLE shop.items ADD COLUMN c VARCHAR(3)",
                               "column already exists")):
                out = await sql(api, text)
                assert out.exit_code == 1, (text, out.output)
                assert "FAILED_PRECONDITION" in out.output and why in out.output, out.output
            out = await sql(api, "ALTER TABLE shop.items RENAME COLUMN name TO title")
            assert out.exit_code == 0 and "version 3" in out.output, out.output
            # the typed call, as every client makes it
            got = await asyncio.to_thread(lambda: c.change_schema(
                schema_pb2.SchemaChangeRequest(
                    table="shop.items", kind=schema_pb2.SCHEMA_CHANGE_KIND_DROP_COLUMN,
                    column=schema_pb2.ColumnDef(name="c"))))
            assert got.version == 4 and [x.name for x in got.definition.columns] == [
                "id", "title"]
            # an undeclared table: its first write is its implicit version 1
            await asyncio.to_thread(lambda: c.write(
                [row_insert("shop.logs", {"id": 1}, {"text": "x"})]))
            # SchemaHistory reads this node's store (schema_service): the write was
            # forwarded and acknowledged once the leader applied it, so this follower may
            # not have yet; a linearizable read here returns once it has
            await asyncio.to_thread(lambda: c.read("shop.logs", 1))
            out = await asyncio.to_thread(_cli, "schema", "history", "shop.logs", "--target",
                                          api, "--token", "r")
            assert out.exit_code == 0 and "version 1\timplicit create (id, text)" in out.output, \
                out.output

            # tokens: none is refused, a read token may not change a definition
            anonymous = GatewayClient(api, timeout=5)
            reader = GatewayClient(api, timeout=5, token="r")
            req = schema_pb2.SchemaChangeRequest(table="shop.items",
                                                 kind=schema_pb2.SCHEMA_CHANGE_KIND_DROP_TABLE)
            for call, code in ((lambda: anonymous.change_schema(req, timeout=5),
                                grpc.StatusCode.UNAUTHENTICATED),
                               (lambda: anonymous.show_table("shop.items"),
                                grpc.StatusCode.UNAUTHENTICATED),
                               (lambda: anonymous.schema_history("shop.items"),
                                grpc.StatusCode.UNAUTHENTICATED),
                               (lambda: reader.change_schema(req, timeout=5),
                                grpc.StatusCode.PERMISSION_DENIED)):
                try:
                    await asyncio.to_thread(call)
                    raise AssertionError("a schema RPC answered without the permission")
                except GatewayError as exc:
                    assert exc.code == code, exc
            assert leader.sm.tables["shop.items"].version == 4
            # Status shows each table's version
            st = await asyncio.to_thread(lambda: reader.status())
            assert [(t.table, t.version, t.implicit) for t in st.tables] == [
                ("shop.items", 4, False), ("shop.logs", 1, True)]
            out = await asyncio.to_thread(_cli, "status", "--target", api, "--token", "r")
            assert "  table shop.items version 4" in _lines(out), out.output
            assert "  table shop.logs version 1 (implicit)" in _lines(out), out.output
        # after a restart of the whole cluster: the same definitions and versions
        async with running(*cfgs) as nodes:
            await leader_of(nodes)
            for n in nodes:
                await wait_for(lambda n=n: n.sm.tables.get("shop.items") is not None
                               and n.sm.tables["shop.items"].version == 4, 15, "reloaded")
            out = await asyncio.to_thread(_cli, "schema", "show", "shop.items", "--target",
                                          nodes[0].config.api, "--token", "r")
            assert _lines(out) == [
                "shop.items version 4 primary key (id)", "  id INTEGER NOT NULL",
                "  title VARCHAR NOT NULL DEFAULT ''"], out.output

    run(go(), 120)


def _lines(out) -> list[str]:  # type: ignore[no-untyped-def]
    """The output lines but the plugin warnings of this machine."""
    return [line for line in out.output.splitlines() if not line.startswith("warning:")]


def _int(v: int):  # type: ignore[no-untyped-def]
    from gateway.v1 import value_pb2

    return value_pb2.Value(int_value=v)


def test_the_async_client_changes_shows_and_lists_a_tables_schema(tmp_path) -> None:
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, timeout=30) as c:
                made = await c.change_schema(schema_pb2.SchemaChangeRequest(
                    table="shop.carts", kind=schema_pb2.SCHEMA_CHANGE_KIND_CREATE,
                    columns=[schema_pb2.ColumnDef(name="id", type=FieldType.FIELD_TYPE_INTEGER)],
                    primary_key=["id"]))
                assert made.version == 1
                added = await c.change_schema(schema_pb2.SchemaChangeRequest(
                    table="shop.carts", kind=schema_pb2.SCHEMA_CHANGE_KIND_ADD_COLUMN,
                    column=schema_pb2.ColumnDef(name="n", type=FieldType.FIELD_TYPE_INTEGER)))
                assert added.version == 2
                shown = await c.show_table("shop.carts")
                assert [x.name for x in shown.definition.columns] == ["id", "n"]
                history = await c.schema_history("shop.carts")
                assert [e.version for e in history.events] == [1, 2]

    run(go(), 60)
