"""The recorded conflicts of a cluster, read and acted on: ``ConflictsList`` (counts per table
and cause, then the exception rows, paged) and ``ConflictsReplay`` (write rejected changes
again, each conditional on the row being as the conflict found it). docs/conflicts.md,
"Listing and replaying conflicts".

Exceptions tables are the tables ``schema.table$EX`` of the replicated state
(``gateway.conflict.resolve.exception_row``), so any node lists them from its own store; a
replay is a write and runs on the leader (the API forwards it there).

A replay of exception row R of ``schema.table`` (op ``NDB$OP_TYPE``, columns ``c$OLD`` the
row here when judged, ``c$NEW`` the rejected change's values) is one write of this cluster:

- WRITE_ROW: an insert of the key with every non-null ``c$NEW``; UPDATE_ROW: an update of the
  non-null ``c$NEW`` columns (an insert when the row was missing); DELETE_ROW: a delete.
  An exception row cannot tell a column the change set to null from one it did not set, so
  a null ``c$NEW`` is never written.
- Its condition: the row is absent (when the conflict found no row: cause
  ``ROW_DOES_NOT_EXIST``, or every ``c$OLD`` null under ``TRANS_IN_CONFLICT``), else each
  ``c$OLD`` column still holds that value. The exception row keeps the row's values, not the
  GTID that wrote them (the primary's refresh rewrote the row with a new GTID and the same
  values), so the values are the version compared. A row changed since is refused by the
  condition and reported ``changed-since``, never overwritten.
- Its idempotency key ``conflict-replay:schema.table:S/SRC/EPOCH/COUNT``: a second run is
  answered with the first one's result (``already-applied``); after the key expired, a row
  that already holds what the replay would write is reported ``already-applied`` without
  writing. The key's record is also the exception's mark: ``ConflictsList`` shows what the
  replay did (``ConflictRow.replayed``) while the node keeps it (its idempotency window).

Rows are replayed grouped by row key, each key's exceptions in id order (the order they were
recorded), one write at a time.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from gateway.node.base.errors import PreconditionFailed
from gateway.node.base.validation import InvalidRequest
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state import keys
from gateway.v1 import gateway_pb2, statement_pb2, transaction_pb2, value_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver
    from gateway.node.state.state_machine import StoreStateMachine

__all__ = ["EX_KEY", "list_conflicts", "replay_conflicts"]

#: The key columns of every exceptions table, in order.
EX_KEY = ("server_id", "source_server_id", "source_epoch", "count")
_OP, _CAUSE, _ORIG = "NDB$OP_TYPE", "NDB$CFT_CAUSE", "NDB$ORIG_TRANSID"
_SUFFIX = "$EX"
_DEFAULT_LIMIT, _MAX_LIMIT = 100, 10000
_NULL = value_pb2.Value(null_value=value_pb2.NULL_VALUE)


@dataclass(frozen=True, slots=True)
class _Ex:
    """One exception row: its table (``schema.table``), id and the stored row."""

    table: str
    ident: tuple[int, int, int, int]
    row: gateway_pb2.Row

    @property
    def id(self) -> str:
        return "/".join(str(p) for p in self.ident)

    def column(self, name: str) -> value_pb2.Value | None:
        for f, v in zip(self.row.fields, self.row.values, strict=False):
            if f.name == name:
                return v
        return None

    def text(self, name: str) -> str:
        v = self.column(name)
        return v.string_value if v is not None else ""


def _is_null(v: value_pb2.Value | None) -> bool:
    return v is None or v.WhichOneof("kind") in (None, "null_value")


def parse_id(text: str, field: str) -> tuple[int, int, int, int]:
    """``SERVER/SOURCE/EPOCH/COUNT`` as four integers; ``InvalidRequest`` naming ``field``."""
    parts = text.split("/")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise InvalidRequest(field, f"{text!r}: give SERVER/SOURCE/EPOCH/COUNT as "
                             f"`gateway conflicts list` prints it")
    a, b, c, d = (int(p) for p in parts)
    return a, b, c, d


def exception_tables(sm: StoreStateMachine, pattern: str) -> list[str]:
    """The tables (``schema.table``, sorted) with an exceptions table whose name matches
    ``pattern`` (``*`` and ``?`` wildcards; "" or ``*``: every table)."""
    names = sorted(n[:-len(_SUFFIX)] for n in sm.schemas if n.endswith(_SUFFIX))
    if not pattern or pattern == "*":
        return names
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def _check_pattern(pattern: str, field: str) -> None:
    if pattern and pattern != "*" and pattern.count(".") != 1:
        raise InvalidRequest(field, f"{pattern!r}: give a table as schema.table (* and ? "
                             f"wildcards), or nothing for every table")
    if pattern.endswith(_SUFFIX):
        raise InvalidRequest(field, f"{pattern!r}: name the table, not its exceptions table "
                             f"(schema.table, not schema.table$EX)")


def _rows(sm: StoreStateMachine, table: str,
          start: tuple[int, int, int, int] | None = None) -> Iterator[_Ex]:
    schema, _, name = table.partition(".")
    lo = [value_pb2.Value(uint_value=p) for p in start] if start else []
    for row in sm.scan_rows(schema, name + _SUFFIX, lo, []):
        kv = row.key_values
        if [f.name for f in row.key_fields] != list(EX_KEY):
            key = ", ".join(f"{f.name}={getattr(v, v.WhichOneof('kind') or 'null_value')!r}"
                            for f, v in zip(row.key_fields, kv, strict=False))
            raise InvalidRequest("pattern", f"{table}{_SUFFIX}: the row with key {key} was not "
                                 f"written by conflict detection (an exceptions row has the "
                                 f"key {'/'.join(EX_KEY)}); the $EX suffix is reserved for "
                                 f"exceptions tables")
        yield _Ex(table, (kv[0].uint_value, kv[1].uint_value, kv[2].uint_value,
                          kv[3].uint_value), row)


def replay_key(ex_table: str, ident: str) -> str:
    """The idempotency key of the replay of exception ``ident`` of ``ex_table``."""
    return f"conflict-replay:{ex_table}:{ident}"


def replayed(sm: StoreStateMachine, table: str, ident: str, now_ns: int) -> str:
    """What a replay of the exception did, as long as its idempotency key is kept (the
    node's idempotency window): ``applied S:T at log index I``, ``changed-since at log index
    I``, or "" (not replayed, or longer ago)."""
    res = sm.idempotent_result(replay_key(table, ident), now_ns)
    if res is None:
        return ""
    if sm.refusal_at(res.log_index) is not None:
        return f"changed-since at log index {res.log_index}"
    return f"applied {res.gtid.server_id}:{res.gtid.trans_id} at log index {res.log_index}"


def _conflict_row(sm: StoreStateMachine, ex: _Ex, now_ns: int) -> gateway_pb2.ConflictRow:
    return gateway_pb2.ConflictRow(table=ex.table, id=ex.id, op_type=ex.text(_OP),
                                   cause=ex.text(_CAUSE), orig_transid=ex.text(_ORIG),
                                   row=ex.row, replayed=replayed(sm, ex.table, ex.id, now_ns))


def list_conflicts(sm: StoreStateMachine, req: gateway_pb2.ConflictsListRequest
                   ) -> gateway_pb2.ConflictsListResponse:
    """Counts per table and cause of every table matching ``req.pattern`` (whole), then up
    to ``req.limit`` rows from ``req.page_token`` on (table, then id order)."""
    _check_pattern(req.pattern, "pattern")
    limit = req.limit or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise InvalidRequest("limit", f"{limit}: at most {_MAX_LIMIT}")
    after: tuple[str, tuple[int, int, int, int]] | None = None
    if req.page_token:
        table, sep, ident = req.page_token.rpartition("@")
        if not sep:
            raise InvalidRequest("page_token", f"{req.page_token!r}: not a page token")
        after = (table, parse_id(ident, "page_token"))
    out = gateway_pb2.ConflictsListResponse(applied_index=sm.store.applied_index)
    now = time.time_ns()
    for table in exception_tables(sm, req.pattern):
        counts: dict[str, int] = {}
        for ex in _rows(sm, table):
            cause = ex.text(_CAUSE)
            counts[cause] = counts.get(cause, 0) + 1
            if req.counts_only or (after is not None and (table, ex.ident) <= after):
                continue
            if len(out.rows) < limit:
                out.rows.append(_conflict_row(sm, ex, now))
            elif not out.next_page_token:
                last = out.rows[-1]
                out.next_page_token = f"{last.table}@{last.id}"
        for cause in sorted(counts):
            out.counts.append(gateway_pb2.ConflictCount(table=table, cause=cause,
                                                        count=counts[cause]))
    return out


# -- replay ---------------------------------------------------------------------------------


def _chosen(sm: StoreStateMachine, req: gateway_pb2.ConflictsReplayRequest) -> list[_Ex]:
    _check_pattern(req.table, "table")
    if req.ids:
        if not req.table or any(c in req.table for c in "*?"):
            raise InvalidRequest("table", "ids name rows of one table: give it as "
                                 "schema.table")
        if req.table not in exception_tables(sm, req.table):
            raise InvalidRequest("table", f"no conflicts recorded for {req.table}")
        wanted = [parse_id(t, f"ids[{i}]") for i, t in enumerate(req.ids)]
        have = {ex.ident: ex for ex in _rows(sm, req.table)}
        missing = [i for i, w in enumerate(wanted) if w not in have]
        if missing:
            i = missing[0]
            raise InvalidRequest(f"ids[{i}]", f"no conflict {req.ids[i]} recorded for "
                                 f"{req.table}")
        chosen = [have[w] for w in dict.fromkeys(wanted)]
    else:
        chosen = [ex for t in exception_tables(sm, req.table) for ex in _rows(sm, t)]
    return [ex for ex in chosen if not req.cause or ex.text(_CAUSE) == req.cause]


def _key_of(ex: _Ex, key_fields: Sequence[tuple[str, int]]) -> list[value_pb2.Value]:
    out = []
    for name, _ in key_fields:
        v = ex.column(name)
        if v is None:
            raise InvalidRequest("ids", f"{ex.table}{_SUFFIX} {ex.id}: no key column {name!r}")
        out.append(v)
    return out


def _images(ex: _Ex) -> tuple[dict[str, value_pb2.Value], dict[str, value_pb2.Value]]:
    """The row here when judged (``c$OLD``) and the change's non-null values (``c$NEW``)."""
    old: dict[str, value_pb2.Value] = {}
    new: dict[str, value_pb2.Value] = {}
    for f, v in zip(ex.row.fields, ex.row.values, strict=False):
        if f.name.endswith("$OLD"):
            old[f.name[:-4]] = v
        elif f.name.endswith("$NEW") and not _is_null(v):
            new[f.name[:-4]] = v
    return old, new


def _same(a: value_pb2.Value | None, b: value_pb2.Value) -> bool:
    if _is_null(a) or _is_null(b):
        return _is_null(a) and _is_null(b)
    assert a is not None
    ka = a.WhichOneof("kind")
    return ka == b.WhichOneof("kind") and bool(getattr(a, ka) == getattr(b, ka))


def _ft(t: int) -> value_pb2.FieldType:
    """A recorded column type (an int) as the enum type protobuf's stubs want."""
    return cast(value_pb2.FieldType, t)


def _plan(ex: _Ex, sm: StoreStateMachine
          ) -> tuple[statement_pb2.Statement, transaction_pb2.Condition, bool]:
    """The replay's statement, its condition, and whether the row already holds what the
    statement would write."""
    schema_of = sm.schemas.get(ex.table)
    if schema_of is None:
        raise InvalidRequest("table", f"{ex.table}: the table is not known here")
    key = _key_of(ex, schema_of.key_fields)
    old, new = _images(ex)
    op, cause = ex.text(_OP), ex.text(_CAUSE)
    schema, _, name = ex.table.partition(".")
    meta = statement_pb2.TableMetadata(schema_name=schema, table_name=name)
    kf = [statement_pb2.FieldMetadata(name=n, type=_ft(t)) for n, t in schema_of.key_fields]
    cols = sorted(c for c in new if c in schema_of.columns)
    sf = [statement_pb2.FieldMetadata(
        name=c, type=_ft(schema_of.columns[c])) for c in cols]
    absent = cause == "ROW_DOES_NOT_EXIST" or (
        cause == "TRANS_IN_CONFLICT" and all(_is_null(v) for v in old.values()))
    cond = transaction_pb2.Condition(table=ex.table, key=key)
    if absent:
        cond.absent = True
    else:
        names = sorted(old)
        cond.values.fields.extend(names)
        cond.values.values.extend(old[n] if not _is_null(old[n]) else _NULL for n in names)
        if not names:  # nothing to compare but the row's existence: its key
            cond.values.fields.extend(n for n, _ in schema_of.key_fields)
            cond.values.values.extend(key)
    raw = sm.store.get(keys.row_key(schema, name, key))
    current = gateway_pb2.Row.FromString(raw) if raw is not None else None
    if op == "DELETE_ROW":
        stmt = statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
            table=meta, key_fields=kf, records=[statement_pb2.DeleteRecord(key_values=key)]))
        return stmt, cond, current is None
    vals = [new[c] for c in cols]
    if op == "UPDATE_ROW" and not absent:
        stmt = statement_pb2.Statement(update=statement_pb2.UpdateStatement(
            table=meta, key_fields=kf, set_fields=sf,
            records=[statement_pb2.UpdateRecord(key_values=key, after_values=vals)]))
    else:
        stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=meta, key_fields=kf, fields=sf,
            records=[statement_pb2.InsertRecord(key_values=key, after_values=vals)]))
    done = False
    if current is not None:
        held = {f.name: v for f, v in zip(current.fields, current.values, strict=False)}
        done = all(_same(held.get(c), new[c]) for c in cols)
    return stmt, cond, done


async def replay_conflicts(driver: RaftDriver, req: gateway_pb2.ConflictsReplayRequest,
                           *, admin: bool = True) -> gateway_pb2.ConflictsReplayResponse:
    """Replay the exception rows ``req`` chooses (module docstring), on the leader."""
    sm = driver.sm
    chosen = _chosen(sm, req)
    by_key: dict[tuple[str, bytes], list[_Ex]] = {}
    for ex in chosen:
        schema_of = sm.schemas.get(ex.table)
        kv = _key_of(ex, schema_of.key_fields) if schema_of is not None else []
        by_key.setdefault((ex.table, keys.encode_key(kv)), []).append(ex)
    out = gateway_pb2.ConflictsReplayResponse()
    for group in by_key.values():
        for ex in sorted(group, key=lambda e: e.ident):
            o = out.outcomes.add(table=ex.table, id=ex.id)  # a reference, filled below
            stmt, cond, done = _plan(ex, sm)
            if done:
                o.outcome, o.detail = "already-applied", "the row holds the change's values"
                out.skipped += 1
                continue
            if req.dry_run:
                o.outcome = "would-apply"
                continue
            proposal = WriteProposal([stmt], replay_key(ex.table, ex.id),
                                     time.time_ns(), admin=admin, conditions=[cond])
            try:
                res = await driver.submit_write(proposal)
            except PreconditionFailed as exc:
                o.outcome = "changed-since"
                o.detail = str(exc).split(": ", 1)[-1]
                out.skipped += 1
                continue
            result = res if isinstance(res, gateway_pb2.WriteResult) else \
                gateway_pb2.WriteResult.FromString(res)
            gtid = f"{result.gtid.server_id}:{result.gtid.trans_id}"
            if result.duplicate:
                o.outcome, o.detail = "already-applied", f"by an earlier replay ({gtid})"
                out.skipped += 1
            else:
                o.outcome, o.detail = "applied", f"gtid {gtid} log index {result.log_index}"
                out.applied += 1
    return out
