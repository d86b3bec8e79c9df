"""The built-in conflict functions: a change and the stored row in, a verdict out.

Row functions with a resolution column (MySQL's semantics; the column is the table's
"timestamp", an INTEGER, UNSIGNED or TIMESTAMP column the applications set on every write):

=======================  ================================  ================================
function                 insert / update                   delete
=======================  ================================  ================================
``NDB$OLD(col)``         insert: conflict if the row       conflict unless the row's
                         exists; update: conflict unless   ``col`` equals the delete's
                         the row's ``col`` equals the      before image of ``col``
                         update's before image of ``col``
``NDB$MAX(col)``         insert: conflict if the row       as ``NDB$OLD``
                         exists; update: applied if its
                         ``col`` is greater than the
                         row's, else conflict
``NDB$MAX_DELETE_WIN``   as ``NDB$MAX``                    always applied to an existing row
``NDB$MAX_INS(col)``     insert over an existing row:      as ``NDB$MAX``
                         applied (over it) if its ``col``
                         is greater, else conflict;
                         update as ``NDB$MAX``
``NDB$MAX_DEL_WIN_INS``  as ``NDB$MAX_INS``                as ``NDB$MAX_DELETE_WIN``
=======================  ================================  ================================

In all of them an update or delete of a missing row is a conflict (``ROW_DOES_NOT_EXIST``),
an insert of an existing row that is not applied is ``ROW_ALREADY_EXISTS``, a losing or
mismatching value ``DATA_IN_CONFLICT``. A change that lacks the value the function compares
(no before image of ``col``, an update that does not set ``col``) or holds null there is in
conflict: the function errs on the side of recording a conflict, never of applying blindly;
a stored null loses to any value.

``LWW`` (no argument): last writer wins on the origin commit timestamp, the origin cluster id
breaking ties -- what CockroachDB's logical replication and pgactive do. A deleted row keeps its
timestamp (tombstone), so a late older write does not resurrect it. An update of a missing
row is ``ROW_DOES_NOT_EXIST`` (an update names only the columns it sets, so it cannot recreate
the row); a change older than the row is ``DATA_IN_CONFLICT`` (recorded, not applied); a
delete of a row already deleted later is nothing to do.

The epoch functions (``NDB$EPOCH``, ``NDB$EPOCH2`` and their ``_TRANS`` variants) share the row
rule of the seed: on the PRIMARY a change from cluster X is in conflict when the row's last
change here is not X's and happened in an epoch of this cluster newer than the newest one X had
applied (``row.author != X and row.epoch > max_replicated_epoch(X)``); conflicts, and changes
that find the row not as they expect (missing, or already there), are not applied and are
answered with a refresh of the row. A SECONDARY or PASS applies every change (inserts over
rows that exist overwrite them; updates and deletes of missing rows change nothing); the
transaction and reflection handling of the variants is the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gateway.v1 import value_pb2

from .model import APPLY, Cause, Change, Context, OpType, Role, Stored, Verdict

__all__ = [
    "BUILTIN",
    "COLUMN_TYPES",
    "ConflictConfigError",
    "ConflictFunction",
    "ConflictFunctionsError",
    "FunctionSpec",
    "RoleNotSetError",
    "bind",
    "with_plugins",
]

FT = value_pb2.FieldType
#: Column types a resolution column may have (compared as numbers).
COLUMN_TYPES = frozenset({FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_UNSIGNED,
                          FT.FIELD_TYPE_TIMESTAMP})

ConflictFunction = Callable[[Change, Stored, Context], Verdict]


class ConflictFunctionsError(RuntimeError):
    """The plugins' conflict functions cannot be had (a plugin that does not load, a bad
    registration); the message names the plugin or function."""


class ConflictConfigError(ValueError):
    """A conflict function configured wrongly (unknown name, wrong arguments, wrong column);
    the message names the function, and the caller adds the table."""


class RoleNotSetError(RuntimeError):
    """An epoch function ran while this cluster's conflict role is NONE."""


_NOT_APPLIED = Verdict(False)  # nothing to do and no conflict (e.g. a delete already done)


def _conflict(cause: Cause) -> Verdict:
    return Verdict(False, cause)


# -- column functions ------------------------------------------------------------------------


def _greater(incoming: Any, stored: Any) -> bool:
    """Whether ``incoming`` wins over ``stored``: a null never wins, a stored null loses."""
    if incoming is None:
        return False
    return stored is None or incoming > stored


def _old_matches(change: Change, stored: Stored, col: str) -> bool:
    if col not in change.before or change.before[col] is None:
        return False
    return bool(stored.values.get(col) == change.before[col])


def _insert_plain(stored: Stored) -> Verdict:
    return _conflict(Cause.ROW_ALREADY_EXISTS) if stored.exists else APPLY


def _insert_max(change: Change, stored: Stored, col: str) -> Verdict:
    if not stored.exists:
        return APPLY
    if _greater(change.after.get(col), stored.values.get(col)):
        return Verdict(True, as_op=OpType.UPDATE_ROW)
    return _conflict(Cause.ROW_ALREADY_EXISTS)


def _update_max(change: Change, stored: Stored, col: str) -> Verdict:
    if not stored.exists:
        return _conflict(Cause.ROW_DOES_NOT_EXIST)
    if _greater(change.after.get(col), stored.values.get(col)):
        return APPLY
    return _conflict(Cause.DATA_IN_CONFLICT)


def _compare_old(change: Change, stored: Stored, col: str) -> Verdict:
    if not stored.exists:
        return _conflict(Cause.ROW_DOES_NOT_EXIST)
    return APPLY if _old_matches(change, stored, col) else _conflict(Cause.DATA_IN_CONFLICT)


def _delete_wins(stored: Stored) -> Verdict:
    return APPLY if stored.exists else _conflict(Cause.ROW_DOES_NOT_EXIST)


def _column_function(name: str, col: str, *, ins_max: bool, del_win: bool,
                     upd_max: bool) -> ConflictFunction:
    def check(change: Change, stored: Stored, ctx: Context) -> Verdict:
        op = change.op
        if op is OpType.WRITE_ROW:
            return _insert_max(change, stored, col) if ins_max else _insert_plain(stored)
        if op is OpType.UPDATE_ROW:
            return (_update_max(change, stored, col) if upd_max
                    else _compare_old(change, stored, col))
        if op is OpType.DELETE_ROW:
            return _delete_wins(stored) if del_win else _compare_old(change, stored, col)
        raise ValueError(f"{name}: cannot judge a {op.name}")

    check.__name__ = f"{name}({col})"
    return check


# -- last writer wins ------------------------------------------------------------------------


def _lww(change: Change, stored: Stored, ctx: Context) -> Verdict:
    known = stored.exists or stored.commit_ts_ns or stored.author
    newer = not known or (change.commit_ts_ns, change.origin) > (stored.commit_ts_ns,
                                                                  stored.author)
    op = change.op
    if op is OpType.WRITE_ROW:
        if newer:
            return Verdict(True, as_op=OpType.UPDATE_ROW) if stored.exists else APPLY
        return _conflict(Cause.DATA_IN_CONFLICT)  # a newer row, or a newer delete of it
    if op is OpType.UPDATE_ROW:
        if not stored.exists:
            return _conflict(Cause.ROW_DOES_NOT_EXIST)
        return APPLY if newer else _conflict(Cause.DATA_IN_CONFLICT)
    if op is OpType.DELETE_ROW:
        if not stored.exists:
            return APPLY if newer else _NOT_APPLIED  # a newer tombstone: already deleted
        return APPLY if newer else _conflict(Cause.DATA_IN_CONFLICT)
    raise ValueError(f"LWW: cannot judge a {op.name}")


# -- epoch functions -------------------------------------------------------------------------


def epoch_row_conflict(change: Change, stored: Stored, ctx: Context) -> bool:
    """The seed's row rule, per peer: the row was last changed here by another cluster than
    the change's origin, in an epoch of this cluster the origin had not applied yet."""
    if not (stored.epoch or stored.author):
        return False  # nothing known of the row here
    return (stored.author != change.origin
            and stored.epoch > ctx.max_replicated_epoch(change.origin))


_DELETE_DELETE = Verdict(False, delete_delete=True)
_DELETE_MISSING = Verdict(False, Cause.ROW_DOES_NOT_EXIST, refresh=True, delete_delete=True)


def _epoch(name: str) -> ConflictFunction:
    epoch2 = name.startswith("NDB$EPOCH2")

    def check(change: Change, stored: Stored, ctx: Context) -> Verdict:
        role = ctx.role
        op = change.op
        if role is Role.NONE:
            raise RoleNotSetError(f"{name} needs this cluster's conflict role (PRIMARY, "
                                  f"SECONDARY or PASS); it is NONE")
        if role is not Role.PRIMARY:  # SECONDARY, PASS: apply what arrives
            if op is OpType.WRITE_ROW:
                return Verdict(True, as_op=OpType.UPDATE_ROW) if stored.exists else APPLY
            if op in (OpType.UPDATE_ROW, OpType.DELETE_ROW, OpType.REFRESH_ROW):
                return APPLY if stored.exists or op is OpType.REFRESH_ROW else _NOT_APPLIED
            raise ValueError(f"{name}: cannot judge a {op.name}")
        if op is OpType.REFRESH_ROW:
            raise ValueError(f"{name}: a PRIMARY does not take refresh operations (two "
                             f"primaries?)")
        if op is OpType.DELETE_ROW and not stored.exists:
            # delete-delete: gone here too. NDB$EPOCH2 takes it as agreement (nothing to do,
            # nothing to realign); NDB$EPOCH as MySQL does, a conflict answered by a refresh
            return _DELETE_DELETE if epoch2 else _DELETE_MISSING
        if op is OpType.UPDATE_ROW and not stored.exists:
            # MySQL: the update finds no row (error 626) before its interpreted epoch check
            # runs, so an update of a row deleted here -- concurrently or not -- is
            # ROW_DOES_NOT_EXIST, as for every other function
            return Verdict(False, Cause.ROW_DOES_NOT_EXIST, refresh=True)
        if epoch_row_conflict(change, stored, ctx):
            return Verdict(False, Cause.DATA_IN_CONFLICT, refresh=True)
        if op is OpType.WRITE_ROW and stored.exists:
            return Verdict(False, Cause.ROW_ALREADY_EXISTS, refresh=True)
        if op not in (OpType.WRITE_ROW, OpType.UPDATE_ROW, OpType.DELETE_ROW):
            raise ValueError(f"{name}: cannot judge a {op.name}")
        return APPLY

    check.__name__ = name
    return check


# -- the registry ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """A conflict function by name: whether it takes a resolution column, whether it is
    epoch-based (needs a role) and transactional (rejects dependent transactions too), and
    how to make it for a column."""

    name: str
    column: bool
    epoch: bool
    transactional: bool
    make: Callable[[str], ConflictFunction]


def _col(name: str, **kw: bool) -> FunctionSpec:
    return FunctionSpec(name, True, False, False,
                        lambda col: _column_function(name, col, **kw))


def _ep(name: str, trans: bool) -> FunctionSpec:
    fn = _epoch(name)
    return FunctionSpec(name, False, True, trans, lambda _col: fn)


BUILTIN: Mapping[str, FunctionSpec] = {s.name: s for s in (
    _col("NDB$OLD", ins_max=False, del_win=False, upd_max=False),
    _col("NDB$MAX", ins_max=False, del_win=False, upd_max=True),
    _col("NDB$MAX_DELETE_WIN", ins_max=False, del_win=True, upd_max=True),
    _col("NDB$MAX_INS", ins_max=True, del_win=False, upd_max=True),
    _col("NDB$MAX_DEL_WIN_INS", ins_max=True, del_win=True, upd_max=True),
    FunctionSpec("LWW", False, False, False, lambda _col: _lww),
    _ep("NDB$EPOCH", False),
    _ep("NDB$EPOCH2", False),
    _ep("NDB$EPOCH_TRANS", True),
    _ep("NDB$EPOCH2_TRANS", True),
)}


def bind(name: str, args: Sequence[str], columns: Mapping[str, int] | None = None,
         functions: Mapping[str, FunctionSpec] = BUILTIN) -> tuple[FunctionSpec, ConflictFunction]:
    """The function ``name`` made for ``args``, checked against the table's ``columns``
    (name -> ``FieldType``; None: the table is not known yet, checked when it is). Raises
    ``ConflictConfigError`` naming what is wrong: an unknown function (with the known ones),
    a missing or extra argument, a column the table lacks or of the wrong type."""
    spec = functions.get(name)
    if spec is None:
        raise ConflictConfigError(f"unknown conflict function {name!r} (known: "
                                  f"{', '.join(sorted(functions))})")
    if not spec.column:
        if args:
            raise ConflictConfigError(f"{name} takes no argument, got {', '.join(args)}")
        return spec, spec.make("")
    if len(args) != 1 or not args[0]:
        raise ConflictConfigError(f"{name} takes one argument, the resolution column "
                                  f"(e.g. {name}(ts)); got {len(args)}")
    col = args[0]
    if columns is not None:
        if col not in columns:
            raise ConflictConfigError(f"{name}({col}): the table has no column {col!r} "
                                      f"(it has {', '.join(sorted(columns)) or 'none'})")
        if columns[col] not in COLUMN_TYPES:
            raise ConflictConfigError(
                f"{name}({col}): column {col!r} is {FT.Name(columns[col])}; a resolution "
                f"column must be INTEGER, UNSIGNED or TIMESTAMP")
    return spec, spec.make(col)


_NAME = re.compile(r"[A-Z][A-Z0-9_$]*\Z")


def _constant(fn: ConflictFunction) -> Callable[[str], ConflictFunction]:
    """A ``FunctionSpec.make`` that ignores the column and hands out ``fn``."""
    return lambda _col: fn


def with_plugins(found: Mapping[str, object]) -> Mapping[str, FunctionSpec]:
    """The built-in functions plus those plugins register through
    ``gateway_register_conflict_functions`` (name -> function), as ``FunctionSpec`` values.

    A plugin's value is either a plain function ``fn(change, stored, ctx) -> Verdict`` (the
    built-ins' contract: a row function without argument, judged per row) or a
    ``FunctionSpec`` (a function with a resolution column, epoch-based or transactional; its
    ``name`` must be the registered one). Names are upper case (rules are matched upper case),
    made of letters, digits, ``_`` and ``$``, and may not shadow a built-in. Raises
    ``ConflictConfigError`` naming the function for any of these."""
    out: dict[str, FunctionSpec] = dict(BUILTIN)
    for name, obj in found.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConflictConfigError(f"plugin conflict function {name!r}: a name is upper "
                                      f"case letters, digits, _ and $ (e.g. MY$FIRST_WINS)")
        if name in BUILTIN:
            raise ConflictConfigError(f"plugin conflict function {name}: a built-in function "
                                      f"has that name")
        if isinstance(obj, FunctionSpec):
            if obj.name != name:
                raise ConflictConfigError(f"plugin conflict function {name}: registered with "
                                          f"a FunctionSpec named {obj.name!r}")
            out[name] = obj
        elif callable(obj):
            # The contract's signature cannot be checked before the first call.
            out[name] = FunctionSpec(name, False, False, False,
                                     _constant(cast(ConflictFunction, obj)))
        else:
            raise ConflictConfigError(f"plugin conflict function {name}: {type(obj).__name__} "
                                      f"is neither a function nor a FunctionSpec")
    return out
