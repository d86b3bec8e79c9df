"""The Cassandra target of the bulk apply: cassandra-driver inside Spark tasks.

The Spark Cassandra Connector has no Spark 4 build, so each task of ``write_unit`` opens its own
driver session (``mapInArrow``) and writes its partition's operations with prepared statements
and ``execute_concurrent``.

Tables, types and write timestamps are those of ``gateway.cassandra_mapping``, the
mapping the streaming ``gateway-cassandra`` plugin uses: schema ``s`` -> keyspace ``s`` (tables
without a schema -> the target's keyspace), table ``t`` -> ``t``, column types by the log's
type tag names, created on the driver from the operations' metadata and widened with ``ALTER
TABLE ADD``; every key column is in the partition key (the plugin's default). A Spark backfill
and the streaming applier therefore write the same rows, and a keyspace holding tables of the
old Spark mapping (``<keyspace>.<schema>_<table>``) is refused with one line (docs/spark.md).

Every write carries ``USING TIMESTAMP`` = ``write_timestamp(commit index, statement, sub)`` of
the change it applies (for a reduced row, its last change), deletes included. Cassandra keeps
the cell with the highest timestamp, so a replayed or late write of an older change -- from
this target or from the streaming plugin -- never wins over a newer one, and repeating a unit
is idempotent.

- INSERT/UPSERT write every column of the table, absent ones as null (the row then holds
  exactly the operation's columns);
- UPDATE first reads whether the row exists (an update of a missing row must not create it);
- DELETE deletes the row; MOVE reads the row and rewrites it under the new key (driver side,
  in log order, with the plugin's ``RowClock`` for key-shifting statements);
- SQL statements are not supported: they are dead-lettered.

Schema events (``apply_schema``, between the units before and after each) run the plugin's CQL
for the change (``cassandra_mapping.schema_change_cql``) and log its notes; a column Cassandra
records as dropped (``system_schema.dropped_columns``) and that is not a column again is left
out of the later rows that still name it (rows written under older versions on another
cluster), in this run or a later one, as the plugin leaves it out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame

from gateway import (
    ApplyError,
    OpKind,
    RowOp,
    SchemaEvent,
    TableRef,
    UnsupportedOperationError,
)
from gateway.cassandra_mapping import (
    DROPPED_COLUMNS_CQL,
    RowClock,
    TableMapping,
    cql_type,
    cql_value,
    legacy_spark_table,
    quote,
    schema_change_cql,
    write_timestamp,
)

from .convert import op_of_row
from .writers import Columns, table_columns

__all__ = ["CassandraTarget"]

log = logging.getLogger(__name__)

_q = quote


def _bind(field_type: int, value: Any) -> Any:
    return cql_value(field_type, value)


def _columns_of(session: Any, m: TableMapping) -> dict[str, Any]:
    """The columns of ``m``'s table as Cassandra holds them: name -> its row (``kind``,
    ``type``); empty when there is no such table."""
    return {r.column_name: r for r in session.execute(
        "SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = %s "
        "AND table_name = %s", (m.keyspace, m.table))}


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

    def table(self, ref: TableRef) -> str:
        return TableMapping.of(ref, self.ks).qualified

    def statements(self, op: RowOp, ts: int) -> list[tuple[Any, tuple[Any, ...]]]:
        t = self.table(op.table)
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
            # a column a schema event dropped since the row was written is left out
            present = set(self.columns.get((op.table.schema, op.table.name), ()))
            names = tuple(n for n in given if n in present)
            if not names:
                return []
            st = self._prep(("u", t, names), f"UPDATE {t} USING TIMESTAMP ? SET "
                            + ", ".join(f"{_q(n)} = ?" for n in names) + f" WHERE {where}")
            return [(st, (ts, *(given[n] for n in names), *key))]
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
    """Writes reduced units to Cassandra at ``contact`` (host, port); ``keyspace`` holds the
    tables without a schema (the plugin's ``default_keyspace``)."""

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
        self.clock = RowClock()

    def _refuse_legacy(self, session: Any, ref: TableRef) -> None:
        """``ApplyError`` (one line) when the old Spark mapping's table of ``ref`` exists."""
        legacy = legacy_spark_table(self.keyspace, ref)
        if legacy is None or session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s "
                "AND table_name = %s", legacy).one() is None:
            return
        m = TableMapping.of(ref, self.keyspace)
        raise ApplyError(
            f"cassandra: {legacy[0]}.{legacy[1]} holds table {ref} in the old Spark mapping; "
            f"the shared mapping writes {m.keyspace}.{m.table} with other timestamps: drop "
            f"{legacy[0]}.{legacy[1]} and re-apply from the start (docs/spark.md, 'The "
            f"Cassandra mapping')")

    def _ensure_tables(self, tables: dict[tuple[str, str], tuple[Columns, Columns]]
                       ) -> dict[tuple[str, str], list[str]]:
        w = _Writer(self.contact, self.keyspace, {})
        try:
            s = w.session
            for schema, table in tables:  # every check before the first write
                self._refuse_legacy(s, TableRef(schema, table))
            out = {}
            for (schema, table), (keys, values) in tables.items():
                ref = TableRef(schema, table)
                m = TableMapping.of(ref, self.keyspace)
                s.execute(f"CREATE KEYSPACE IF NOT EXISTS {_q(m.keyspace)} WITH replication = "
                          f"{{'class': 'SimpleStrategy', 'replication_factor': "
                          f"{self.replication_factor}}}")
                where = f"table {ref}: column"
                defs = ", ".join(f"{_q(n)} {cql_type(ft, f'{where} {n!r}')}"
                                 for n, ft in keys + values)
                s.execute(f"CREATE TABLE IF NOT EXISTS {m.qualified} ({defs}, PRIMARY KEY (("
                          + ", ".join(_q(n) for n, _ in keys) + ")))")
                present = _columns_of(s, m)
                # dropped by a schema event, in this run or an earlier one (Cassandra keeps
                # the record), and not added back: never re-added for the rows naming it
                gone = {r.column_name for r in s.execute(DROPPED_COLUMNS_CQL,
                                                         (m.keyspace, m.table))
                        if r.column_name not in present}
                values = [(n, ft) for n, ft in values if n not in gone]
                for n, ft in values:
                    if n not in present:
                        s.execute(f"ALTER TABLE {m.qualified} ADD {_q(n)} "
                                  f"{cql_type(ft, f'{where} {n!r}')}")
                key_names = {n for n, _ in keys}
                out[(schema, table)] = sorted(
                    {n for n, _ in values} | {c for c, r in present.items()
                                              if r.kind == "regular"} - key_names)
            return out
        finally:
            w.close()

    def apply_schema(self, event: SchemaEvent) -> None:
        """Make the schema change ``event`` in Cassandra with the CQL the streaming plugin
        runs (``cassandra_mapping.schema_change_cql``); its notes (a default CQL cannot hold,
        a column kept with another type) are logged. Raises ``UnsupportedOperationError`` for
        what CQL cannot do (a regular column's rename: the bulk apply logs it and goes on)."""
        ref = TableRef.parse(event.table)
        m = TableMapping.of(ref, self.keyspace)
        w = _Writer(self.contact, self.keyspace, {})
        try:
            s = w.session
            self._refuse_legacy(s, ref)
            cols = _columns_of(s, m)
            existing = frozenset(cols) or None
            key = tuple(n for n, r in cols.items() if r.kind != "regular")
            cql = schema_change_cql(m, event, existing, key,
                                    {n: r.type for n, r in cols.items()})
            if existing is None and cql.statements and event.kind != "drop_table":
                s.execute(f"CREATE KEYSPACE IF NOT EXISTS {_q(m.keyspace)} WITH replication = "
                          f"{{'class': 'SimpleStrategy', 'replication_factor': "
                          f"{self.replication_factor}}}")
            for statement in cql.statements:
                s.execute(statement)
            for note in cql.notes:
                log.warning("cassandra: schema change %s version %d (%s): %s", event.table,
                            event.version, event.kind, note)
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
                            for s in w.statements(op_of_row(r), write_timestamp(
                                r["log_index"], r["statement"], r["write_sub"]))]
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
        """Apply a MOVE at the shared clock's timestamps (``write_ts`` is not used: the
        ``sub`` of a key-shifting statement needs the rows' ``RowClock``)."""
        if op.kind is OpKind.SQL:
            raise UnsupportedOperationError("the cassandra target cannot execute SQL")
        w = _Writer(self.contact, self.keyspace, {})
        try:
            t = w.table(op.table)
            where = " AND ".join(f"{_q(c.name)} = %s" for c in op.key_columns)
            key = tuple(_bind(c.type, v) for c, v in zip(op.key_columns, op.key, strict=True))
            new_key = tuple(_bind(c.type, v)
                            for c, v in zip(op.key_columns, op.new_key or (), strict=True))
            row = w.session.execute(f"SELECT * FROM {t} WHERE {where}", key).one()
            old_sub = self.clock.sub(op.row_id, op)
            new_sub = self.clock.sub((op.table, op.new_key), op)
            if row is None:
                return
            data = dict(row._asdict())
            data.update({c.name: _bind(c.type, v)
                         for c, v in zip(op.columns, op.values, strict=True)})
            data.update({c.name: v for c, v in zip(op.key_columns, new_key, strict=True)})
            names = list(data)
            # the new key: cleared (phase 0), then written (phase 1), as the plugin does
            w.session.execute(f"DELETE FROM {t} USING TIMESTAMP %s WHERE {where}",
                              (write_timestamp(op.log_index, op.statement, new_sub, 0),
                               *new_key))
            w.session.execute(f"INSERT INTO {t} (" + ", ".join(_q(n) for n in names)
                              + ") VALUES (" + ", ".join(["%s"] * len(names))
                              + ") USING TIMESTAMP %s",
                              (*data.values(), write_timestamp(op.log_index, op.statement,
                                                               new_sub)))
            w.session.execute(f"DELETE FROM {t} USING TIMESTAMP %s WHERE {where}",
                              (write_timestamp(op.log_index, op.statement, old_sub), *key))
        finally:
            w.close()
