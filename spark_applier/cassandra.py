"""The Cassandra target of the bulk apply: cassandra-driver inside Spark tasks.

The Spark Cassandra Connector has no Spark 4 build, so each task of ``write_unit`` opens its own
driver session (``mapInArrow``) and writes its partition's operations with prepared statements
and ``execute_concurrent``. Tables are ``<keyspace>.<schema>_<table>`` (quoted identifiers),
created on the driver from the operations' metadata and widened with ``ALTER TABLE ADD``; the
key columns form the partition key. Column types: BOOLEAN boolean, INTEGER/TIMESTAMP bigint,
UNSIGNED varint, DOUBLE double, DECIMAL decimal, BLOB blob, UUID uuid, the rest text.

Every write carries ``USING TIMESTAMP`` = ``bulk.write_ts`` of the change it applies (commit
index, segment, operation number: changes inside one transaction are ordered too). Cassandra
keeps the cell with the highest timestamp, so a replayed or late write of an older change never
wins over a newer one, and repeating a unit is idempotent.

- INSERT/UPSERT write every column of the table, absent ones as null (the row then holds
  exactly the operation's columns);
- UPDATE first reads whether the row exists (an update of a missing row must not create it);
- DELETE deletes the row; MOVE reads the row and rewrites it under the new key (driver side);
- SQL statements are not supported: they are dead-lettered.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame

from gateway import ApplyError, OpKind, RowOp, UnsupportedOperationError

from .convert import op_of_row
from .writers import table_columns

__all__ = ["CassandraTarget"]

_CQL_TYPES = {1: "boolean", 2: "bigint", 3: "varint", 4: "double", 5: "decimal", 7: "blob",
              11: "bigint", 12: "uuid"}


def _cql_type(field_type: int) -> str:
    return _CQL_TYPES.get(field_type, "text")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(schema: str, table: str) -> str:
    return f"{schema}_{table}" if schema else table


def _bind(field_type: int, value: Any) -> Any:
    if field_type == 12 and value is not None:
        return uuid.UUID(bytes=value)
    return value


class _Writer:
    """One task's session and prepared statements."""

    def __init__(self, contact: tuple[str, int], keyspace: str,
                 columns: dict[tuple[str, str], list[str]]) -> None:
        from cassandra.cluster import Cluster

        self.cluster = Cluster([contact[0]], port=contact[1])
        self.session = self.cluster.connect()
        self.ks = keyspace
        self.columns = columns
        self._prepared: dict[Any, Any] = {}

    def _prep(self, ident: Any, cql: str) -> Any:
        st = self._prepared.get(ident)
        if st is None:
            st = self._prepared[ident] = self.session.prepare(cql)
        return st

    def statements(self, op: RowOp, ts: int) -> list[tuple[Any, tuple]]:
        t = f"{_q(self.ks)}.{_q(_table(op.table.schema, op.table.name))}"
        where = " AND ".join(f"{_q(c.name)} = ?" for c in op.key_columns)
        key = tuple(_bind(c.type, v) for c, v in zip(op.key_columns, op.key, strict=True))
        if op.kind is OpKind.DELETE:
            st = self._prep(("d", t), f"DELETE FROM {t} USING TIMESTAMP ? WHERE {where}")
            return [(st, (ts, *key))]
        given = {c.name: _bind(c.type, v) for c, v in zip(op.columns, op.values, strict=True)}
        if op.kind is OpKind.UPDATE:
            if not op.columns:
                return []
            exists = self._prep(("e", t), f"SELECT {_q(op.key_columns[0].name)} FROM {t} "
                                          f"WHERE {where}")
            if self.session.execute(exists, key).one() is None:
                return []
            names = tuple(given)
            st = self._prep(("u", t, names), f"UPDATE {t} USING TIMESTAMP ? SET "
                            + ", ".join(f"{_q(n)} = ?" for n in names) + f" WHERE {where}")
            return [(st, (ts, *given.values(), *key))]
        cols = self.columns[(op.table.schema, op.table.name)]
        st = self._prep(("i", t), f"INSERT INTO {t} ("
                        + ", ".join(_q(c.name) for c in op.key_columns) + ", "
                        + ", ".join(_q(c) for c in cols) + ") VALUES ("
                        + ", ".join("?" * (len(op.key_columns) + len(cols)))
                        + ") USING TIMESTAMP ?")
        return [(st, (*key, *(given.get(c) for c in cols), ts))]

    def close(self) -> None:
        self.cluster.shutdown()


class CassandraTarget:
    """Writes reduced units to Cassandra at ``contact`` (host, port) in ``keyspace``."""

    def __init__(self, contact: tuple[str, int], keyspace: str, *,
                 replication_factor: int = 1) -> None:
        try:
            import cassandra  # noqa: F401
        except ImportError:
            raise ApplyError("the cassandra target needs cassandra-driver "
                             "(pip install cassandra-driver)") from None
        self.contact = contact
        self.keyspace = keyspace
        self.replication_factor = replication_factor
        self.name = "cassandra"

    def _ensure_tables(self, tables: dict[tuple[str, str], tuple[list, list]]
                       ) -> dict[tuple[str, str], list[str]]:
        w = _Writer(self.contact, self.keyspace, {})
        try:
            s = w.session
            s.execute(f"CREATE KEYSPACE IF NOT EXISTS {_q(self.keyspace)} WITH replication = "
                      f"{{'class': 'SimpleStrategy', 'replication_factor': "
                      f"{self.replication_factor}}}")
            out = {}
            for (schema, table), (keys, values) in tables.items():
                name = _table(schema, table)
                t = f"{_q(self.keyspace)}.{_q(name)}"
                defs = ", ".join(f"{_q(n)} {_cql_type(ft)}" for n, ft in keys + values)
                s.execute(f"CREATE TABLE IF NOT EXISTS {t} ({defs}, PRIMARY KEY (("
                          + ", ".join(_q(n) for n, _ in keys) + ")))")
                present = {r.column_name: r for r in s.execute(
                    "SELECT column_name, kind FROM system_schema.columns WHERE "
                    "keyspace_name = %s AND table_name = %s", (self.keyspace, name))}
                for n, ft in values:
                    if n not in present:
                        s.execute(f"ALTER TABLE {t} ADD {_q(n)} {_cql_type(ft)}")
                key_names = {n for n, _ in keys}
                out[(schema, table)] = sorted(
                    {n for n, _ in values} | {c for c, r in present.items()
                                              if r.kind == "regular"} - key_names)
            return out
        finally:
            w.close()

    def write_unit(self, rows: DataFrame) -> int:
        import pyarrow as pa

        columns = self._ensure_tables(table_columns(rows))
        contact, ks = self.contact, self.keyspace

        def write(batches: Iterator[Any]) -> Iterator[Any]:
            from cassandra.concurrent import execute_concurrent

            w = _Writer(contact, ks, columns)
            n = 0
            try:
                for batch in batches:
                    todo = [s for r in batch.to_pylist()
                            for s in w.statements(op_of_row(r), r["write_ts"])]
                    for ok, res in execute_concurrent(w.session, todo, concurrency=64,
                                                      raise_on_first_error=False):
                        if not ok:
                            raise ApplyError(f"cassandra: {res}")
                    n += batch.num_rows
            finally:
                w.close()
            yield pa.RecordBatch.from_pydict({"n": [n]})

        return sum(r.n for r in rows.mapInArrow(write, "n bigint").collect())

    def apply_barrier(self, op: RowOp, write_ts: int = 0) -> None:
        if op.kind is OpKind.SQL:
            raise UnsupportedOperationError("the cassandra target cannot execute SQL")
        w = _Writer(self.contact, self.keyspace, {})
        try:
            t = f"{_q(self.keyspace)}.{_q(_table(op.table.schema, op.table.name))}"
            where = " AND ".join(f"{_q(c.name)} = %s" for c in op.key_columns)
            key = tuple(_bind(c.type, v) for c, v in zip(op.key_columns, op.key, strict=True))
            row = w.session.execute(f"SELECT * FROM {t} WHERE {where}", key).one()
            if row is None:
                return
            data = dict(row._asdict())
            data.update({c.name: _bind(c.type, v)
                         for c, v in zip(op.columns, op.values, strict=True)})
            data.update({c.name: _bind(c.type, v)
                         for c, v in zip(op.key_columns, op.new_key or (), strict=True)})
            names = list(data)
            w.session.execute(f"DELETE FROM {t} USING TIMESTAMP %s WHERE {where}",
                              (write_ts, *key))
            w.session.execute(f"INSERT INTO {t} (" + ", ".join(_q(n) for n in names)
                              + ") VALUES (" + ", ".join(["%s"] * len(names))
                              + ") USING TIMESTAMP %s", (*data.values(), write_ts))
        finally:
            w.close()
