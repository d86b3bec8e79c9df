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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from gateway.conflict import Cause, OpType
from gateway.core.rowops import CASE_OF_TYPE
from gateway.core.varint import decode_uvarint, encode_uvarint
from gateway.node.state.conflict_apply import derived_transaction
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

__all__ = ["ExceptionRows", "derived_wire", "parts", "refresh_parts", "statement_bytes"]

FT = value_pb2.FieldType
_U = FT.FIELD_TYPE_UNSIGNED
_S = FT.FIELD_TYPE_VARCHAR
_EX_KEY = [statement_pb2.FieldMetadata(name=n, type=_U)
           for n in ("server_id", "source_server_id", "source_epoch", "count")]
_EX_HEAD = [statement_pb2.FieldMetadata(name=n, type=_S)
            for n in ("NDB$OP_TYPE", "NDB$CFT_CAUSE", "NDB$ORIG_TRANSID")]
#: Value field keys (value.proto): the case a column type uses -> its one-byte key
_CASE_KEY = {"null_value": 0x08, "bool_value": 0x10, "int_value": 0x18, "uint_value": 0x20,
             "double_value": 0x29, "decimal_value": 0x32, "string_value": 0x3A,
             "bytes_value": 0x42, "timestamp_ns": 0x49}
_NULL_KEY = _CASE_KEY["null_value"]
_DECIMAL_KEY = _CASE_KEY["decimal_value"]
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
_TXN_STATEMENTS = b"\x32"  # Transaction.statements = 6
#: ``segment_id = 1`` and ``end_segment = true``: the last fields of a derived transaction
#: with no statements as serialized (its statements, field 6, go before them)
_SHELL_TAIL = b"\x38\x01\x40\x01"


def _ld(key: int, payload: bytes) -> bytes:
    """A length-delimited field: ``key``, the payload's length, the payload."""
    return bytes((key,)) + encode_uvarint(len(payload)) + payload


def parts(data: bytes) -> list[tuple[int, bytes]] | None:
    """The top-level fields of a serialized message as ``(one-byte key, payload)``, payloads
    of length-delimited fields without their length; None when a key takes more than one
    byte, a wire type is not 0, 1, 2 or 5, or a field runs past the end."""
    out: list[tuple[int, bytes]] = []
    pos, n = 0, len(data)
    try:
        while pos < n:
            key = data[pos]
            if key & 0x80:
                return None
            wt = key & 7
            pos += 1
            if wt == 2:
                length, pos = decode_uvarint(data, pos)
                end = pos + length
            elif wt == 0:
                _, end = decode_uvarint(data, pos)
            elif wt == 1:
                end = pos + 8
            elif wt == 5:
                end = pos + 4
            else:
                return None
            if end > n:
                return None
            out.append((key, data[pos:end]))
            pos = end
    except IndexError:
        return None
    return out


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


def _typed(value: bytes, ftype: int) -> bool:
    """Whether ``value`` (a serialized ``Value``) is null or in the case ``ftype`` uses, so
    that the specification's conversion to Python and back gives it unchanged."""
    if not value:
        return False
    key = value[0]
    return key == _NULL_KEY or (key == _TYPE_KEY.get(ftype, -1) and key != _DECIMAL_KEY)


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
            got = self._heads[shape] = statement_pb2.InsertStatement(
                table=statement_pb2.TableMetadata(schema_name=schema,
                                                  table_name=f"{table}$EX"),
                key_fields=_EX_KEY, fields=[*_EX_HEAD, *(statement_pb2.FieldMetadata(
                    name=n, type=cast("FT", t)) for n, t in cols)]).SerializeToString()
        return got

    def add(self, kind: str, cause: int, origin: int, transid: str,
            table: statement_pb2.TableMetadata, key_fields: Sequence[tuple[str, int]],
            fields: Sequence[tuple[str, int]], record: bytes, stored: bytes | None,
            columns: Mapping[str, int]) -> bool:
        """Add the exception row of a change rejected with ``cause`` (its number in the
        verdict byte): a ``kind`` record (serialized ``record``) of a statement of
        ``table`` with ``key_fields`` and ``fields`` as (name, type); ``stored``: the row
        here before the epoch (a serialized ``Row``; None when absent); ``columns``: the
        table's known column types. Mirrors ``conflict_apply._exception``."""
        rec = parts(record)
        if rec is None:
            return False
        key_values = [p for k, p in rec if k == _REC_KEY_VALUES]
        if len(key_values) != len(key_fields):
            return False
        types = dict(columns)
        types.update(key_fields)
        types.update(fields)
        after: dict[str, bytes] = {}
        if kind != "delete":
            akey = _REC_AFTER_VALUES if kind == "insert" else _UPD_AFTER_VALUES
            vals = [p for k, p in rec if k == akey]
            if len(vals) != len(fields):
                return False
            for (name, _), v in zip(fields, vals, strict=True):
                after[name] = v
            if len(after) != len(fields):
                return False
        old: dict[str, bytes] | None = None
        if stored is not None:
            row = parts(stored)
            if row is None:
                return False
            names = self._names
            fnames = [names(p)[0] for k, p in row if k == _ROW_FIELDS]
            values = [p for k, p in row if k == _ROW_VALUES]
            if len(fnames) != len(values) or len(set(fnames)) != len(fnames):
                return False
            old = dict(zip(fnames, values, strict=True))
        key_names = {n for n, _ in key_fields}
        if any(n.endswith(("$OLD", "$NEW")) for n in key_names):
            return False  # the specification's row would list it among the values
        names_ = sorted(set(after) | (set(old or {}) - key_names))
        self.count += 1
        out = [self._me, _ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(origin)), self._epoch,
               _ld(_REC_KEY_VALUES, b"\x20" + encode_uvarint(self.count)),
               self._string(_OP_NAME[kind]), self._string(_CAUSE_NAME[cause]),
               self._string(transid)]
        out += [_ld(_REC_AFTER_VALUES, v) for v in key_values]
        extra: list[tuple[str, int, bytes]] = []
        for name in names_:
            ftype = types.get(name, _S)
            o = _NULL if old is None else old.get(name, _NULL)
            a = after.get(name, _NULL)
            if not (_typed(o, ftype) and _typed(a, ftype)):
                return False
            extra.append((f"{name}$OLD", ftype, o))
            extra.append((f"{name}$NEW", ftype, a))
        extra.sort(key=lambda c: c[0])  # the specification's order: by the full names
        cols = (*key_fields, *((n, t) for n, t, _ in extra))
        out += [_ld(_REC_AFTER_VALUES, v) for _, _, v in extra]
        head = self._head(table.schema_name, table.table_name, cols)
        body = b"".join(out)
        if self.statements and self.statements[-1][0] == head:
            self.statements[-1][1].append(body)
        else:
            self.statements.append((head, [body]))
        return True


def statement_bytes(head: bytes, records: list[bytes]) -> bytes:
    """A serialized ``Statement`` holding the insert ``head`` (fields 1-3) and ``records``."""
    return _ld(_STMT_INSERT, head + b"".join(_ld(_INS_RECORDS, r) for r in records))


def refresh_parts(table: bytes, raw: bytes) -> tuple[bytes, bytes] | None:
    """The refresh of a row held here as ``(insert head, record)``: ``table`` (a serialized
    ``TableMetadata``) with the stored ``Row`` ``raw``'s key fields and fields, and a
    record of its key values and values (``conflict_apply.refresh_statement``); None when
    ``raw`` does not walk."""
    row = parts(raw)
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
                 refresh: Sequence[tuple[statement_pb2.TableMetadata, bytes | None]]
                 ) -> transaction_pb2.Transaction | None:
    """The derived transaction ``EpochApply._derive`` builds from ``exceptions`` and the
    refreshes (``conflict_apply.add_refresh`` of each row, in order: the statement's table
    and the row as it now stands), with the refresh records assembled from the stored rows'
    bytes instead of parsed rows (``refresh_parts``); None when the specification must
    build it: a refresh of a row absent here (a delete), nothing to write, or bytes that
    would not be the specification's (not canonical)."""
    stmts: list[tuple[bytes, list[bytes]]] = []
    for s in exceptions:
        split = _insert_split(s)
        if split is None:
            return None
        stmts.append(split)
    tables: dict[int, bytes] = {}
    for table, raw in refresh:
        if raw is None:
            return None
        tb = tables.get(id(table))
        if tb is None:
            tb = tables[id(table)] = table.SerializeToString()
        got = refresh_parts(tb, raw)
        if got is None:
            return None
        head, rec = got
        if stmts and stmts[-1][0] == head:  # ``add_refresh``'s merge
            stmts[-1][1].append(rec)
        else:
            stmts.append((head, [rec]))
    if not stmts:
        return None
    shell = derived_transaction(me, trans_id, epoch, commit_ts, []).SerializeToString()
    if not shell.endswith(_SHELL_TAIL):
        return None
    data = b"".join((shell[:-len(_SHELL_TAIL)],
                     *(_ld(_TXN_STATEMENTS[0], statement_bytes(h, r)) for h, r in stmts),
                     _SHELL_TAIL))
    derived = transaction_pb2.Transaction.FromString(data)
    if derived.SerializeToString(deterministic=True) != data:
        return None  # not canonical: the specification's bytes would differ
    return derived
