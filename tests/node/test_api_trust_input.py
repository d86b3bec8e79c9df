"""What a client with write permission may put in the log (issue 52, items 5, 7, 8, 12): no
writes to the tables the gateway keeps itself, no SQL that escapes the database or makes
replicas differ, no table wider than SQLite's, no JSON with lone surrogates -- each refused
at the API with INVALID_ARGUMENT naming the field, before anything is acknowledged, through
Write, WriteBatch and StreamWrite alike."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_delete, row_insert
from gateway.node.base.validation import InvalidRequest, TableSchema, check_statements
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, statement_pb2, value_pb2

from .conftest import leader_of, node_configs, run, running

FT = value_pb2.FieldType
_TOKENS = ('[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["read", "write", "admin"]\n')


def _sql(query: str, **variables: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(sql=statement_pb2.SqlStatement(
        query=query, variables=[statement_pb2.SessionVariable(
            name=k, value=value_pb2.Value(string_value=v)) for k, v in variables.items()]))


async def _refusal(api: str, stmts: list[statement_pb2.Statement], how: str,
                   token: str = "w") -> tuple[grpc.StatusCode, str]:
    """``(code, message)`` of a write of ``stmts`` sent ``how`` (Write, WriteBatch,
    StreamWrite); the field path is the message's prefix, as the client sees it."""
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(api) as ch:
        stub = gateway_pb2_grpc.GatewayStub(ch)
        req = gateway_pb2.WriteRequest(statements=stmts)
        try:
            if how == "Write":
                await stub.Write(req, metadata=md, timeout=20)
            elif how == "WriteBatch":
                await stub.WriteBatch(gateway_pb2.WriteBatchRequest(writes=[req]), metadata=md,
                                      timeout=20)
            else:
                async for resp in stub.StreamWrite(
                        iter([gateway_pb2.StreamWriteRequest(seq=1, writes=[req])]),
                        metadata=md, timeout=20):
                    (ack,) = resp.acks
                    return grpc.StatusCode.INVALID_ARGUMENT if ack.code == 3 else \
                        grpc.StatusCode.OK, ack.error
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


_RESERVED = ["_gateway_applied_ranges", "_GATEWAY_tables", "sqlite_stat1", "items$EX",
             "items$ex", "apply_status", "Apply_Status", "gateway_apply_status"]


def test_writes_the_gateway_keeps_for_itself_are_refused_with_the_field(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfg = node_configs(tmp_path, 1, tokens_file=str(tokens))[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            for how in ("Write", "WriteBatch", "StreamWrite"):
                prefix = "writes[0]." if how == "WriteBatch" else ""
                for table in _RESERVED:
                    code, msg = await _refusal(
                        cfg.api, [row_insert(f"shop.{table}", {"id": 1}, {"v": "x"})], how)
                    assert code == grpc.StatusCode.INVALID_ARGUMENT, (how, table)
                    assert msg.startswith(
                        f"{prefix}statements[0].insert.table.table_name: "), (how, msg)
                status = statement_pb2.Statement(apply_status={"server_id": 2, "epoch": 9,
                                                               "applied_by": 1})
                code, msg = await _refusal(cfg.api, [status], how)
                assert code == grpc.StatusCode.INVALID_ARGUMENT
                assert msg.startswith(f"{prefix}statements[0].apply_status: "), msg
                # a write token may not delete handled exceptions; an admin one may, but not
                # make the table by doing so
                code, msg = await _refusal(cfg.api, [row_delete("shop.items$EX", {"id": 1})],
                                           how)
                assert msg.startswith(f"{prefix}statements[0].delete.table.table_name: ") \
                    and "admin" in msg, msg
                code, msg = await _refusal(cfg.api, [row_delete("shop.items$EX", {"id": 1})],
                                           how, token="a")
                assert "does not exist" in msg, msg
            assert node.sm.last_trans_id == 0
            assert not any(name.endswith(("$EX", "apply_status")) for name in node.sm.schemas)

    run(go(), 90)


def test_an_admin_may_delete_rows_of_an_exceptions_table_and_nothing_else():
    ex = {"shop.items$EX": TableSchema((("id", FT.FIELD_TYPE_INTEGER),),
                                       {"id": FT.FIELD_TYPE_INTEGER})}
    assert check_statements([row_delete("shop.items$EX", {"id": 1})], ex, admin=True) == []
    for stmt in (row_delete("shop.items$EX", {"id": 1}),
                 row_insert("shop.items$EX", {"id": 1})):
        with pytest.raises(InvalidRequest) as ei:
            check_statements([stmt], ex, admin=stmt.WhichOneof("kind") == "insert")
        assert ei.value.field.endswith(".table.table_name")


@pytest.mark.parametrize(("query", "refused"), [
    ("ATTACH DATABASE '{dir}/planted.db' AS p", "ATTACH"),
    ("INSERT INTO _gateway_applied_ranges VALUES (9, 1, 99)", "_gateway_applied_ranges"),
    ("PRAGMA writable_schema = 1", "PRAGMA"),
    ("INSERT INTO notes VALUES (2, random())", "random()"),
    ("INSERT INTO notes VALUES (3, datetime('now'))", "datetime()"),
    ("UPDATE notes SET body = CURRENT_TIMESTAMP WHERE id = 1", "current_timestamp()"),
    ("UPDATE notes SET body = last_insert_rowid()", "last_insert_rowid()"),
    ("COMMIT", "transaction control"),
    ("INSERT INTO notes VALUES (4, 'a'); INSERT INTO notes VALUES (5, 'b')",
     "more than one SQL statement"),
    ("DELETE FROM \"items$EX\"", "items$EX"),
    ("DROP TABLE items", "written by row statements"),
    ("VACUUM INTO '{dir}/planted.db'", "VACUUM"),
    ("INSERT INTO notes VALUES (6, no_such_function(1))", "no such function"),
])
def test_sql_statements_every_replica_would_refuse_are_refused_at_the_api(tmp_path, query,
                                                                           refused):
    db = tmp_path / "n1" / "out.db"
    cfg = node_configs(tmp_path, 1, appliers={"sqlite": {"path": str(db)}})[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([_sql("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")])
                await c.write([_sql("INSERT INTO notes VALUES (1, @body)", body="kept")])
                before = node.sm.last_trans_id
                with pytest.raises(GatewayError) as ei:
                    await c.write([row_insert("shop.items", {"id": 1}),
                                   _sql(query.format(dir=tmp_path))])
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert ei.value.details.startswith("statements[1].sql.query: refused: "), \
                    ei.value.details
                assert refused in ei.value.details
                assert node.sm.last_trans_id == before
            for _ in range(200):  # the accepted SQL reached the SQLite applier
                if db.exists() and _rows(db) == [(1, "kept")]:
                    break
                await asyncio.sleep(0.05)
            assert _rows(db) == [(1, "kept")]
            assert not (tmp_path / "planted.db").exists()

    run(go(), 60)


def _rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT * FROM notes ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def test_a_table_wider_than_sqlite_allows_is_refused_with_the_limit():
    cols = {f"c{i}": i for i in range(2000)}
    with pytest.raises(InvalidRequest) as ei:
        check_statements([row_insert("shop.wide", {"id": 1}, cols)], {})
    assert ei.value.field == "statements[0].insert.fields"
    assert "2001 columns" in ei.value.reason and "2000" in ei.value.reason
    del cols["c0"]
    assert check_statements([row_insert("shop.wide", {"id": 1}, cols)], {})


def test_json_with_a_lone_surrogate_is_refused_with_the_field():
    def insert(text: str) -> statement_pb2.Statement:
        return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table={"schema_name": "shop", "table_name": "docs"},
            key_fields=[{"name": "id", "type": FT.FIELD_TYPE_INTEGER}],
            fields=[{"name": "doc", "type": FT.FIELD_TYPE_JSON}],
            records=[{"key_values": [{"int_value": 1}],
                      "after_values": [{"string_value": text}]}]))

    with pytest.raises(InvalidRequest) as ei:
        check_statements([insert('{"name": "\\ud800"}')], {})
    assert ei.value.field == "statements[0].insert.records[0].after_values[0]"
    assert "lone surrogate U+D800" in ei.value.reason
    assert check_statements([insert('{"name": "\\ud83d\\ude00 \\\\ud800"}')], {})
