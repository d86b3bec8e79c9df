"""The exception and refresh rows of a judged epoch assembled from serialized parts.

``conflict_apply`` is the specification: ``_exception`` builds each ``schema.table$EX`` row
from Python values (the change's values and the stored row's, converted to Python and back
to ``Value`` messages) and ``add_refresh`` each refresh from the parsed stored row. Both copy
values whose bytes are already at hand -- the change's record, the stored ``Row`` -- so here
a row in conflict is assembled from those bytes instead: the exception record from the
record's key values, the stored row's values and the change's values in the spec's column
order, the refresh record from the stored row's key values and values re-tagged.

Every function returns None whenever the result could differ from the specification's, and
the caller then takes the specification's path: a value whose ``Value`` case is not the one
its column type uses (the specification converts it), a ``DECIMAL`` value (converted through
``Decimal``), a record whose values and fields differ in number, field names repeated, bytes
that are not in canonical order (checked by parsing the result and serializing it again: the
specification serializes messages, so its bytes are canonical). ``tests/node/
test_conflict_wire.py`` holds both paths to the same bytes on random epochs.

Size: ~620 lines because it is also the Python specification of ``_judge.c``'s byte
functions (``parts_py``, ``records_without_py``, ``refresh_parts_py``, ``refresh_run_py``,
``statement_bytes_py``, ``read_rows_py``), each beside the selector of its C function and
held to it by a differential test; split them off if it grows further.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

from gateway.conflict import Cause, OpType
from gateway.core import accel
from gateway.core.lsm.format import value_of
from gateway.core.rowops import CASE_OF_TYPE
from gateway.core.varint import encode_uvarint, read_varint64
from gateway.node.state.conflict_apply import derived_transaction, exception_statement
from gateway.node.state.store_ops import MISSING as _MISSING
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

__all__ = ["ExceptionRows", "Shape", "derived_wire", "exception_run", "parts", "parts_py",
           "read_row", "read_rows", "read_rows_py", "records_without", "records_without_py",
           "refresh_parts", "refresh_parts_py", "refresh_run", "refresh_run_py",
           "statement_bytes", "statement_bytes_py", "statements_bytes", "statements_bytes_py",
           "without_wire"]

FT = value_pb2.FieldType
_S = FT.FIELD_TYPE_VARCHAR
#: Value field keys (value.proto): the case a column type uses -> its one-byte key
_CASE_KEY = {"null_value": 0x08, "bool_value": 0x10, "int_value": 0x18, "uint_value": 0x20,
             "double_value": 0x29, "decimal_value": 0x32, "string_value": 0x3A,
             "bytes_value": 0x42, "timestamp_ns": 0x49}
_NULL_KEY = _CASE_KEY["null_value"]
#: column type -> the key of the Value case it takes without conversion (None: converted)
_TYPE_KEY = {t: (None if c == "decimal_value" else _CASE_KEY[c])
             for t, c in CASE_OF_TYPE.items()}
_NULL = value_pb2.Value(null_value=value_pb2.NULL_VALUE).SerializeToString()
_OP_NAME = {"insert": OpType.WRITE_ROW.name, "update": OpType.UPDATE_ROW.name,
            "delete": OpType.DELETE_ROW.name}
_CAUSE_NAME = ("", Cause.ROW_DOES_NOT_EXIST.name, Cause.ROW_ALREADY_EXISTS.name,
               Cause.DATA_IN_CONFLICT.name)
# field keys of the messages assembled or read here (statement.proto, gateway.proto)
_REC_KEY_VALUES, _REC_AFTER_VALUES = 0x0A, 0x12  # InsertRecord 1, 2
_UPD_AFTER_VALUES = 0x1A  # UpdateRecord 3
_INS_TABLE, _INS_KEY_FIELDS, _INS_FIELDS, _INS_RECORDS = 0x0A, 0x12, 0x1A, 0x22
_ROW_KEY_FIELDS, _ROW_KEY_VALUES, _ROW_FIELDS, _ROW_VALUES = 0x12, 0x1A, 0x22, 0x2A
_STMT_INSERT = 0x0A  # Statement.insert = 1
_BODY_KEYS = (0x0A, 0x12, 0x1A)  # Statement.insert, update, delete = 1, 2, 3
_TXN_STATEMENTS = b"\x32"  # Transaction.statements = 6
#: ``segment_id = 1`` and ``end_segment = true``: the last fields of a derived transaction
#: with no statements as serialized (its statements, field 6, go before them)
_SHELL_TAIL = b"\x38\x01\x40\x01"


def _ld(key: int, payload: bytes) -> bytes:
    """A length-delimited field: ``key``, the payload's length, the payload."""
    return bytes((key,)) + encode_uvarint(len(payload)) + payload


def parts_py(data: bytes) -> list[tuple[int, bytes]] | None:
    """The top-level fields of a serialized message as ``(one-byte key, payload)``: a
    length-delimited field's payload without its length, a varint's bytes, a fixed64's or
    fixed32's 8 or 4 bytes. None when a key takes more than one byte, a wire type is
    another, a varint is not one (``varint.read_varint64``) or a field runs past the end. The
    specification of ``gateway.node._judge.message_fields``."""
    out: list[tuple[int, bytes]] = []
    pos, n = 0, len(data)
    while pos < n:
        key = data[pos]
        pos += 1
        if key & 0x80:
            return None
        wt = key & 7
        start = pos
        if wt == 0 or wt == 2:
            try:
                value, pos = read_varint64(data, pos, n)
            except ValueError:
                return None
            if wt == 0:
                end = pos
            else:
                start, end = pos, pos + value
        elif wt == 1:
            end = pos + 8
        elif wt == 5:
            end = pos + 4
        else:
            return None
        if end > n:
            return None
        out.append((key, data[start:end]))
        pos = end
    return out


class _WalkC(Protocol):
    """The functions of ``_judge.c`` this module uses (the file states their contracts)."""

    def message_fields(self, data: bytes, /) -> list[tuple[int, bytes]] | None: ...

    def refresh_record(self, table: bytes, row: bytes, /) -> tuple[bytes, bytes] | None: ...

    def refresh_run(self, tables: list[bytes], raws: list[bytes | None],
                    stmts: list[tuple[bytes, list[bytes]]], /) -> int | None: ...

    def records_without(self, body: bytes, drop: list[int], /
                        ) -> tuple[bytes, bool] | None: ...

    def exception_record(self, record: bytes, akey: int, nkeys: int, nvals: int,
                         stored: bytes | None, fkey: tuple[bytes, ...] | None, picks: bytes,
                         me: bytes, origin: int, epoch: bytes, count: int, op: bytes,
                         cause: bytes, transid: bytes, null: bytes, /) -> bytes | None: ...

    def statement_bytes(self, head: bytes, records: list[bytes], /) -> bytes: ...

    def statements_bytes(self, stmts: list[tuple[bytes, list[bytes]]], /) -> bytes: ...

    def read_rows(self, keys: list[bytes], overlay: dict[bytes, bytes | None],
                  cells: dict[bytes, bytes | None], get: Callable[[bytes], bytes | None], /
                  ) -> list[bytes | None]: ...

    def exception_run(self, verdicts: bytes, flags: bytes, i: int, end: int, first: int,
                      body: bytes, rkeys: list[bytes], overlay: dict[bytes, bytes | None],
                      cells: dict[bytes, bytes | None], akey: int, nkeys: int, nvals: int,
                      last_absent: object, last_stored: object, me: bytes, origin: int,
                      epoch: bytes, count: int, op: bytes, causes: tuple[bytes, ...],
                      transid: bytes, null: bytes, statements: list[tuple[bytes, list[bytes]]],
                      gone: set[tuple[int, int]], s_no: int, seen: set[bytes],
                      refresh: list[Any], table: object, key_fields: object, records: object,
                      kv_type: type, /) -> tuple[int, int, int, int]: ...


_c = cast("_WalkC | None", accel.load("gateway.node._judge"))
#: ``parts_py``, in C when built
parts: Callable[[bytes], list[tuple[int, bytes]] | None] = \
    _c.message_fields if _c is not None else parts_py
#: ``ExceptionRows.add``'s record once its plan is known, in C when built (None: in Python)
exception_record = _c.exception_record if _c is not None else None
#: ``ExceptionRows.add_run`` in C when built (None: the caller adds row by row)
exception_run = _c.exception_run if _c is not None else None
#: a pick of a plan as ``exception_record`` takes it: source, Value key, index (u32 LE)
_PICK = struct.Struct("<BBI")
#: the key of a record's after values, per kind (0: a delete has none)
_AFTER_KEY = {"insert": _REC_AFTER_VALUES, "update": _UPD_AFTER_VALUES, "delete": 0}


class _Names:
    """``FieldMetadata`` bytes -> (name, type), parsed once per distinct field."""

    def __init__(self) -> None:
        self._got: dict[bytes, tuple[str, int]] = {}

    def __call__(self, raw: bytes) -> tuple[str, int]:
        got = self._got.get(raw)
        if got is None:
            f = statement_pb2.FieldMetadata.FromString(raw)
            got = self._got[raw] = (f.name, f.type)
        return got


class ExceptionRows:
    """The ``$EX`` statements of one epoch, row by row in the epoch's order (see the module
    docstring); ``add`` returns False when a row needs the specification (the whole epoch
    then does)."""

    def __init__(self, me: int, source_epoch: int) -> None:
        self._me = _ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(me))
        self._epoch = _ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(source_epoch))
        self._names = _Names()
        self._heads: dict[tuple[str, str, tuple[tuple[str, int], ...]], bytes] = {}
        self._strings: dict[str, bytes] = {}
        #: (statement head, its records) in order; a row of the same shape as the last joins it
        self.statements: list[tuple[bytes, list[bytes]]] = []
        self.count = 0
        self._causes: tuple[bytes, ...] | None = None

    def _string(self, text: str) -> bytes:
        got = self._strings.get(text)
        if got is None:
            got = self._strings[text] = _ld(
                _REC_AFTER_VALUES, value_pb2.Value(string_value=text).SerializeToString())
        return got

    def _head(self, schema: str, table: str, cols: tuple[tuple[str, int], ...]) -> bytes:
        shape = (schema, table, cols)
        got = self._heads.get(shape)
        if got is None:
            got = self._heads[shape] = exception_statement(
                schema, table, [(n, cast("FT", t)) for n, t in cols]).SerializeToString()
        return got

    def add(self, kind: str, cause: int, origin: int, transid: str,
            table: statement_pb2.TableMetadata, shape: Shape, record: bytes,
            stored: bytes | None) -> bool:
        """Add the exception row of a change rejected with ``cause`` (its number in the
        verdict byte): a ``kind`` record (serialized ``record``) of a statement of
        ``table`` whose columns ``shape`` describes (``Shape``); ``stored``: the row here
        before the epoch (a serialized ``Row``; None when absent). Mirrors
        ``conflict_apply._exception``. With the C accelerator, a row against a stored row
        of the same fields as the statement's last one (or, absent, as the last absent one)
        is assembled by ``exception_record`` with that plan (the same bytes; in any doubt
        it answers None and this code decides)."""
        last = shape.last[stored is not None]
        if last is not None and exception_record is not None:
            last_fkey, head, packed = last
            body = exception_record(
                record, _AFTER_KEY[kind], len(shape.key_fields),
                len(shape.fields) if kind != "delete" else 0, stored, last_fkey, packed, self._me,
                origin, self._epoch, self.count + 1, self._string(_OP_NAME[kind]),
                self._string(_CAUSE_NAME[cause]), self._string(transid), _NULL)
            if body is not None:
                self.count += 1
                self._append(head, body)
                return True
        rec = parts(record)
        if rec is None:
            return False
        key_values = [p for k, p in rec if k == _REC_KEY_VALUES]
        if len(key_values) != len(shape.key_fields):
            return False
        vals: list[bytes] = []
        if kind != "delete":
            akey = _REC_AFTER_VALUES if kind == "insert" else _UPD_AFTER_VALUES
            vals = [p for k, p in rec if k == akey]
            if len(vals) != len(shape.fields):
                return False
        values: list[bytes] = []
        fkey: tuple[bytes, ...] | None = None
        if stored is not None:
            row = parts(stored)
            if row is None:
                return False
            fkey = tuple(p for k, p in row if k == _ROW_FIELDS)
            values = [p for k, p in row if k == _ROW_VALUES]
            if len(fkey) != len(values):
                return False
        plans = shape.plans
        plan = plans[fkey] if fkey in plans else plans.setdefault(
            fkey, self._plan(kind, table, shape, fkey))
        if plan is None:
            return False
        head, picks, packed = plan
        self.count += 1
        ld = _ld_value
        out = [self._me, ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(origin)), self._epoch,
               ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(self.count)),
               self._string(_OP_NAME[kind]), self._string(_CAUSE_NAME[cause]),
               self._string(transid)]
        out += [ld(_REC_AFTER_VALUES, v) for v in key_values]
        for src, j, tkey in picks:
            v = vals[j] if src == 0 else values[j] if src == 1 else _NULL
            if not v or (v[0] != _NULL_KEY and v[0] != tkey):
                return False  # the specification converts it
            out.append(ld(_REC_AFTER_VALUES, v))
        self._append(head, b"".join(out))
        shape.last[stored is not None] = (fkey, head, packed)
        return True

    def add_run(self, verdicts: bytes, flags: bytes, i: int, end: int, first: int,
                body: bytes, rkeys: list[bytes], overlay: dict[bytes, bytes | None],
                cells: dict[bytes, bytes | None], kind: str, origin: int, transid: str,
                shape: Shape, gone: set[tuple[int, int]], s_no: int, seen: set[bytes],
                refresh: list[Any], stmt: Any, kv_type: type) -> tuple[int, int, int]:
        """The rows not applied of one statement from row ``i`` on, as ``_judged_wire``'s
        loop takes them row by row with ``add`` (``gateway.node._judge.exception_run``: its
        comment states the contract; ``exception_run`` must be built): rows ``first`` to
        ``end - 1`` of the epoch are the statement's records, serialized in ``body``;
        ``verdicts`` and ``flags`` as ``epoch_judge`` has them; the stored rows read from
        ``overlay`` and ``cells``; a row to refresh adds ``(key, stmt.table,
        stmt.key_fields, kv_type(stmt.records, its record's number))`` to ``refresh``
        (``_judged_wire``'s refresh entries; ``stmt`` the statement ``body`` serializes).
        Returns ``(next row, conflicts, first conflict)``: the first row not applied it left
        (-1: none), how many rows with a cause it added, the first of them (-1: none)."""
        assert exception_run is not None
        causes = self._causes
        if causes is None:
            causes = self._causes = (b"", *(self._string(c) for c in _CAUSE_NAME[1:]))
        nxt, self.count, conflicts, first_conflict = exception_run(
            verdicts, flags, i, end, first, body, rkeys, overlay, cells, _AFTER_KEY[kind],
            len(shape.key_fields), len(shape.fields) if kind != "delete" else 0,
            shape.last[0], shape.last[1], self._me, origin, self._epoch, self.count,
            self._string(_OP_NAME[kind]), causes, self._string(transid), _NULL,
            self.statements, gone, s_no, seen, refresh, stmt.table, stmt.key_fields,
            stmt.records, kv_type)
        return nxt, conflicts, first_conflict

    def _append(self, head: bytes, body: bytes) -> None:
        """Add a record: a row of the same statement head as the last joins it."""
        if self.statements and self.statements[-1][0] == head:
            self.statements[-1][1].append(body)
        else:
            self.statements.append((head, [body]))

    def _plan(self, kind: str, table: statement_pb2.TableMetadata, shape: Shape,
              fkey: tuple[bytes, ...] | None) -> _Plan | None:
        """The statement head and the values' sources of the exception rows of ``kind``
        records of ``shape`` against a stored row with fields ``fkey`` (None: absent): per
        ``$OLD`` / ``$NEW`` column in the specification's order, (0: the change's value, 1:
        the stored row's, 2: NULL; its index there; the Value key its type takes), and the
        same packed for ``exception_record``. None when no row of this kind can be assembled
        (the specification takes them)."""
        key_names = {n for n, _ in shape.key_fields}
        if any(n.endswith(("$OLD", "$NEW")) for n in key_names):
            return None  # the specification's row would list it among the values
        after: dict[str, int] = {}
        if kind != "delete":
            after = {n: j for j, (n, _) in enumerate(shape.fields)}
            if len(after) != len(shape.fields):
                return None
        old: dict[str, int] = {}
        if fkey is not None:
            names = [self._names(f)[0] for f in fkey]
            old = {n: j for j, n in enumerate(names)}
            if len(old) != len(names):
                return None
        cols: list[tuple[str, int, int, int]] = []
        for name in sorted(set(after) | (set(old) - key_names)):
            ftype = shape.types.get(name, _S)
            tkey = _TYPE_KEY.get(ftype)
            if tkey is None:
                return None  # converted by the specification (DECIMAL, or not a type)
            o, a = old.get(name), after.get(name)
            cols.append((f"{name}$OLD", ftype, 2 if o is None else 1, o or 0))
            cols.append((f"{name}$NEW", ftype, 2 if a is None else 0, a or 0))
        cols.sort(key=lambda c: c[0])  # the specification's order: by the full names
        head = self._head(table.schema_name, table.table_name,
                          (*shape.key_fields, *((n, t) for n, t, _, _ in cols)))
        picks = [(src, j, _TYPE_KEY[t] or 0) for _, t, src, j in cols]
        return head, picks, b"".join(_PICK.pack(src, k, j) for src, j, k in picks)


class Shape:
    """The columns of one statement's records: ``key_fields`` and ``fields`` as (name,
    type), ``types`` the column types the exception rows take (the table's known ones, then
    the statement's), the plans ``ExceptionRows`` made for it, and ``last``: the stored
    fields, head and packed picks of the last plan a row was assembled with, against no
    stored row (``last[0]``) and against one (``last[1]``)."""

    __slots__ = ("fields", "key_fields", "last", "plans", "types")

    def __init__(self, key_fields: list[tuple[str, int]], fields: list[tuple[str, int]],
                 columns: Mapping[str, int]) -> None:
        self.key_fields = key_fields
        self.fields = fields
        self.types = {**columns, **dict(key_fields), **dict(fields)}
        self.plans: dict[tuple[bytes, ...] | None, _Plan | None] = {}
        self.last: list[tuple[tuple[bytes, ...] | None, bytes, bytes] | None] = [None, None]


#: a plan: the ``$EX`` statement head, the picks (source, index, Value key), them packed
_Plan = tuple[bytes, list[tuple[int, int, int]], bytes]


_LD = {k: [bytes((k, i)) for i in range(128)] for k in (0x0A, 0x12)}


def _ld_value(key: int, payload: bytes) -> bytes:
    """``_ld`` for the keys of record values, without allocating the short prefixes."""
    n = len(payload)
    return _LD[key][n] + payload if n < 128 else _ld(key, payload)


def statement_bytes_py(head: bytes, records: list[bytes]) -> bytes:
    """A serialized ``Statement`` holding the insert ``head`` (fields 1-3) and ``records``.
    The specification of ``gateway.node._judge.statement_bytes``."""
    key = b"\x22"  # InsertStatement.records
    return _ld(_STMT_INSERT, b"".join(
        [head, *(key + encode_uvarint(len(r)) + r for r in records)]))


def statements_bytes_py(stmts: list[tuple[bytes, list[bytes]]]) -> bytes:
    """Each ``(head, records)`` of ``stmts`` as ``statement_bytes_py`` serializes it, as a
    ``Transaction``'s ``statements`` field, joined. The specification of
    ``gateway.node._judge.statements_bytes``."""
    return b"".join(_ld(_TXN_STATEMENTS[0], statement_bytes_py(h, r)) for h, r in stmts)


#: ``statement_bytes_py`` and ``statements_bytes_py``, in C when built
statement_bytes: Callable[[bytes, list[bytes]], bytes] = \
    _c.statement_bytes if _c is not None else statement_bytes_py
statements_bytes: Callable[[list[tuple[bytes, list[bytes]]]], bytes] = \
    _c.statements_bytes if _c is not None else statements_bytes_py


def refresh_parts_py(table: bytes, raw: bytes) -> tuple[bytes, bytes] | None:
    """The refresh of a row held here as ``(insert head, record)``: ``table`` (a serialized
    ``TableMetadata``) with the stored ``Row`` ``raw``'s key fields and fields, and a
    record of its key values and values (``conflict_apply.refresh_statement``); None when
    ``raw`` does not walk (``parts_py``). The specification of
    ``gateway.node._judge.refresh_record``."""
    row = parts_py(raw)
    if row is None:
        return None
    head = [_ld(_INS_TABLE, table)]
    mid: list[bytes] = []
    rec: list[bytes] = []
    vals: list[bytes] = []
    for k, p in row:
        if k == _ROW_KEY_FIELDS:
            head.append(_ld(_INS_KEY_FIELDS, p))
        elif k == _ROW_FIELDS:
            mid.append(_ld(_INS_FIELDS, p))
        elif k == _ROW_KEY_VALUES:
            rec.append(_ld(_REC_KEY_VALUES, p))
        elif k == _ROW_VALUES:
            vals.append(_ld(_REC_AFTER_VALUES, p))
    return b"".join(head) + b"".join(mid), b"".join(rec) + b"".join(vals)


#: ``refresh_parts_py``, in C when built
refresh_parts: Callable[[bytes, bytes], tuple[bytes, bytes] | None] = \
    _c.refresh_record if _c is not None else refresh_parts_py


def refresh_run_py(tables: list[bytes], raws: list[bytes | None],
                   stmts: list[tuple[bytes, list[bytes]]]) -> int | None:
    """Add the refreshes of the rows ``raws`` (None: absent here) of ``tables`` (serialized
    ``TableMetadata``, one per row) to ``stmts``, as ``add_refresh`` merges them: each
    ``refresh_parts_py`` record joins the last statement when its head is the same, else
    starts one. 1 when the first refresh joined the statement ``stmts`` ended with, else 0;
    None (``stmts`` maybe changed) when a row is absent or does not walk. The specification
    of ``gateway.node._judge.refresh_run``."""
    joined_first = 0
    for i, (tb, raw) in enumerate(zip(tables, raws, strict=True)):
        if raw is None:
            return None
        got = refresh_parts_py(tb, raw)
        if got is None:
            return None
        head, rec = got
        if stmts and stmts[-1][0] == head:
            stmts[-1][1].append(rec)
            joined_first |= i == 0
        else:
            stmts.append((head, [rec]))
    return joined_first


#: ``refresh_run_py``, in C when built
refresh_run: Callable[[list[bytes], list[bytes | None], list[tuple[bytes, list[bytes]]]],
                      int | None] = _c.refresh_run if _c is not None else refresh_run_py


def _insert_split(stmt: statement_pb2.Statement) -> tuple[bytes, list[bytes]] | None:
    """An insert ``stmt`` as ``(its fields 1-3 serialized, [record payloads])``, the form
    ``derived_wire`` merges statements in; None when it holds anything else."""
    if stmt.WhichOneof("kind") != "insert":
        return None
    got = parts(stmt.insert.SerializeToString())
    if got is None:
        return None
    head: list[bytes] = []
    recs: list[bytes] = []
    for k, p in got:
        if k == _INS_RECORDS:
            recs.append(p)
        elif k in (_INS_TABLE, _INS_KEY_FIELDS, _INS_FIELDS) and not recs:
            head.append(_ld(k, p))
        else:
            return None
    return b"".join(head), recs


def derived_wire(me: int, trans_id: int, epoch: int, commit_ts: int,
                 exceptions: Sequence[statement_pb2.Statement],
                 tables: Iterable[statement_pb2.TableMetadata], raws: list[bytes | None],
                 exception_parts: Sequence[tuple[bytes, Sequence[bytes]]] | None = None
                 ) -> tuple[list[statement_pb2.Statement], bytes] | None:
    """The statements of the derived transaction ``EpochApply._derive`` builds, and the
    transaction's serialization, from ``exceptions`` and the refreshes
    (``conflict_apply.add_refresh`` of each row, in order: the statement's table in
    ``tables``, the row as it now stands in ``raws``), with the refresh records assembled
    from the stored rows' bytes (``refresh_run``); None when the specification must build
    it: a refresh of a row absent here (a delete), nothing to write, or bytes that would not
    be the specification's (not canonical). ``exception_parts``: the exceptions as the canonical
    bytes they were parsed from (``UnitJudgement``: checked there), taken as they are
    instead of split again from the messages (which serialize canonically). So only the
    statements the stored rows' bytes went into are parsed and checked here: the refreshes,
    and an exception statement a refresh joined."""
    stmts: list[tuple[bytes, list[bytes]]] = []
    if exception_parts is not None:
        stmts = [(head, list(records)) for head, records in exception_parts]
    else:
        for s in exceptions:
            split = _insert_split(s)
            if split is None:
                return None
            stmts.append(split)
    known = len(stmts)  # statements known canonical: the exceptions a refresh did not join
    memo: dict[int, bytes] = {}
    tbs = [memo.get(id(t)) or memo.setdefault(id(t), t.SerializeToString()) for t in tables]
    joined = refresh_run(tbs, raws, stmts)
    if joined is None:
        return None
    known -= joined
    if not stmts:
        return None
    shell = derived_transaction(me, trans_id, epoch, commit_ts, []).SerializeToString()
    if not shell.endswith(_SHELL_TAIL):
        return None
    checked = statements_bytes(stmts[known:])
    rest = transaction_pb2.Transaction.FromString(checked)
    if rest.SerializeToString(deterministic=True) != checked:
        return None  # not canonical: the specification's bytes would differ
    data = b"".join((shell[:-len(_SHELL_TAIL)], statements_bytes(stmts[:known]), checked,
                     _SHELL_TAIL))
    return [*exceptions[:known], *rest.statements], data


def _field(key: int, payload: bytes) -> bytes:
    """A field as ``parts`` gave it, serialized again (a length-delimited one's length as
    the minimal varint: bytes that were canonical come out as they were)."""
    return _ld(key, payload) if key & 7 == 2 else bytes((key,)) + payload


def without_wire(txn: transaction_pb2.Transaction, gone: set[tuple[int, int]],
                 payload: bytes | None = None) -> transaction_pb2.Transaction | None:
    """``conflict_apply.without`` (the specification: the same message) from ``txn``'s
    serialization with the records cut out, instead of copies of every statement and
    record: ``txn`` without the records ``(statement, record)`` in ``gone``, statements
    left with none left out. ``payload``: the bytes ``txn`` was parsed from, as a
    transaction entry payload (type tag first), cut instead of serializing ``txn`` (a
    message parsed from them is ``txn``, so the cut parses as the same message). None when
    the bytes do not walk (``parts``) or a statement in ``gone`` holds anything but one
    insert, update or delete (the caller then takes ``without``)."""
    by_stmt: dict[int, set[int]] = {}
    for s_no, r_no in gone:
        by_stmt.setdefault(s_no, set()).add(r_no)
    top = parts(payload[1:] if payload is not None else txn.SerializeToString())
    if top is None:
        return None
    out: list[bytes] = []
    s_no = -1
    for k, p in top:
        if k != _TXN_STATEMENTS[0]:
            out.append(_field(k, p))
            continue
        s_no += 1
        drop = by_stmt.get(s_no)
        if drop is None:
            out.append(_ld(k, p))
            continue
        stmt = parts(p)
        if stmt is None or len(stmt) != 1 or stmt[0][0] not in _BODY_KEYS:
            return None
        got = records_without(stmt[0][1], sorted(drop))
        if got is None:
            return None
        body, any_record = got
        if any_record:
            out.append(_ld(k, _ld(stmt[0][0], body)))
    return transaction_pb2.Transaction.FromString(b"".join(out))


def records_without_py(body: bytes, drop: list[int]) -> tuple[bytes, bool] | None:
    """The serialized statement body ``body`` (an insert, update or delete: records are
    field 4 in all three) without the records numbered (from 0) in ``drop`` (ascending), and
    whether any record is left; the other fields as ``parts`` gives them, serialized again
    (``_field``). None when ``body`` does not walk. The specification of
    ``gateway.node._judge.records_without``."""
    fields = parts_py(body)
    if fields is None:
        return None
    gone = set(drop)
    kept: list[bytes] = []
    r_no, any_record = -1, False
    for bk, bp in fields:
        if bk == _INS_RECORDS:
            r_no += 1
            if r_no in gone:
                continue
            any_record = True
        kept.append(_field(bk, bp))
    return b"".join(kept), any_record


#: ``records_without_py``, in C when built
records_without: Callable[[bytes, list[int]], tuple[bytes, bool] | None] = \
    _c.records_without if _c is not None else records_without_py


def read_row(key: bytes, overlay: Mapping[bytes, bytes | None],
             cells: Mapping[bytes, bytes | None], get: Callable[[bytes], bytes | None]
             ) -> bytes | None:
    """``TransactionApply._get``: the row ``key`` as it stands (``overlay``, the rows the
    batch wrote so far, then the store), the store's answer taken from ``cells`` (the cells
    the judgement read from it during this entry's apply, which wrote nothing to it) when
    there."""
    got = overlay.get(key, _MISSING)
    if got is not _MISSING:
        return got
    cell = cells.get(key, _MISSING)
    if cell is _MISSING:
        return get(key)
    return None if cell is None else value_of(cell)


def read_rows_py(keys: list[bytes], overlay: dict[bytes, bytes | None],
                 cells: dict[bytes, bytes | None], get: Callable[[bytes], bytes | None]
                 ) -> list[bytes | None]:
    """``read_row`` of each key of ``keys``, in order. The specification of
    ``gateway.node._judge.read_rows``."""
    return [read_row(k, overlay, cells, get) for k in keys]


#: ``read_rows_py``, in C when built
read_rows: Callable[[list[bytes], dict[bytes, bytes | None], dict[bytes, bytes | None],
                     Callable[[bytes], bytes | None]], list[bytes | None]] = \
    _c.read_rows if _c is not None else read_rows_py
