"""Rows written under one version of a table, read under another. Pure: no I/O.

A row is a ``{column name: value}`` mapping. ``upcast`` replays the events between the row's
version and the target on it: an added column gets its default, a dropped column's value is
removed, a renamed column's value moves to the new name. ``revert`` undoes events of a branch
that lost to a concurrent change (``gateway.schema.history``), back to where the branches
forked, so that the row can then be upcast along the winning branch. ``project`` finally
gives exactly the target's columns, in order: a value missing, or of a type the column does
not take (a column the losing branch added with another type), becomes the column's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.core.rowops import CASE_OF_TYPE
from gateway.schema.codec import field_type
from gateway.schema.model import SchemaEvent, TableDef

__all__ = ["fits", "project", "revert", "upcast"]

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "bool_value": (bool,), "int_value": (int,), "uint_value": (int,),
    "double_value": (float,), "decimal_value": (str,), "string_value": (str,),
    "bytes_value": (bytes,), "timestamp_ns": (int,),
}


def fits(value: object, type_name: str) -> bool:
    """Whether ``value`` (None = NULL fits every column) is a Python value of ``type_name``'s
    ``Value`` case (a bool is not an integer here)."""
    if value is None:
        return True
    case = CASE_OF_TYPE[field_type(type_name)]
    if isinstance(value, bool) and case != "bool_value":
        return False
    if case == "uint_value" and isinstance(value, int) and value < 0:
        return False
    return isinstance(value, _PY_TYPES[case])


def _step(row: dict[str, object], e: SchemaEvent) -> None:
    if e.kind == "add_column" and e.column is not None:
        row.setdefault(e.column.name, e.column.default)
    elif e.kind == "drop_column" and e.column is not None:
        row.pop(e.column.name, None)
    elif e.kind == "rename_column" and e.old_name in row:
        row[e.new_name] = row.pop(e.old_name)


def upcast(row: Mapping[str, object], events: Iterable[SchemaEvent]) -> dict[str, object]:
    """``row`` after the events that follow its version, oldest first."""
    out = dict(row)
    for e in events:
        _step(out, e)
    return out


def revert(row: Mapping[str, object], events: Iterable[SchemaEvent]) -> dict[str, object]:
    """``row`` before ``events`` (oldest first; undone newest first): a rename is undone, an
    added column removed; a dropped column's value is gone (``project`` gives its default)."""
    out = dict(row)
    for e in reversed(list(events)):
        if e.kind == "add_column" and e.column is not None:
            out.pop(e.column.name, None)
        elif e.kind == "rename_column" and e.new_name in out:
            out[e.old_name] = out.pop(e.new_name)
    return out


def project(row: Mapping[str, object], target: TableDef) -> dict[str, object]:
    """Exactly ``target``'s columns in order; a missing or misfit value becomes the default."""
    out: dict[str, object] = {}
    for c in target.columns:
        v = row.get(c.name, c.default)
        out[c.name] = v if fits(v, c.type) else c.default
    return out
