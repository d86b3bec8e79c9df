"""Client transactions applied to the store: the part of ``StoreStateMachine`` (see
``state_machine`` for the rules every replica follows) that applies ``TRANSACTION`` entries.

Two paths write byte for byte the same store operations:

- the fast path (:meth:`TransactionApply._apply_fast`) takes a transaction made only of
  inserts into known tables straight from its wire bytes (``wire.parse_txn``,
  ``wire.insert_rows``): per statement one cached header, per record the key and the stored
  ``Row`` assembled from byte slices;
- the general path (:meth:`TransactionApply._apply_txn`) parses the ``Transaction``, checks
  it against the first-seen schemas (``validation``) and its conditions against the rows as
  they stand (``conditions.refusal``: a refused conditional write is marked, not applied),
  and writes every statement.

Both honour idempotency keys: a duplicate of an entry still inside the window is marked
``x<index>`` and answered with the first result; records expire by commit time
(:meth:`TransactionApply._expire`). Replicated epochs (``epoch_apply``) write their rows
through the same two paths with the origin's metadata.

``TransactionApply`` is a base of ``StoreStateMachine``, not used alone: the attributes
annotated below are the state machine's, set by its ``_load``.
"""

from __future__ import annotations

import struct
from typing import cast

from gateway.core.lsm import LSMStore
from gateway.core.lsm.format import prefix_end
from gateway.node.base.errors import PreconditionFailed
from gateway.node.base.validation import (
    InvalidRequest,
    TableSchema,
    check_statements,
    qualified_name,
)
from gateway.node.state import keys
from gateway.node.state.conditions import refusal, refusal_marker, refusal_of_marker
from gateway.node.state.schema_apply import TableState, implicit_event, record_event
from gateway.node.state.schema_replica import upcast_transaction
from gateway.node.state.store_ops import MISSING as _MISSING
from gateway.node.state.store_ops import Ops, ParsedTxn, RowMeta, meta_op
from gateway.node.state.wire import (
    insert_header_span,
    insert_rows,
    meta_parts,
    put_pairs,
    retag_record,
    row_tail,
    split_insert,
    write_result,
)
from gateway.raft import Entry
from gateway.schema.codec import event_id
from gateway.schema.model import SchemaEvent
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, transaction_pb2

__all__ = ["Applied", "TransactionApply", "schema_to_row"]

# past every expiry index key (the prefix is not all 0xff: there is such a key)
_J_END = cast(bytes, prefix_end(keys.IDEMPOTENCY_EXPIRY_PREFIX))
_EXPIRY_GRAIN_NS = 10**9



class Applied:
    """The outcome of one applied transaction entry (``result`` or ``error`` is set).

    ``wire``: the serialized ``WriteResult``; ``result`` is parsed from it on first use, so a
    replica with nobody waiting for the entry never builds the message."""

    __slots__ = ("_result", "error", "index", "term", "wire")

    def __init__(self, index: int, term: int, result: gateway_pb2.WriteResult | None = None,
                 error: InvalidRequest | PreconditionFailed | None = None,
                 wire: bytes | None = None) -> None:
        self.index = index
        self.term = term
        self._result = result
        self.error = error
        self.wire = wire

    @property
    def result(self) -> gateway_pb2.WriteResult | None:
        if self._result is None and self.wire is not None:
            self._result = gateway_pb2.WriteResult.FromString(self.wire)
        return self._result


def schema_to_row(name: str, schema: TableSchema) -> bytes:
    """The stored form (``s<name>``) of a first-seen table schema: a ``Row`` without values."""
    # Split at the first dot: the leader refuses dots in schema and table names (a name
    # without one is a schema-less table of an old log).
    schema_name, dot, table = name.partition(".")
    if not dot:
        schema_name, table = "", schema_name
    row = gateway_pb2.Row(table=statement_pb2.TableMetadata(schema_name=schema_name,
                                                            table_name=table))
    for n, t in schema.key_fields:
        row.key_fields.add(name=n, type=t)
    key_names = {n for n, _ in schema.key_fields}
    for n, t in schema.columns.items():
        if n not in key_names:
            row.fields.add(name=n, type=t)
    return row.SerializeToString()


def _no_renames(_table: str) -> list[tuple[str, str]]:
    return []  # a local write names the current columns (checked at apply)


class TransactionApply:
    """Applies client transaction entries (see the module docstring)."""

    store: LSMStore
    schemas: dict[str, TableSchema]
    #: The tables' definitions and versions (``schema_apply``; replaced, never mutated).
    tables: dict[str, TableState]
    window_ns: int
    last_trans_id: int
    last_commit_ts: int
    #: Idempotency record keys the store held nothing for when the running ``apply`` began.
    _unrecorded: set[bytes] | frozenset[bytes]
    _expired_to: int
    _oldest_expiry: int | None
    _heads: dict[bytes, tuple[bytes, bytes, bytes]]
    _marked: list[int]
    #: The schema events each log index applied, with the epoch they belong to (0: the
    #: entry's own), for the change feed: a channel sends them before the entry's records.
    schema_at: dict[int, list[tuple[SchemaEvent, int]]]

    def _note_schema(self, index: int, event: SchemaEvent, epoch: int = 0) -> None:
        """Remember that log ``index`` applied ``event`` (``schema_at``)."""
        self.schema_at.setdefault(index, []).append((event, epoch))

    def idempotent_result(self, key: str, now_ns: int) -> gateway_pb2.WriteResult | None:
        """The recorded result of the write with idempotency key ``key``, if one was applied
        and is still inside the idempotency window at wall-clock time ``now_ns``."""
        raw = self.store.get(keys.idempotency_key(key))
        if raw is None:
            return None
        res = gateway_pb2.WriteResult.FromString(raw)
        return res if res.commit_timestamp_ns >= now_ns - self.window_ns else None

    def unrecorded(self, idems: list[str]) -> set[str]:
        """The keys of ``idems`` (idempotency keys, not empty) the store holds no record for
        -- live, expired or deleted -- so that ``idempotent_result`` of each is None: one
        batched probe (``LSMStore.held``) for a request of many keyed writes, instead of a
        lookup per write."""
        if not idems:
            return set()
        by_record = {keys.idempotency_key(k): k for k in idems}
        return {by_record[ik] for ik in self._unheld(list(by_record))}

    def _unheld(self, ikeys: list[bytes]) -> set[bytes]:
        """The idempotency record keys of ``ikeys`` the store holds nothing for (one
        ``LSMStore.held`` probe): the leader's ``unrecorded``, and ``apply``'s per batch."""
        return set(ikeys).difference(self.store.held(ikeys))

    def _first_result(self, ik: bytes, overlay: dict[bytes, bytes | None], commit_ts: int
                      ) -> gateway_pb2.WriteResult | None:
        """The live idempotency record under store key ``ik`` for an entry committed at
        ``commit_ts`` (None if absent or expired)."""
        raw = None if ik in self._unrecorded and ik not in overlay else self._get(ik, overlay)
        if raw is None:
            return None
        first = gateway_pb2.WriteResult.FromString(raw)
        return first if first.commit_timestamp_ns >= commit_ts - self.window_ns else None

    def _record_result(self, idem: str, result: bytes, commit_ts: int, ops: Ops,
                       overlay: dict[bytes, bytes | None]) -> None:
        ik = keys.idempotency_key(idem)
        overlay[ik] = result
        ops.append((ik, result, 0, 0, 0))  # a StoreOp's fields: a plain tuple on the fast path
        jk = keys.idempotency_expiry_key(commit_ts, idem)
        if self._oldest_expiry is None or commit_ts < self._oldest_expiry:
            self._oldest_expiry = commit_ts
        overlay[jk] = b""
        ops.append((jk, b"", 0, 0, 0))

    def _expire(self, ops: Ops, overlay: dict[bytes, bytes | None]) -> None:
        """Delete the idempotency records (and index entries) older than the expiry bound of
        ``last_commit_ts`` -- those in the store and those this batch wrote."""
        bound = (self.last_commit_ts - self.window_ns) // _EXPIRY_GRAIN_NS * _EXPIRY_GRAIN_NS
        if bound <= self._expired_to:
            return
        if self._oldest_expiry is None or self._oldest_expiry >= bound:
            self._expired_to = bound  # nothing below the bound, in the store or this batch
            return
        lo = keys.idempotency_expiry_bound(self._expired_to)
        hi = keys.idempotency_expiry_bound(bound)
        found: set[bytes] = set()
        later: list[bytes] = []  # the first entry not due, in the store and in this batch
        for k, _ in self.store.scan(lo, _J_END):
            if k >= hi:
                later.append(k)
                break
            found.add(k)
        for k, v in overlay.items():
            if v is None or not lo <= k < _J_END:
                continue
            if k < hi:
                found.add(k)
            else:
                later.append(k)
        for jk in sorted(found):
            if overlay.get(jk, _MISSING) is None:
                continue  # already deleted in this batch
            ts, ik = keys.parse_idempotency_expiry_key(jk)
            raw = self._get(ik, overlay)
            # A key reused after expiry has a newer record (and index entry): keep it.
            if raw is not None and gateway_pb2.WriteResult.FromString(raw) \
                    .commit_timestamp_ns == ts:
                overlay[ik] = None
                ops.append(meta_op(ik, None))
            overlay[jk] = None
            ops.append(meta_op(jk, None))
        self._expired_to = bound
        self._oldest_expiry = keys.parse_idempotency_expiry_key(min(later))[0] if later \
            else None

    def _insert_head(self, hdr: bytes) -> tuple[bytes, bytes, bytes] | None:
        """``(row key prefix, Row fields 1-2, Row field 4)`` of an insert statement whose
        table, key fields and fields serialize to ``hdr``, when the table's first-seen schema
        exists and the statement is compatible with it (cached: a recorded schema never
        changes, and the cache is cleared when the store is replaced); None otherwise (the
        general path creates the schema or rejects the entry)."""
        got = self._heads.get(hdr)
        if got is not None:
            return got
        try:
            body = statement_pb2.InsertStatement.FromString(hdr)
        except Exception:  # anything unusual takes the general path
            return None
        body.records.add()  # the statement has records (the schema check needs one)
        stmt = statement_pb2.Statement(insert=body)
        name = qualified_name(body.table)
        known = self.schemas.get(name)
        if known is None or len(body.key_fields) + len(body.fields) < len(known.columns):
            return None  # a column not named takes its default: the general path
        try:
            if check_statements([stmt], self.schemas, rows=False):
                return None
        except InvalidRequest:
            return None
        split = split_insert(hdr)
        if split is None:
            return None
        head, mid, _ = split
        got = (keys.table_prefix(body.table.schema_name, body.table.table_name), head, mid)
        if len(self._heads) >= 4096:
            self._heads.clear()
        self._heads[hdr] = got
        return got

    def _apply_fast(self, e: Entry, parsed: ParsedTxn | None, ops: Ops,
                    overlay: dict[bytes, bytes | None]) -> Applied | None:
        """Apply a transaction entry made only of inserts into known tables straight from its
        wire bytes: per statement one cached header (row key prefix, serialized table, key
        fields and fields), per record the key encoded from the value bytes and the stored
        ``Row`` assembled from byte slices -- byte for byte what the general path
        (:meth:`_apply_txn`) writes. ``parsed``: ``parse_txn(e.data)``. Returns None, having
        changed nothing but the (idempotent) high-water marks, when the entry needs the
        general path."""
        data = e.data
        if parsed is None:
            return None
        sid, tid, epoch, author, commit_ts, stmts, idem = parsed
        index = e.index
        if not stmts:
            return None  # the general path rejects it
        _, tail, result = meta_parts(sid, tid, epoch, author, commit_ts, index)
        rows = self._wire_rows(data, stmts, tail, epoch, author, commit_ts)
        if rows is None:
            return None
        self.last_trans_id = max(self.last_trans_id, tid)
        self.last_commit_ts = max(self.last_commit_ts, commit_ts)
        if idem:
            first = self._first_result(keys.idempotency_key(idem), overlay, commit_ts)
            if first is not None and first.log_index != index:
                self._mark(ops, index, b"duplicate")
                refused = self._refusal_at(first.log_index, overlay)
                if refused is not None:  # a retry of a refused conditional write
                    return Applied(index, e.term, error=refused)
                first.duplicate = True
                return Applied(index, e.term, result=first)
        ops += rows
        put_pairs(overlay, rows)
        if idem:
            self._record_result(idem, result, commit_ts, ops, overlay)
        return Applied(index, e.term, wire=result)

    def _wire_rows(self, data: bytes, stmts: list[tuple[int, int]], tail: bytes, epoch: int,
                   author: int, commit_ts: int) -> Ops | None:
        """The store operations of a transaction payload ``data`` whose statements (spans
        ``stmts``) are all inserts into known tables, with row metadata ``epoch``, ``author``
        and ``commit_ts`` (a ``RowMeta``'s fields, passed apart: the fast path builds no tuple
        for them) and ``tail`` from ``meta_parts``; None when one needs the general path
        (nothing is changed)."""
        rows: Ops = []
        try:
            for s_start, s_end in stmts:
                span = insert_header_span(data, s_start, s_end)
                if span is None:  # not an insert whose header precedes its records
                    return None
                b_start, first_rec = span
                info = self._insert_head(data[b_start:first_rec])
                if info is None:
                    return None
                prefix, head, mid = info
                got = insert_rows(data, first_rec, s_end, prefix, head, mid, tail, epoch,
                                  author, commit_ts)
                if got is None:
                    return None
                rows += got
        except (IndexError, ValueError, struct.error):
            return None
        return rows

    def _record_schemas(self, created: list[tuple[str, TableSchema]], ops: Ops,
                        index: int = 0, origin: str = "") -> None:
        """Keep the first-seen schemas ``check_statements`` created, in memory and stored,
        each with its implicit definition (``schema_apply.implicit_event``: the first write's
        shape is the undeclared table's version, made by ``origin`` at log ``index``)."""
        for name, schema in created:
            self.schemas[name] = schema
            ops.append(meta_op(keys.schema_key(name), schema_to_row(name, schema)))
            have = self.tables.get(name)
            e = implicit_event(name, schema, origin, *((have.version, have.head)
                                                       if have is not None else (0, b"")))
            record_event(e, e.definition, index, ops)
            self._note_schema(index, e)
            self.tables = {**self.tables, name: TableState(e.definition, e.version,
                                                           event_id(e), True)}

    def _get(self, key: bytes, overlay: dict[bytes, bytes | None]) -> bytes | None:
        got = overlay.get(key, _MISSING)
        if got is _MISSING:
            return self.store.get(key)
        return got

    def _apply_txn(self, e: Entry, txn: transaction_pb2.Transaction, idem: str,
                   ops: Ops, overlay: dict[bytes, bytes | None]) -> Applied:
        g = txn.gtid
        self.last_trans_id = max(self.last_trans_id, g.trans_id)
        self.last_commit_ts = max(self.last_commit_ts, txn.commit_timestamp_ns)
        if idem:
            first = self._first_result(keys.idempotency_key(idem), overlay,
                                       txn.commit_timestamp_ns)
            if first is not None and first.log_index != e.index:
                self._mark(ops, e.index, b"duplicate")
                refused = self._refusal_at(first.log_index, overlay)
                if refused is not None:  # a retry of a refused conditional write
                    return Applied(e.index, e.term, error=refused)
                first.duplicate = True
                return Applied(e.index, e.term, result=first)
        try:
            created = check_statements(txn.statements, self.schemas, rows=False)
            refused = refusal(txn.conditions, self.schemas,
                              lambda k: self._get(k, overlay)) if txn.conditions else None
        except InvalidRequest as exc:
            self._mark(ops, e.index, f"rejected: {exc}".encode())
            return Applied(e.index, e.term, error=exc)
        gtid = gtid_pb2.Gtid(server_id=g.server_id, trans_id=g.trans_id)
        if refused is not None:
            marker = refusal_marker(refused)
            self._mark(ops, e.index, marker)
            overlay[keys.entry_outcome_key(e.index)] = marker  # seen by a retry in this batch
            if idem:
                self._record_result(idem, write_result(
                    gtid.SerializeToString(), txn.epoch, txn.commit_timestamp_ns, e.index),
                    txn.commit_timestamp_ns, ops, overlay)
            return Applied(e.index, e.term, error=refused)
        self._record_schemas(created, ops, e.index, str(g.server_id))
        meta = RowMeta(txn.epoch, txn.author, txn.commit_timestamp_ns)
        # an insert stores every column of the definition (one it does not name takes its
        # default), as a replica stores it (``schema_replica.upcast_transaction``)
        full = upcast_transaction(txn, self.tables, _no_renames)
        self._write_statements(full or txn, e.index, gtid, meta, ops, overlay)
        raw = write_result(gtid.SerializeToString(), txn.epoch, txn.commit_timestamp_ns,
                            e.index)
        if idem:
            self._record_result(idem, raw, txn.commit_timestamp_ns, ops, overlay)
        return Applied(e.index, e.term, wire=raw)

    def _write_statements(self, txn: transaction_pb2.Transaction, index: int,
                          gtid: gtid_pb2.Gtid, meta: RowMeta, ops: Ops,
                          overlay: dict[bytes, bytes | None]) -> None:
        """Write the rows of ``txn``'s (validated) statements at log ``index`` with row
        metadata ``meta`` = (epoch, author, commit timestamp)."""
        for stmt in txn.statements:
            kind = stmt.WhichOneof("kind")
            if kind == "insert":
                self._insert(stmt.insert, index, gtid, meta, ops, overlay)
            elif kind == "update":
                self._update(stmt.update, index, gtid, meta, ops, overlay)
            elif kind == "delete":
                body = stmt.delete
                t = body.table
                for rec in body.records:
                    k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
                    overlay[k] = None
                    ops.append((k, None, *meta))

    @staticmethod
    def _row(table: statement_pb2.TableMetadata, index: int, gtid: gtid_pb2.Gtid,
             meta: RowMeta) -> gateway_pb2.Row:
        epoch, author, commit_ts = meta
        return gateway_pb2.Row(table=table, epoch=epoch, author=author, gtid=gtid,
                               commit_timestamp_ns=commit_ts, log_index=index)

    def _insert(self, body: statement_pb2.InsertStatement, index: int, gtid: gtid_pb2.Gtid,
                meta: RowMeta, ops: Ops, overlay: dict[bytes, bytes | None]) -> None:
        t = body.table
        schema, table = t.schema_name, t.table_name
        # Fast path: the stored Row's bytes assembled from serialized parts in field order --
        # table + key_fields (1, 2, as in the statement), the record's key values re-tagged as
        # 3, fields (4), its after values re-tagged as 5, then the metadata (6-10): byte for
        # byte what ``Row.SerializeToString()`` gives, from one serialization of the statement
        # and without building a Row per record.
        split = split_insert(body.SerializeToString())
        if split is not None:
            head, mid, recs = split
            tail = row_tail(meta, gtid.SerializeToString(), index)
            rows: list[tuple[bytes, bytes]] = []
            for rec, raw in zip(body.records, recs, strict=True):
                parts = retag_record(raw)
                if parts is None:
                    break  # an unknown field in the record: the general path below
                rows.append((keys.row_key(schema, table, rec.key_values),
                             b"".join((head, parts[0], mid, parts[1], tail))))
            else:
                for k, v in rows:
                    overlay[k] = v
                    ops.append((k, v, *meta))
                return
        template = self._row(t, index, gtid, meta)
        template.key_fields.extend(body.key_fields)
        template.fields.extend(body.fields)
        for rec in body.records:
            row = gateway_pb2.Row()
            row.CopyFrom(template)
            row.key_values.extend(rec.key_values)
            row.values.extend(rec.after_values)
            k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
            v = row.SerializeToString()
            overlay[k] = v
            ops.append((k, v, *meta))

    def _update(self, body: statement_pb2.UpdateStatement, index: int, gtid: gtid_pb2.Gtid,
                meta: RowMeta, ops: Ops, overlay: dict[bytes, bytes | None]) -> None:
        t = body.table
        for rec in body.records:
            k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
            raw = self._get(k, overlay)
            if raw is None:
                continue  # UPDATE of a missing row leaves it missing
            row = gateway_pb2.Row.FromString(raw)
            pos = {f.name: i for i, f in enumerate(row.fields)}
            for f, value in zip(body.set_fields, rec.after_values, strict=True):
                i = pos.get(f.name)
                if i is None:
                    row.fields.add(name=f.name, type=f.type)
                    row.values.add().CopyFrom(value)
                else:
                    row.values[i].CopyFrom(value)
            row.epoch, row.author, row.commit_timestamp_ns = meta
            row.gtid.CopyFrom(gtid)
            row.log_index = index
            v = row.SerializeToString()
            overlay[k] = v
            ops.append((k, v, *meta))

    def _mark(self, ops: Ops, index: int, outcome: bytes) -> None:
        """Record that entry ``index`` is deliberately not applied (``skipped``), with
        ``outcome`` saying why, in this ``apply``'s ``ops``."""
        ops.append(meta_op(keys.entry_outcome_key(index), outcome))
        self._marked.append(index)


    def _refusal_at(self, index: int, overlay: dict[bytes, bytes | None]
                    ) -> PreconditionFailed | None:
        """:meth:`refusal_at` as the running ``apply`` sees it (its own marks included)."""
        return refusal_of_marker(self._get(keys.entry_outcome_key(index), overlay))

