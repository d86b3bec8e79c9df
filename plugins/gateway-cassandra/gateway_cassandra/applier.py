"""``CassandraApplier``: materialises row operations in Cassandra tables.

One ``apply`` call is one round of ``execute_concurrent``: every operation of the batch becomes
one statement (two for an UPSERT, sent as one UNLOGGED batch because both address one
partition; operations of a batch that share a partition -- possible with clustering columns --
are grouped the same way, never across partitions), plus one write per origin to the
apply-status table. ``apply`` returns when Cassandra acknowledged all of them at the configured
consistency, and raises otherwise; the dispatcher then retries the batch (every write is
idempotent: see ``gateway_cassandra.clock``).

Operations (``gateway.core.rowops`` semantics):

- INSERT: ``INSERT ... USING TIMESTAMP t`` -- the row did not exist, so its columns are exactly
  these;
- UPSERT: a row tombstone at ``t`` phase 0, then the INSERT at phase 1 -- exactly these columns;
- UPDATE: ``UPDATE ... USING TIMESTAMP t SET ...`` (Cassandra's UPDATE also creates a missing
  row; a replica in step never meets one, since the master only logs updates of rows it has);
- DELETE: a row tombstone ``USING TIMESTAMP t``;
- MOVE (alone, a barrier): read the row; if present, write the merged row at the new key as an
  UPSERT and tombstone the old key. A replay of a MOVE after later changes of the old row's
  key reads the newer row: exact only when applied in log order, as the dispatcher does;
- SQL: not accepted (``accepts_sql=False``; the dispatcher dead-letters it).

Tables are created on first sight when ``create`` is on (``CREATE KEYSPACE/TABLE IF NOT
EXISTS``, ``ALTER TABLE ADD`` for a new column), else a missing table or column is an
``UnsupportedOperationError``. Prepared statements are cached per table, kind and column set.

Schema events (``apply_schema``, issue 57): the CQL of ``gateway.cassandra_mapping.
schema_change_cql`` -- CREATE from the definition, ``ALTER TABLE ADD``/``DROP``, ``RENAME`` of a
primary-key column, ``DROP TABLE`` -- run in log order between the rows (the dispatcher's
order), idempotently (the table's columns are read first). What CQL cannot do is said in one
warning line: a column default (existing rows read null) with the change made; a rename of a
regular column raises ``UnsupportedOperationError`` -- the dispatcher reports it and passes it
by under ``schema_policy = apply``, or stops under ``stop``. After a ``DROP COLUMN`` the rows of
older versions still naming the column are written without it (never re-adding it).
``create=false`` makes no schema change (``UnsupportedOperationError``).

Apply status: for each origin ``server_id`` in a batch, the operation latest in the log writes
``(server_id, trans_id, log_index, statement, epoch, commit_ts_ns)`` to
``<status_keyspace>.gateway_apply_status`` in the same round, with that operation's write
timestamp -- so the row converges to the GTID of the latest applied operation of that origin.

Errors: ``CassandraUnavailableError`` (a ``StoreUnavailableError``: no host reachable,
timeouts, overload, unavailable replicas; the dispatcher retries it until the cluster takes
writes again, never dead-lettering for it) and ``CqlRejectedError`` (permanent: the statement
was refused; its text includes the server's message and the CQL; dead-lettered with the
message in the letter).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cassandra import ConsistencyLevel, Timeout, Unavailable
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.concurrent import execute_concurrent
from cassandra.connection import ConnectionException
from cassandra.policies import (
    ConstantReconnectionPolicy,
    DCAwareRoundRobinPolicy,
    TokenAwarePolicy,
)
from cassandra.query import BatchStatement, BatchType, PreparedStatement

import gateway.cassandra_mapping as shared
from gateway import (
    Applier,
    ApplyError,
    Capabilities,
    Column,
    FieldType,
    OpKind,
    RowOp,
    SchemaEvent,
    StoreUnavailableError,
    TableRef,
    TransientApplyError,
    UnsupportedOperationError,
)

from . import schema
from .clock import RowClock, write_timestamp
from .schema import TableMapping

__all__ = ["CassandraApplier", "CassandraSettings", "CassandraUnavailableError",
           "CqlRejectedError"]

log = logging.getLogger("gateway.appliers.cassandra")


class CassandraUnavailableError(StoreUnavailableError):
    """The cluster could not take the writes now (unreachable, timed out, overloaded)."""


class CqlRejectedError(ApplyError):
    """Cassandra refused a statement (invalid request, bad type, ...): retrying will not help."""


_TRANSIENT = (NoHostAvailable, Timeout, Unavailable, ConnectionException, ConnectionError,
              TimeoutError, OSError)
_TRANSIENT_NAMES = {"OperationTimedOut", "OverloadedErrorMessage", "IsBootstrappingErrorMessage",
                    "CoordinationFailure", "WriteFailure", "ReadFailure", "ServerError",
                    "TruncateError"}


def classify(exc: BaseException, cql: str = "") -> ApplyError:
    """The applier error for a driver exception: transient or ``CqlRejectedError``."""
    where = f" [CQL: {cql}]" if cql else ""
    text = f"{type(exc).__name__}: {exc}{where}"
    if isinstance(exc, _TRANSIENT) or type(exc).__name__ in _TRANSIENT_NAMES:
        return CassandraUnavailableError(text)
    return CqlRejectedError(text)


@dataclass(frozen=True, slots=True)
class CassandraSettings:
    """Options of one Cassandra applier (see the plugin README for each)."""

    hosts: tuple[str, ...]
    port: int = 9042
    local_dc: str = "datacenter1"
    consistency: str = "LOCAL_QUORUM"
    create: bool = True
    replication_factor: int = 1
    clustering: dict[str, tuple[str, ...]] = field(default_factory=dict)
    default_keyspace: str = "gateway"
    status_keyspace: str = "gateway"
    concurrency: int = 64
    max_batch: int = 200
    request_timeout: float = 10.0
    reconnect_timeout: float = 30.0
    protocol_version: int | None = None
    name: str = "cassandra"


@dataclass(slots=True)
class _Table:
    mapping: TableMapping
    partition_key: tuple[str, ...]
    columns: set[str]


Item = tuple[Any, Sequence[Any]]  # (PreparedStatement, parameters)


def _driver_refreshed(result: Any) -> bool:
    """Whether the driver re-read the schema metadata before answering the schema change
    ``result`` (it does when the nodes agreed on the schema in time; else the caller must)."""
    future = getattr(result, "response_future", None)
    return bool(getattr(future, "is_schema_agreed", False))


class CassandraApplier(Applier):
    """Writes operations to Cassandra; see the module docstring for the contract."""

    def __init__(self, settings: CassandraSettings) -> None:
        self.name = settings.name
        self.settings = settings
        self.capabilities = Capabilities(accepts_sql=False, idempotent=True,
                                         max_batch=settings.max_batch, thread_safe=True)
        self.clock = RowClock()
        self._consistency = ConsistencyLevel.name_to_value[settings.consistency]
        self._cluster: Cluster | None = None
        self._session: Any = None
        self._connect_lock = threading.Lock()
        self._ddl_lock = threading.Lock()
        self._tables: dict[TableRef, _Table] = {}
        self._prepared: dict[tuple[Any, ...], PreparedStatement] = {}
        self._status_ready = False
        #: Columns dropped by schema events, per table: left out of older versions' rows.
        self._dropped: dict[TableRef, frozenset[str]] = {}

    # -- connection ------------------------------------------------------------------------------

    def session(self) -> Any:
        """The driver session, connecting on first use; raises ``CassandraUnavailableError``."""
        if self._session is not None:
            return self._session
        s = self.settings
        with self._connect_lock:
            if self._session is None:
                profile = ExecutionProfile(
                    load_balancing_policy=TokenAwarePolicy(
                        DCAwareRoundRobinPolicy(local_dc=s.local_dc)),
                    consistency_level=self._consistency, request_timeout=s.request_timeout)
                kwargs: dict[str, Any] = {}
                if s.protocol_version is not None:
                    kwargs["protocol_version"] = s.protocol_version
                cluster = Cluster(list(s.hosts), port=s.port, connect_timeout=10,
                                  execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                                  reconnection_policy=ConstantReconnectionPolicy(1.0, None),
                                  **kwargs)
                try:
                    self._session = cluster.connect()
                except Exception as exc:
                    cluster.shutdown()
                    raise classify(exc) from None
                self._cluster = cluster
        return self._session

    def _wait_for_a_host(self) -> None:
        """While every known host is down, wait up to ``reconnect_timeout`` for one."""
        assert self._cluster is not None
        deadline = time.monotonic() + self.settings.reconnect_timeout
        while not any(h.is_up for h in self._cluster.metadata.all_hosts()):
            if time.monotonic() >= deadline:
                raise CassandraUnavailableError(
                    f"no Cassandra host up for {self.settings.reconnect_timeout:.0f}s "
                    f"(contact {','.join(self.settings.hosts)}:{self.settings.port})")
            time.sleep(0.1)

    def _execute(self, cql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self.session().execute(cql, params)
        except ApplyError:
            raise
        except Exception as exc:
            raise classify(exc, cql) from None

    # -- schema ----------------------------------------------------------------------------------

    def table(self, op: RowOp) -> _Table:
        """The table of ``op``, created or widened first when needed and allowed."""
        info = self._tables.get(op.table)
        if info is not None and all(c.name in info.columns for c in op.columns):
            return info
        with self._ddl_lock:
            return self._ensure_table(op)

    def _ensure_table(self, op: RowOp) -> _Table:
        s = self.settings
        mapping = TableMapping.of(op.table, s.default_keyspace, s.clustering)
        meta = self._table_metadata(mapping)
        if meta is None:
            if not s.create:
                raise UnsupportedOperationError(
                    f"table {mapping.keyspace}.{mapping.table} does not exist (create=false)")
            self._execute(schema.create_keyspace(mapping.keyspace, s.replication_factor))
            self._execute(schema.create_table(mapping, op.table, op.key_columns, op.columns))
            meta = self._table_metadata(mapping, refresh=True)
            if meta is None:
                raise CassandraUnavailableError(
                    f"table {mapping.keyspace}.{mapping.table} not visible after creation")
        missing = [c for c in op.columns if c.name not in meta.columns]
        if missing:
            # A column a schema event dropped -- in this process or before its restart:
            # Cassandra remembers it -- is never added back for the rows of older versions
            # that still name it (``_without_dropped`` leaves it out of them).
            gone = self._dropped_in_cassandra(mapping) & {c.name for c in missing}
            if gone:
                self._dropped = {**self._dropped,
                                 op.table: self._dropped.get(op.table, frozenset()) | gone}
                missing = [c for c in missing if c.name not in gone]
        if missing and not s.create:
            raise UnsupportedOperationError(
                f"table {mapping.keyspace}.{mapping.table} has no column {missing[0].name!r} "
                f"(create=false)")
        for col in missing:
            self._execute(schema.add_column(mapping, op.table, col))
        if missing:
            meta = self._table_metadata(mapping, refresh=True)
            assert meta is not None
        info = _Table(mapping, tuple(c.name for c in meta.partition_key), set(meta.columns))
        self._tables[op.table] = info
        return info

    def apply_schema(self, event: SchemaEvent) -> None:
        """Make the schema change ``event`` in Cassandra (module docstring); raises
        ``UnsupportedOperationError`` for what CQL cannot do."""
        ref = TableRef.parse(event.table)
        s = self.settings
        if not s.create:
            raise UnsupportedOperationError(
                f"table {event.table}: create=false: the applier changes no table")
        mapping = TableMapping.of(ref, s.default_keyspace, s.clustering)
        with self._ddl_lock:
            meta = self._table_metadata(mapping, refresh=True)
            existing = None if meta is None else frozenset(meta.columns)
            key = () if meta is None else tuple(c.name for c in meta.primary_key)
            types = None if meta is None else {n: c.cql_type for n, c in meta.columns.items()}
            cql = shared.schema_change_cql(mapping, event, existing, key, types)
            if meta is None and event.kind != "drop_table":
                self._execute(schema.create_keyspace(mapping.keyspace, s.replication_factor))
            # The driver answers a schema change once it has re-read that table's metadata
            # (``is_schema_agreed``); reading it again here would only delay the rows after
            # the change (the dispatcher holds them back until this returns).
            stale = False
            for statement in cql.statements:
                stale |= not _driver_refreshed(self._execute(statement))
            for note in cql.notes:
                log.warning("applier %s: schema change %s version %d (%s): %s", self.name,
                            event.table, event.version, event.kind, note)
            self._tables.pop(ref, None)
            self._prepared = {k: v for k, v in self._prepared.items()
                              if len(k) < 2 or k[1] != ref}
            dropped = set(self._dropped.get(ref, ()))
            if event.kind == "drop_column" and event.column is not None:
                dropped.add(event.column.name)
            elif event.kind == "add_column" and event.column is not None:
                dropped.discard(event.column.name)
            elif event.kind in ("create", "drop_table"):
                dropped.clear()
            self._dropped = {**self._dropped, ref: frozenset(dropped)}
            if stale and event.kind != "drop_table":
                self._table_metadata(mapping, refresh=True)

    def _dropped_in_cassandra(self, mapping: TableMapping) -> frozenset[str]:
        """The columns Cassandra records as dropped from ``mapping``'s table (and not added
        back since: those are columns again)."""
        return frozenset(r.column_name for r in self._execute(
            shared.DROPPED_COLUMNS_CQL, (mapping.keyspace, mapping.table)))

    def _without_dropped(self, op: RowOp) -> RowOp:
        """``op`` without the columns a schema event dropped from its table."""
        gone = self._dropped.get(op.table)
        if not gone or not any(c.name in gone for c in op.columns):
            return op
        keep = [(c, v) for c, v in zip(op.columns, op.values, strict=True)
                if c.name not in gone]
        return dataclasses.replace(op, columns=tuple(c for c, _ in keep),
                                   values=tuple(v for _, v in keep))

    def _table_metadata(self, mapping: TableMapping, *, refresh: bool = False) -> Any:
        self.session()
        assert self._cluster is not None
        if refresh:
            try:
                self._cluster.refresh_table_metadata(mapping.keyspace, mapping.table)
            except Exception as exc:
                raise classify(exc) from None
        keyspace = self._cluster.metadata.keyspaces.get(mapping.keyspace)
        return None if keyspace is None else keyspace.tables.get(mapping.table)

    def _ensure_status_table(self) -> None:
        if self._status_ready:
            return
        with self._ddl_lock:
            if not self._status_ready:
                s = self.settings
                if s.create:
                    self._execute(schema.create_keyspace(s.status_keyspace,
                                                         s.replication_factor))
                    self._execute(schema.create_status_table(s.status_keyspace))
                self._status_ready = True

    def prepared(self, cache_key: tuple[Any, ...], cql: str) -> PreparedStatement:
        """The prepared statement for ``cql``, prepared once per ``cache_key``."""
        stmt = self._prepared.get(cache_key)
        if stmt is None:
            try:
                stmt = self.session().prepare(cql)
            except ApplyError:
                raise
            except Exception as exc:
                raise classify(exc, cql) from None
            stmt.consistency_level = self._consistency
            self._prepared[cache_key] = stmt
        return stmt

    # -- statements ------------------------------------------------------------------------------

    def _insert(self, info: _Table, op: RowOp, key: tuple[Any, ...], ts: int) -> Item:
        cols = (*op.key_columns, *op.columns)
        names = tuple(c.name for c in cols)
        stmt = self.prepared(("insert", op.table, names), schema.insert_row(info.mapping, names))
        values = [schema.cql_value(c, v) for c, v in zip(cols, (*key, *op.values), strict=True)]
        return stmt, [*values, ts]

    def _delete(self, info: _Table, op: RowOp, key: tuple[Any, ...], ts: int) -> Item:
        names = tuple(c.name for c in op.key_columns)
        stmt = self.prepared(("delete", op.table, names),
                             schema.delete_row(info.mapping, names))
        return stmt, [ts, *(schema.cql_value(c, v)
                            for c, v in zip(op.key_columns, key, strict=True))]

    def _update(self, info: _Table, op: RowOp, ts: int) -> Item:
        keys = tuple(c.name for c in op.key_columns)
        names = tuple(c.name for c in op.columns)
        stmt = self.prepared(("update", op.table, keys, names),
                             schema.update_row(info.mapping, keys, names))
        values = [schema.cql_value(c, v) for c, v in zip(op.columns, op.values, strict=True)]
        key = [schema.cql_value(c, v) for c, v in zip(op.key_columns, op.key, strict=True)]
        return stmt, [ts, *values, *key]

    def _row_items(self, info: _Table, op: RowOp) -> list[Item]:
        """The statements of one non-MOVE row operation (all in the row's partition)."""
        sub = self.clock.sub(op.row_id, op)
        ts = write_timestamp(op.log_index, op.statement, sub)
        if op.kind is OpKind.INSERT:
            return [self._insert(info, op, op.key, ts)]
        if op.kind is OpKind.UPSERT:
            clear = write_timestamp(op.log_index, op.statement, sub, phase=0)
            return [self._delete(info, op, op.key, clear), self._insert(info, op, op.key, ts)]
        if op.kind is OpKind.UPDATE:
            return [self._update(info, op, ts)] if op.columns else []
        if op.kind is OpKind.DELETE:
            return [self._delete(info, op, op.key, ts)]
        raise UnsupportedOperationError(f"applier {self.name!r} does not apply {op.kind.name}")

    def _status_items(self, ops: Sequence[RowOp]) -> list[Item]:
        latest: dict[int, RowOp] = {}
        for op in ops:
            if op.gtid.server_id == 0 and op.gtid.trans_id == 0:
                continue
            best = latest.get(op.gtid.server_id)
            if best is None or (op.log_index, op.statement) > (best.log_index, best.statement):
                latest[op.gtid.server_id] = op
        if not latest:
            return []
        self._ensure_status_table()
        ks = self.settings.status_keyspace
        stmt = self.prepared(("status", ks), schema.status_insert(ks))
        return [(stmt, [op.gtid.server_id, op.gtid.trans_id, op.log_index, op.statement,
                        op.epoch, op.commit_ts_ns, write_timestamp(op.log_index, op.statement)])
                for op in latest.values()]

    def _batch(self, items: list[Item]) -> BatchStatement:
        batch = BatchStatement(batch_type=BatchType.UNLOGGED,
                               consistency_level=self._consistency)
        for stmt, params in items:
            batch.add(stmt, params)
        return batch

    # -- applying --------------------------------------------------------------------------------

    def apply(self, ops: Sequence[RowOp]) -> None:
        """Write ``ops`` (and the apply status) in one concurrent round; raise on failure."""
        if not ops:
            return
        self.session()
        self._wait_for_a_host()
        if len(ops) == 1 and ops[0].kind is OpKind.MOVE:
            self._move(ops[0])
            self._run(self._status_items(ops))
            return
        groups: dict[tuple[Any, ...], list[Item]] = {}
        for op in ops:
            if op.kind is OpKind.MOVE:  # the dispatcher sends a MOVE alone; be safe anyway
                self.apply([op])
                continue
            if self._dropped:
                op = self._without_dropped(op)
            info = self.table(op)
            if self._dropped:  # ``table`` may have found columns dropped before a restart
                op = self._without_dropped(op)
            items = self._row_items(info, op)
            if items:
                key = dict(zip((c.name for c in op.key_columns), op.key, strict=True))
                part = (op.table, *(key[n] for n in info.partition_key))
                groups.setdefault(part, []).extend(items)
        round_: list[Any] = [items[0] if len(items) == 1 else (self._batch(items), ())
                             for items in groups.values()]
        self._run([*round_, *self._status_items(ops)])

    def _run(self, items: list[Any]) -> None:
        if not items:
            return
        results = execute_concurrent(self.session(), items, concurrency=self.settings.concurrency,
                                     raise_on_first_error=False)
        errors = [(item, r.result_or_exc) for item, r in zip(items, results, strict=True)
                  if not r.success]
        if not errors:
            return
        classified = [classify(exc, _cql_of(item[0])) for item, exc in errors]
        permanent = [e for e in classified if not isinstance(e, TransientApplyError)]
        first = (permanent or classified)[0]
        more = f" (and {len(errors) - 1} more failed)" if len(errors) > 1 else ""
        raise type(first)(f"{first}{more}")

    def _move(self, op: RowOp) -> None:
        info = self.table(op)
        assert op.new_key is not None
        keys = tuple(c.name for c in op.key_columns)
        cql = schema.select_row(info.mapping, keys)
        stmt = self.prepared(("select", op.table, keys), cql)
        key = [schema.cql_value(c, v) for c, v in zip(op.key_columns, op.key, strict=True)]
        try:
            row = self.session().execute(stmt, key).one()
        except Exception as exc:
            raise classify(exc, cql) from None
        old_sub = self.clock.sub(op.row_id, op)
        new_sub = self.clock.sub((op.table, op.new_key), op)
        if row is None:
            return
        merged = {n: v for n, v in row._asdict().items() if n not in keys and v is not None}
        merged.update(zip((c.name for c in op.columns), op.values, strict=True))
        types = {c.name: c for c in op.columns}
        cols = tuple(types.get(n) or _column_like(n, v) for n, v in merged.items())
        moved = RowOp(OpKind.UPSERT, op.table, op.key_columns, op.new_key, cols,
                      tuple(merged.values()), op.gtid, op.log_index, op.epoch, op.author,
                      op.commit_ts_ns, statement=op.statement)
        info = self.table(moved)
        ts_new = write_timestamp(op.log_index, op.statement, new_sub)
        clear = write_timestamp(op.log_index, op.statement, new_sub, phase=0)
        self._run([(self._batch([self._delete(info, moved, op.new_key, clear),
                                 self._insert(info, moved, op.new_key, ts_new)]), ())])
        self._run([self._delete(info, op, op.key,
                                write_timestamp(op.log_index, op.statement, old_sub))])

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Shut the driver down; idempotent."""
        cluster, self._cluster, self._session = self._cluster, None, None
        if cluster is not None:
            cluster.shutdown()


def _cql_of(statement: Any) -> str:
    if isinstance(statement, BatchStatement):
        return "BEGIN UNLOGGED BATCH ..."
    return str(getattr(statement, "query_string", statement))


def _column_like(name: str, value: Any) -> Column:
    """A column for a value read back from Cassandra (MOVE): its type from the Python value."""
    ft = FieldType
    if isinstance(value, bool):
        return Column(name, ft.FIELD_TYPE_BOOLEAN)
    if isinstance(value, int):
        return Column(name, ft.FIELD_TYPE_INTEGER)
    if isinstance(value, float):
        return Column(name, ft.FIELD_TYPE_DOUBLE)
    if isinstance(value, bytes):
        return Column(name, ft.FIELD_TYPE_BLOB)
    return Column(name, ft.FIELD_TYPE_VARCHAR)
