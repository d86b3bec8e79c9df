"""Answering a parsed ``SELECT`` (``gateway.cli.sql.parse_select``) through the public API.

The table's key columns are learnt from one row (``Scan`` with limit 1; an empty or unknown
table answers no rows). Then:

- every key column given with ``=``: one ``Read``;
- otherwise ``=`` terms on a prefix of the key and an optional range on the next key column:
  ``Scan`` from the lowest key the bounds allow (the given values, the smallest value of each
  further key column's type where there is one, else the table's start), page by page, keeping
  the rows inside the bounds and stopping at the first row past them (rows come in key order)
  or at ``LIMIT``.

Anything the key cannot answer (``=`` on a non-key column, a range on a column that does not
follow the ``=`` prefix, a range on a BLOB/UUID key) raises ``SqlError``: a ``SELECT`` never
becomes a full-table filter by accident.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from gateway.core.rowops import python_value
from gateway.v1 import gateway_pb2
from gateway.v1.value_pb2 import FieldType

from .sql import SelectQuery, SqlError

if TYPE_CHECKING:
    from gateway.client import GatewayClient

__all__ = ["run_select"]

_PAGE = 1000
_TEXT = {FieldType.FIELD_TYPE_VARCHAR, FieldType.FIELD_TYPE_DATE, FieldType.FIELD_TYPE_TIME,
         FieldType.FIELD_TYPE_DATETIME, FieldType.FIELD_TYPE_JSON}
_INTS = {FieldType.FIELD_TYPE_INTEGER, FieldType.FIELD_TYPE_UNSIGNED,
         FieldType.FIELD_TYPE_TIMESTAMP}
#: The smallest key value of a type, as the text the API converts (for scan start keys).
_MIN_TEXT: dict[int, str] = {
    FieldType.FIELD_TYPE_INTEGER: str(-(1 << 63)), FieldType.FIELD_TYPE_UNSIGNED: "0",
    FieldType.FIELD_TYPE_TIMESTAMP: str(-(1 << 63)), FieldType.FIELD_TYPE_BOOLEAN: "false",
    FieldType.FIELD_TYPE_VARCHAR: ""}


def _typed(value: Any, ftype: int, column: str) -> Any:
    """The WHERE literal ``value`` as the Python value of key column type ``ftype``."""
    try:
        if ftype in _INTS and isinstance(value, int) and not isinstance(value, bool):
            return value
        if ftype == FieldType.FIELD_TYPE_DOUBLE and isinstance(value, int | float) \
                and not isinstance(value, bool):
            return float(value)
        if ftype == FieldType.FIELD_TYPE_DECIMAL and not isinstance(value, bool):
            return Decimal(str(value))
        if ftype in _TEXT and isinstance(value, str):
            return value
        if ftype == FieldType.FIELD_TYPE_BOOLEAN and isinstance(value, bool):
            return value
    except InvalidOperation:
        pass
    raise SqlError(f"WHERE: {value!r} does not fit key column {column!r} "
                   f"({FieldType.Name(ftype)})")


def _text(value: object) -> str:
    """A key value as the text the API converts to the column's type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _key_of(row: gateway_pb2.Row) -> tuple[Any, ...]:
    return tuple(python_value(v, f.type) for v, f in zip(row.key_values, row.key_fields,
                                                          strict=True))


def _plan(query: SelectQuery, fields: Sequence[tuple[str, int]]) -> tuple[list[Any], int]:
    """``(typed = values in key order, number of them)``; checks the WHERE against the key."""
    names = [n for n, _ in fields]
    prefix = names[:len(query.equal)]
    if set(query.equal) != set(prefix):
        raise SqlError(f"WHERE: '=' must name a prefix of the key columns ({', '.join(names)})"
                       f", not {', '.join(query.equal)}")
    if query.range_column is not None:
        if len(prefix) >= len(names) or query.range_column != names[len(prefix)]:
            nxt = names[len(prefix)] if len(prefix) < len(names) else "none"
            raise SqlError(f"WHERE: a range must be on the key column after the '=' prefix "
                           f"({nxt}), not {query.range_column!r}")
        ftype = fields[len(prefix)][1]
        if ftype in (FieldType.FIELD_TYPE_BLOB, FieldType.FIELD_TYPE_UUID):
            raise SqlError(f"WHERE: ranges on {FieldType.Name(ftype)} key columns are not "
                           f"supported")
    typed = [_typed(query.equal[n], t, n) for n, t in fields[:len(prefix)]]
    return typed, len(prefix)


def run_select(client: GatewayClient, query: SelectQuery, consistency: str = "linearizable"
               ) -> tuple[list[str], list[gateway_pb2.Row]]:
    """``(column names, rows)`` answering ``query`` with ``client`` (a ``GatewayClient``)."""
    if query.limit == 0:
        return [], []
    probe = client.scan(query.table, limit=1, consistency=consistency)
    if not probe.rows:
        return [], []
    first = probe.rows[0]
    fields = [(f.name, f.type) for f in first.key_fields]
    names = [n for n, _ in fields] + [f.name for f in first.fields]
    typed, n_eq = _plan(query, fields)
    if n_eq == len(fields):
        resp = client.read(query.table, [_text(v) for v in typed], consistency=consistency)
        rows = [resp.row] if resp.found else []
    else:
        rows = list(_scan(client, query, fields, typed, consistency))
    if query.columns is not None:
        unknown = [c for c in query.columns if c not in names and rows]
        if unknown:
            raise SqlError(f"SELECT: no column {unknown[0]!r} in {query.table} "
                           f"({', '.join(names)})")
        names = list(query.columns)
    return names, rows


def _scan(client: GatewayClient, query: SelectQuery, fields: Sequence[tuple[str, int]],
          typed: list[Any],
          consistency: str) -> Iterator[gateway_pb2.Row]:
    lower = upper = None
    if query.range_column is not None:
        name, ftype = fields[len(typed)]
        if query.lower is not None:
            lower = (_typed(query.lower[0], ftype, name), query.lower[1])
        if query.upper is not None:
            upper = (_typed(query.upper[0], ftype, name), query.upper[1])
    # The lowest full key the bounds allow, if every further column has a known minimum.
    start_parts = [_text(v) for v in typed] + ([_text(lower[0])] if lower else [])
    rest = fields[len(start_parts):]
    start: list[Any] | None = None
    if start_parts and all(t in _MIN_TEXT for _, t in rest):
        start = start_parts + [_MIN_TEXT[t] for _, t in rest]
    elif not start_parts:
        start = None
    n, taken = len(typed), 0
    # every page after the one before (``scan_all``: a page of one big row still moves on)
    for row in client.scan_all(query.table, start=start, page=_PAGE, consistency=consistency):
        key = _key_of(row)
        if list(key[:n]) != typed:
            if tuple(key[:n]) > tuple(typed):
                return  # past the prefix: key order, nothing further matches
            continue
        if lower is not None and (key[n] < lower[0] or (key[n] == lower[0]
                                                         and not lower[1])):
            continue
        if upper is not None and (key[n] > upper[0] or (key[n] == upper[0]
                                                         and not upper[1])):
            return
        yield row
        taken += 1
        if query.limit is not None and taken >= query.limit:
            return
