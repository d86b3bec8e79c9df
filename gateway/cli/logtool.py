"""Standalone log files: the 2008 seed's binlog_writer / binlog_reader over the record stream.

A standalone log file is a stuffed record stream (``gateway.core.records``) that begins with
the ``FE FD`` separator; every record payload is a tagged message (``gateway.core.messages``),
normally a ``Transaction``. This module holds everything the ``gateway log`` commands do
except talking to the terminal: reading and appending log files, building the seed's
statement-based transaction, and rendering messages as SQL text or JSON. The click commands
are in ``gateway.cli.log``.

Contracts:

- Nothing here modifies a file except ``append_transaction``, which only appends.
- Bad input (missing or unreadable file, a file that is not a log, a malformed GTID) raises
  ``LogInputError`` with a one-line message naming the file; damaged records never raise, they
  are reported as ``DamagedRange`` values or ``RecordProblem`` values.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.message import Message

from gateway.core import messages, records
from gateway.core.fileio import local_fs
from gateway.core.messages import MessageDecodeError, TypeTag
from gateway.core.stuffing import SEPARATOR
from gateway.v1 import (
    applier_pb2,
    epoch_pb2,
    gtid_pb2,
    schema_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

__all__ = [
    "LogEntry",
    "LogInputError",
    "RecordProblem",
    "append_transaction",
    "format_gtid",
    "iter_entries",
    "next_trans_id",
    "parse_gtid",
    "read_log",
    "render_json",
    "render_text",
    "render_value",
    "sql_transaction",
    "transaction_gtid",
]

_U32 = 2**32 - 1
_U64 = 2**64 - 1


class LogInputError(Exception):
    """Input the log tools cannot work on; ``str()`` is a one-line message naming the input."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A decoded record of a log file: ``offset`` of the record, its tag and its message."""

    offset: int
    tag: TypeTag
    message: Message


@dataclass(frozen=True, slots=True)
class RecordProblem:
    """A record whose checksum is valid but whose payload is not a known tagged message."""

    offset: int
    error: MessageDecodeError

    def __str__(self) -> str:
        return f"record at offset {self.offset}: {self.error.reason}"


# --- files ----------------------------------------------------------------------------------


def read_log(path: str | os.PathLike[str], *, require_log: bool = True) -> bytes:
    """Return the bytes of the log file at ``path``.

    Raises ``LogInputError`` when the file is missing, is a directory or cannot be read, and,
    if ``require_log``, when it is not a record stream: it is non-empty, does not begin with
    ``FE FD`` and holds no valid record. (A file that begins with the separator is a log even
    when every record in it is damaged: that is corruption, not wrong input.)
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise LogInputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise LogInputError(f"{p}: is a directory") from None
    except OSError as exc:
        raise LogInputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if require_log and not _looks_like_log(data):
        raise LogInputError(f"{p}: not a log (no FE FD separator at the start, no valid record)")
    return data


def _looks_like_log(data: bytes) -> bool:
    if not data or data.startswith(SEPARATOR) or records.first_nonzero(data) == len(data):
        return True
    return next(records.scan(data), None) is not None


def append_transaction(path: str | os.PathLike[str], txn: transaction_pb2.Transaction) -> int:
    """Append ``txn`` as one record to the log at ``path``; return the record's offset.

    Creates the file, starting with ``FE FD``, if it does not exist. If the file does not end
    with a separator (a torn tail), one is written first so that the new record cannot be
    swallowed by the damaged bytes before it. The data is fsynced before returning.
    Raises ``LogInputError`` if the existing file is not a log or cannot be written.
    """
    p = Path(path)
    if p.exists():
        read_log(p)  # refuses a file that is not a log
    record = records.encode_record(messages.pack(txn))
    try:
        return local_fs().append_synced(str(p), record, boundary=SEPARATOR)
    except OSError as exc:
        raise LogInputError(f"{p}: cannot write: {exc.strerror or exc}") from None


def iter_entries(data: bytes) -> Iterator[LogEntry | RecordProblem]:
    """Decode every valid record of ``data`` in order; undecodable payloads become problems."""
    for record in records.scan(data):
        try:
            message = messages.unpack(record.payload)
        except MessageDecodeError as exc:
            yield RecordProblem(record.offset, exc)
            continue
        yield LogEntry(record.offset, messages.tag_of(message), message)


def next_trans_id(data: bytes, server_id: int) -> int:
    """One more than the largest ``trans_id`` of ``server_id`` in ``data``; 1 if there is none."""
    last = 0
    for entry in iter_entries(data):
        if isinstance(entry, LogEntry) and entry.tag is TypeTag.TRANSACTION:
            gtid = entry.message.gtid  # type: ignore[attr-defined]
            if gtid.server_id == server_id:
                last = max(last, gtid.trans_id)
    return last + 1


# --- building -------------------------------------------------------------------------------


def sql_transaction(
    *,
    server_id: int,
    trans_id: int,
    query: str,
    variables: Sequence[tuple[str, str]] = (),
    timestamp_ns: int,
    epoch: int = 0,
    author: int | None = None,
    session_id: int = 0,
    default_schema: str = "",
) -> transaction_pb2.Transaction:
    """Build the seed's statement-based transaction: one SQL statement with string variables.

    The transaction is a single segment (``segment_id`` 1, ``end_segment`` true); start and
    commit timestamps are both ``timestamp_ns``; ``author`` defaults to ``server_id``.
    """
    sql = statement_pb2.SqlStatement(
        session_id=session_id, default_schema=default_schema, query=query
    )
    for name, value in variables:
        sql.variables.add(name=name, value=value_pb2.Value(string_value=value))
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=server_id, trans_id=trans_id),
        epoch=epoch,
        author=server_id if author is None else author,
        start_timestamp_ns=timestamp_ns,
        commit_timestamp_ns=timestamp_ns,
        statements=[statement_pb2.Statement(sql=sql)],
        segment_id=1,
        end_segment=True,
    )


_GTID = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def parse_gtid(text: str) -> tuple[int, int]:
    """Parse ``"SERVER:TRANS"`` (e.g. ``"1:5"``) into ``(server_id, trans_id)``.

    Raises ``LogInputError`` for anything else or for numbers out of range (u32, u64).
    """
    match = _GTID.fullmatch(text)
    if match is None:
        raise LogInputError(f"invalid GTID {text!r}: expected SERVER:TRANS, e.g. 1:5")
    server_id, trans_id = int(match[1]), int(match[2])
    if server_id > _U32 or trans_id > _U64:
        raise LogInputError(f"invalid GTID {text!r}: server id or transaction id out of range")
    return server_id, trans_id


def format_gtid(gtid: gtid_pb2.Gtid) -> str:
    """The seed's rendering of a GTID: ``(server_id,trans_id)``."""
    return f"({gtid.server_id},{gtid.trans_id})"


# --- rendering: SQL text --------------------------------------------------------------------

_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _ident(name: str) -> str:
    if _PLAIN_IDENTIFIER.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _table(table: statement_pb2.TableMetadata) -> str:
    if table.schema_name:
        return f"{_ident(table.schema_name)}.{_ident(table.table_name)}"
    return _ident(table.table_name)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _iso_ns(ns: int) -> str:
    seconds, nanos = divmod(ns, 1_000_000_000)
    try:
        base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"@{ns}ns"
    return f"{base}.{nanos:09d}Z"


def render_value(value: value_pb2.Value) -> str:
    """Render ``value`` as a SQL literal (MySQL dialect); an unset value renders as ``<unset>``.

    Strings and temporal text are single-quoted, bytes are ``X'..'``, decimals are bare,
    timestamps are quoted ISO 8601 UTC with nanoseconds, non-finite doubles are quoted.
    """
    kind = value.WhichOneof("kind")
    if kind is None:
        return "<unset>"
    if kind == "null_value":
        return "NULL"
    if kind == "bool_value":
        return "TRUE" if value.bool_value else "FALSE"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "uint_value":
        return str(value.uint_value)
    if kind == "double_value":
        d = value.double_value
        return repr(d) if math.isfinite(d) else _quote(repr(d))
    if kind == "decimal_value":
        return value.decimal_value
    if kind == "string_value":
        return _quote(value.string_value)
    if kind == "bytes_value":
        return f"X'{value.bytes_value.hex().upper()}'"
    if kind == "timestamp_ns":
        return _quote(_iso_ns(value.timestamp_ns))
    raise AssertionError(f"unhandled Value kind {kind}")  # a new kind was added to the proto


def _values(values: Iterable[value_pb2.Value]) -> str:
    return ", ".join(render_value(v) for v in values)


def _where(fields: Sequence[statement_pb2.FieldMetadata], values: Sequence[value_pb2.Value]) -> str:
    terms = []
    for field, value in zip(fields, values, strict=False):
        op = " IS " if value.WhichOneof("kind") == "null_value" else " = "
        terms.append(f"{_ident(field.name)}{op}{render_value(value)}")
    return " AND ".join(terms) if terms else "<no key>"


def _render_statement(stmt: statement_pb2.Statement) -> list[str]:
    kind = stmt.WhichOneof("kind")
    if kind == "sql":
        sql = stmt.sql
        lines = [f"use {_ident(sql.default_schema)}"] if sql.default_schema else []
        lines += [
            f"set @{v.name} = {render_value(v.value)}"
            for v in sorted(sql.variables, key=lambda v: v.name)
        ]
        lines.append(sql.query)
        return lines
    if kind == "insert":
        ins = stmt.insert
        cols = ", ".join(_ident(f.name) for f in (*ins.key_fields, *ins.fields))
        return [
            f"INSERT INTO {_table(ins.table)} ({cols}) VALUES "
            f"({_values((*r.key_values, *r.after_values))});"
            for r in ins.records
        ]
    if kind == "update":
        upd = stmt.update
        lines = []
        for r in upd.records:
            sets = ", ".join(
                f"{_ident(f.name)} = {render_value(v)}"
                for f, v in zip(upd.set_fields, r.after_values, strict=False)
            )
            lines.append(
                f"UPDATE {_table(upd.table)} SET {sets} "
                f"WHERE {_where(upd.key_fields, r.key_values)};"
            )
        return lines
    if kind == "delete":
        dlt = stmt.delete
        return [
            f"DELETE FROM {_table(dlt.table)} WHERE {_where(dlt.key_fields, r.key_values)};"
            for r in dlt.records
        ]
    if kind == "apply_status":
        return [_apply_status_line(stmt.apply_status)]
    return ["# <empty statement>"]


def _apply_status_line(status: epoch_pb2.ApplyStatus) -> str:
    return (
        f"# Apply status: server {status.server_id} epoch {status.epoch} "
        f"applied by {status.applied_by}"
    )


def _condition_line(c: transaction_pb2.Condition) -> str:
    """``# Condition: s.t key (1): absent`` (``gtid (1,4)``, ``balance = 100``): one condition
    of a conditional write (whether it held is decided when the entry is applied)."""
    kind = c.WhichOneof("expect")
    if kind == "absent":
        what = "absent"
    elif kind == "gtid":
        what = f"gtid {format_gtid(c.gtid)}"
    elif kind == "values":
        what = ", ".join(f"{f} = {render_value(v)}"
                         for f, v in zip(c.values.fields, c.values.values, strict=False))
    else:
        what = "no expectation"
    key = ", ".join(render_value(v) for v in c.key)
    return f"# Condition: {c.table} key ({key}): {what}"


def render_text(entry: LogEntry) -> list[str]:
    """Render one log entry as the seed's binlog_reader does, one string per output line.

    A transaction opens with ``# Global Id: (S,T)`` and ``# Timestamp: <commit ns> (<ISO>)``,
    then ``# Epoch: E, Author: A``, a ``# Segment`` line unless it is a single segment, one
    ``# Condition:`` line per condition of a conditional write, the
    statements (session variables as ``set @name = value`` sorted by name, then the SQL; row
    changes as one SQL statement per record) and ``ROLLBACK`` if it carries a rollback.
    """
    msg = entry.message
    if isinstance(msg, transaction_pb2.Transaction):
        lines = [
            f"# Global Id: {format_gtid(msg.gtid)}",
            f"# Timestamp: {msg.commit_timestamp_ns} ({_iso_ns(msg.commit_timestamp_ns)})",
            f"# Epoch: {msg.epoch}, Author: {msg.author}",
        ]
        if not (msg.segment_id == 1 and msg.end_segment):
            last = ", last" if msg.end_segment else ""
            lines.append(f"# Segment: {msg.segment_id}{last}")
        lines.extend(_condition_line(c) for c in msg.conditions)
        for stmt in msg.statements:
            lines.extend(_render_statement(stmt))
        if msg.HasField("rollback"):
            reason = f" # {msg.rollback.reason}" if msg.rollback.reason else ""
            lines.append(f"ROLLBACK{reason}")
        return lines
    if isinstance(msg, epoch_pb2.EpochMarker):
        return [
            f"# Epoch marker: server {msg.server_id} epoch {msg.epoch} sealed at "
            f"{msg.sealed_at_ns} ({_iso_ns(msg.sealed_at_ns)}), last trans {msg.last_trans_id}"
        ]
    if isinstance(msg, epoch_pb2.ApplyStatus):
        return [_apply_status_line(msg)]
    if isinstance(msg, applier_pb2.ApplierPosition):
        return [f"# Applier position: {msg.applier} at log index {msg.log_index}"]
    if isinstance(msg, schema_pb2.SchemaEvent):  # docs/schema.md
        from gateway.cli.schema import describe_event
        from gateway.schema.codec import event_from_proto
        from gateway.schema.model import SchemaError

        try:
            return [f"# Schema: {msg.table} {describe_event(event_from_proto(msg))}"]
        except SchemaError as exc:
            return [f"# Schema: {msg.table}: damaged event ({exc}) at offset {entry.offset}"]
    return [f"# {entry.tag.name} at offset {entry.offset}"]


# --- rendering: JSON ------------------------------------------------------------------------


def render_json(entry: LogEntry) -> dict[str, object]:
    """Render one log entry as a JSON-ready dict.

    ``{"offset": N, "type": "transaction", "transaction": {...}}``: the message under its
    lower-case tag name, in protobuf's canonical JSON mapping with proto field names and every
    field present (64-bit integers are strings, bytes are base64, as that mapping says), so
    ``json_format.ParseDict`` reads it back.
    """
    name = entry.tag.name.lower()
    body = json_format.MessageToDict(
        entry.message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    return {"offset": entry.offset, "type": name, name: body}


def transaction_gtid(entry: LogEntry) -> tuple[int, int] | None:
    """``(server_id, trans_id)`` of a transaction entry, ``None`` for other entries."""
    if isinstance(entry.message, transaction_pb2.Transaction):
        return entry.message.gtid.server_id, entry.message.gtid.trans_id
    return None
