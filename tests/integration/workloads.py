"""Random master-valid workloads for the store appliers and the reference model they must reach.

``Workload(seed).transactions(n)`` produces transactions the way a master commits them: inserts
of absent keys, updates (of some columns, sometimes to null) and deletes of present keys, a few
key-changing updates, each transaction touching a few rows more than once. Two tables in two
schemas cover the column types the appliers map (INTEGER, VARCHAR, DOUBLE, BLOB, BOOLEAN) and a
composite key. ``reference(txns)`` applies the original statements one by one to the model of
``tests.reducer.model`` -- what every store must end up holding.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from gateway.core.rowops import TableRef, statement_ops
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2
from tests.reducer.model import Store, apply_all

FT = value_pb2.FieldType
F = statement_pb2.FieldMetadata

ACCOUNTS = TableRef("gw_bank", "accounts")
EVENTS = TableRef("gw_audit", "events")

_SCHEMA: dict[TableRef, tuple[list[F], list[F]]] = {
    ACCOUNTS: ([F(name="id", type=FT.FIELD_TYPE_INTEGER)],
               [F(name="balance", type=FT.FIELD_TYPE_INTEGER),
                F(name="owner", type=FT.FIELD_TYPE_VARCHAR),
                F(name="rate", type=FT.FIELD_TYPE_DOUBLE),
                F(name="active", type=FT.FIELD_TYPE_BOOLEAN)]),
    EVENTS: ([F(name="region", type=FT.FIELD_TYPE_VARCHAR),
              F(name="seq", type=FT.FIELD_TYPE_INTEGER)],
             [F(name="payload", type=FT.FIELD_TYPE_BLOB),
              F(name="note", type=FT.FIELD_TYPE_VARCHAR)]),
}


def value(field: F, v: Any) -> value_pb2.Value:
    if v is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    case = {FT.FIELD_TYPE_INTEGER: "int_value", FT.FIELD_TYPE_VARCHAR: "string_value",
            FT.FIELD_TYPE_DOUBLE: "double_value", FT.FIELD_TYPE_BLOB: "bytes_value",
            FT.FIELD_TYPE_BOOLEAN: "bool_value"}[field.type]
    return value_pb2.Value(**{case: v})


def _meta(table: TableRef) -> statement_pb2.TableMetadata:
    return statement_pb2.TableMetadata(schema_name=table.schema, table_name=table.name)


class Workload:
    """A seeded generator of master-valid transactions (see the module docstring)."""

    def __init__(self, seed: int, *, keys: int = 40, server_id: int = 1,
                 moves: bool = True, namespace: str = "") -> None:
        """``namespace`` prefixes the schema names (``gw_bank`` -> ``<namespace>gw_bank``)."""
        self.rng = random.Random(seed)
        self.tables = {TableRef(namespace + t.schema, t.name): t for t in _SCHEMA}
        self.keys = keys
        self.server_id = server_id
        self.moves = moves
        self.live: dict[TableRef, set[tuple[Any, ...]]] = {t: set() for t in self.tables}
        self.trans_id = 0

    def _key(self, table: TableRef) -> tuple[Any, ...]:
        n = self.rng.randrange(self.keys)
        return (n,) if self.tables[table] == ACCOUNTS else (("eu", "us", "ap")[n % 3], n)

    def _column_value(self, field: F) -> Any:
        r = self.rng
        if r.random() < 0.08:
            return None
        return {FT.FIELD_TYPE_INTEGER: lambda: r.randrange(-10**12, 10**12),
                FT.FIELD_TYPE_VARCHAR: lambda: f"v{r.randrange(10**6)}",
                FT.FIELD_TYPE_DOUBLE: lambda: r.randrange(10**6) / 64,
                FT.FIELD_TYPE_BLOB: lambda: r.randbytes(r.randrange(0, 24)),
                FT.FIELD_TYPE_BOOLEAN: lambda: r.random() < 0.5}[field.type]()

    def _statement(self, table: TableRef) -> statement_pb2.Statement:
        keys, cols = _SCHEMA[self.tables[table]]
        key = self._key(table)
        r = self.rng.random()
        if key not in self.live[table]:
            st = statement_pb2.InsertStatement(table=_meta(table), key_fields=keys, fields=cols)
            st.records.add(key_values=[value(f, v) for f, v in zip(keys, key, strict=True)],
                           after_values=[value(c, self._column_value(c)) for c in cols])
            self.live[table].add(key)
            return statement_pb2.Statement(insert=st)
        if r < 0.7 or (r < 0.8 and not self.moves):
            chosen = self.rng.sample(cols, self.rng.randint(1, len(cols)))
            up = statement_pb2.UpdateStatement(table=_meta(table), key_fields=keys,
                                               set_fields=chosen)
            up.records.add(key_values=[value(f, v) for f, v in zip(keys, key, strict=True)],
                           after_values=[value(c, self._column_value(c)) for c in chosen])
            return statement_pb2.Statement(update=up)
        if r < 0.8:  # key-changing update to a free key
            target = key[:-1] + self._key(table)[-1:]
            if target not in self.live[table]:
                up = statement_pb2.UpdateStatement(table=_meta(table), key_fields=keys,
                                                   set_fields=[keys[-1]])
                up.records.add(
                    key_values=[value(f, v) for f, v in zip(keys, key, strict=True)],
                    after_values=[value(keys[-1], target[-1])])
                self.live[table].discard(key)
                self.live[table].add(target)
                return statement_pb2.Statement(update=up)
        de = statement_pb2.DeleteStatement(table=_meta(table), key_fields=keys)
        de.records.add(key_values=[value(f, v) for f, v in zip(keys, key, strict=True)])
        self.live[table].discard(key)
        return statement_pb2.Statement(delete=de)

    def transaction(self, max_statements: int = 6) -> transaction_pb2.Transaction:
        self.trans_id += 1
        stmts = [self._statement(self.rng.choice(list(self.tables)))
                 for _ in range(self.rng.randint(1, max_statements))]
        ts = 1_700_000_000_000_000_000 + self.trans_id * 1_000_000
        return transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=self.server_id, trans_id=self.trans_id), epoch=1,
            author=self.server_id, start_timestamp_ns=ts, commit_timestamp_ns=ts,
            statements=stmts, segment_id=1, end_segment=True)

    def transactions(self, n: int) -> list[transaction_pb2.Transaction]:
        return [self.transaction() for _ in range(n)]


def reference(txns: Sequence[transaction_pb2.Transaction], first_index: int = 1) -> Store:
    """The store after applying the original statements of ``txns`` one by one (entry ``i`` of
    the log is ``txns[i - first_index]``)."""
    ops = [op for i, t in enumerate(txns, first_index) for op in statement_ops(t, i)]
    return apply_all({}, ops)[0]


def without_nulls(store: Store) -> dict[tuple[TableRef, tuple[Any, ...]], dict[str, Any]]:
    """``store`` with null columns left out (a store cannot tell null from never set)."""
    return {rid: {c: v for c, v in row.items() if v is not None} for rid, row in store.items()}
