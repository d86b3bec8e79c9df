"""The conflict exceptions tables (``schema.table$EX``, docs/conflicts.md) as the console
shows them: counts per cause, and rows with the key, the old (here) and new (rejected) values.

Contract: :func:`read_rows` pages through one table's ``$EX`` rows with ``Scan`` (the same
key layout ``gateway conflicts list`` reads); a row not laid out as conflict detection
writes it is an :class:`ExceptionsError` naming its key. :func:`delete_rows` deletes handled
rows by id (``SERVER/SOURCE/EPOCH/COUNT``) with one write, as ``gateway conflicts clear``.
"""

from __future__ import annotations

import collections
import fnmatch
from collections.abc import Iterable
from typing import Any

from gateway.client import GatewayClient, python_row
from gateway.v1 import statement_pb2, value_pb2

KEY = ("server_id", "source_server_id", "source_epoch", "count")
HEAD = ("NDB$OP_TYPE", "NDB$CFT_CAUSE", "NDB$ORIG_TRANSID")
PAGE = 1000


class ExceptionsError(ValueError):
    """Bad input or a table that is not an exceptions table (one line)."""


def check_table(table: str) -> str:
    if table.count(".") != 1 or table.endswith("$EX") or not all(table.split(".")):
        raise ExceptionsError(f"{table!r}: give the table as schema.table (its exceptions "
                              f"are in schema.table$EX)")
    return table


def _json_value(v: object) -> object:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, int) and abs(v) >= 2 ** 53:
        return str(v)
    return v if v is None or isinstance(v, (int, float, str, bool)) else str(v)


def shape(table: str, got: dict[str, Any]) -> dict[str, Any]:
    """One ``$EX`` row as the console's JSON: id, op, cause, origin transaction, the key of
    the conflicting row, its old and new values."""
    key = {k: _json_value(v) for k, v in got.items()
           if k not in KEY and k not in HEAD and not k.endswith(("$OLD", "$NEW"))}
    cols = sorted({k[:-4] for k in got if k.endswith(("$OLD", "$NEW"))})
    return {"id": "/".join(str(got[k]) for k in KEY), "table": table,
            "op": got["NDB$OP_TYPE"], "cause": got["NDB$CFT_CAUSE"],
            "orig_transid": _json_value(got["NDB$ORIG_TRANSID"]),
            "source_epoch": str(got["source_epoch"]), "key": key,
            "old": {c: _json_value(got.get(c + "$OLD")) for c in cols},
            "new": {c: _json_value(got.get(c + "$NEW")) for c in cols}}


def read_rows(client: GatewayClient, table: str) -> list[dict[str, Any]]:
    """Every exceptions row of ``table`` (shaped), in key order."""
    check_table(table)
    out: list[dict[str, Any]] = []
    start: list[value_pb2.Value] | None = None
    while True:
        res = client.scan(f"{table}$EX", start=start, limit=PAGE)
        for row in res.rows:
            got = python_row(row)
            if [f.name for f in row.key_fields] != list(KEY) or any(k not in got for k in HEAD):
                key = ", ".join(f"{f.name}={got.get(f.name)!r}" for f in row.key_fields)
                raise ExceptionsError(f"{table}$EX: the row with key {key} was not written by "
                                      f"conflict detection")
            out.append(shape(table, got))
        if not res.more or not res.rows:
            return out
        start = list(res.rows[-1].key_values)
        start[-1] = value_pb2.Value(uint_value=start[-1].uint_value + 1)


def counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Rows per cause."""
    return dict(sorted(collections.Counter(r["cause"] for r in rows).items()))


def matches(row: dict[str, Any], cause: str, key: str) -> bool:
    """``cause``: exact (case-insensitive) or ""; ``key``: a ``COL=VALUE`` pattern (``*``
    and ``?`` wildcards) or a bare value matched against every key column, or ""."""
    if cause and row["cause"].lower() != cause.lower():
        return False
    if not key:
        return True
    col, eq, val = key.partition("=")
    items = row["key"].items()
    if eq:
        return any(k == col and fnmatch.fnmatchcase(str(v), val) for k, v in items)
    return any(fnmatch.fnmatchcase(str(v), key) for _, v in items)


def parse_ids(ids: Iterable[object]) -> list[list[int]]:
    out = []
    for text in ids:
        parts = str(text).split("/")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise ExceptionsError(f"{text!r}: give SERVER/SOURCE/EPOCH/COUNT")
        out.append([int(p) for p in parts])
    return out


def delete_rows(client: GatewayClient, table: str, ids: Iterable[object]) -> int:
    """Delete the handled exceptions rows ``ids`` of ``table`` in one write (admin token:
    only the gateway writes ``$EX``, an operator may only delete from it)."""
    check_table(table)
    keys = parse_ids(ids)
    if not keys:
        raise ExceptionsError("no rows given (ids: [SERVER/SOURCE/EPOCH/COUNT, ...])")
    schema, name = table.split(".")
    unsigned = value_pb2.FieldType.FIELD_TYPE_UNSIGNED
    delete = statement_pb2.DeleteStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=f"{name}$EX"),
        key_fields=[statement_pb2.FieldMetadata(name=k, type=unsigned) for k in KEY],
        records=[statement_pb2.DeleteRecord(
            key_values=[value_pb2.Value(uint_value=p) for p in k]) for k in keys])
    client.write([statement_pb2.Statement(delete=delete)])
    return len(keys)
