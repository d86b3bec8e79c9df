"""Reading one byte range of a log into Arrow record batches of row operations.

``read_range(rr)`` scans the records whose separator lies in ``[rr.start, rr.stop)``, decodes
the committed transactions they hold and yields ``pyarrow.RecordBatch`` values in the schema of
``spark_applier.schema`` -- built column by column, never row-at-a-time tuples. The conversion
follows ``gateway.core.rowops.statement_ops`` exactly (an UPDATE that changes a key column is a
MOVE, an ``ApplyStatus`` statement an UPSERT of ``gateway.apply_status``, values checked
against their column's declared type) so the rows are the reducer's "original statements".

What is skipped, and how it is accounted for in the ``RangeReport`` (never a crash, never a
wrong row):

- ``damaged``: byte ranges that are not valid records (bad CRC, bad stuffing, torn writes), and
  WAL records that verify but carry another segment's generation;
- ``undecodable``: valid records whose payload is not a WAL entry / tagged message;
- ``rejected``: transactions that break the log model (a value of the wrong type, a record
  with too few values, ...): none of their rows are emitted;
- ``skipped``: entries that are not transactions (Raft configuration changes, empty leader
  entries, epoch markers) and single-segment rollbacks -- not damage, counted for the record.

WAL header, index and footer records are structure, not entries, and are not counted.

When the optional C extension ``spark_applier._txndecode`` is built, it decodes the common
transactions (inserts, deletes, updates of non-key columns, apply status, segment markers)
straight from the wire format into Arrow buffers; every other transaction -- SQL, key changes,
rollbacks, anything the log model rejects or the C parser is unsure of -- it hands back, and
``_Batch`` below, the specification, decodes it. Both give the same batches
(``tests/spark/test_cdecode.py``); ``GATEWAY_PURE_PYTHON=1`` disables the extension.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from operator import attrgetter, methodcaller
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from gateway import CASE_OF_TYPE, TYPE_OF_CASE
from gateway.formats import PayloadError, WalTag, decode_wal_entry, load_accelerator, records
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

from .layout import ReadRange, open_buffer
from .schema import ARROW_SCHEMA, CELL, MARKER_OP

__all__ = ["ACCELERATED", "RangeReport", "read_range", "write_report"]

_cdecode = load_accelerator("spark_applier._txndecode")

#: True when the C extension decodes the common transactions.
ACCELERATED = _cdecode is not None
#: ``Decoder.add``'s answers other than a row count: the Python path decides; left out.
_FALLBACK, _FILTERED = (-1, -2) if _cdecode is None else (_cdecode.FALLBACK, _cdecode.FILTERED)

_BATCH_ROWS = 65536  # rows per batch once reading is under way
_FIRST_BATCH_ROWS = 4096  # the first batches are smaller (the first rows arrive sooner); the
# limit doubles per batch up to _BATCH_ROWS
_ENTRY_TAG = bytes((WalTag.ENTRY,))
# header, index, footer, log start, hard-state markers: structure, not damage
_WAL_STRUCTURE = frozenset(int(t) for t in WalTag if t is not WalTag.ENTRY)
_TXN_TAG = 1
_U63 = 1 << 63
_U31 = 1 << 31
_U64 = 1 << 64
# Value case -> slot: 0 int_v, 1 double_v, 2 text_v, 3 bytes_v
_SLOT_OF_CASE = {
    "bool_value": 0, "int_value": 0, "uint_value": 0, "timestamp_ns": 0, "double_value": 1,
    "decimal_value": 2, "string_value": 2, "bytes_value": 3,
}
# FieldType -> (expected Value case, slot)
_COLUMN_KIND: dict[int, tuple[str, int]] = {
    t: (case, _SLOT_OF_CASE[case]) for t, case in CASE_OF_TYPE.items()
}
# Value case -> (FieldType a session variable of that case has, slot)
_CASE_KIND: dict[str, tuple[int, int]] = {
    case: (t, _SLOT_OF_CASE[case]) for case, t in TYPE_OF_CASE.items()
}


@dataclass(slots=True)
class RangeReport:
    """What reading one range found; see the module docstring for the categories."""

    file: str
    start: int
    stop: int
    records: int = 0
    transactions: int = 0
    rows: int = 0
    skipped: int = 0
    damaged: list[tuple[int, int]] = field(default_factory=list)
    undecodable: list[tuple[int, str]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)

    @property
    def problems(self) -> int:
        """Damaged ranges + undecodable records + rejected transactions."""
        return len(self.damaged) + len(self.undecodable) + len(self.rejected)


def write_report(directory: str, report: RangeReport) -> None:
    """Write ``report`` as JSON to ``directory`` under a name fixed by file and range, so a
    retried task overwrites its earlier report instead of adding to the counts."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.basename(report.file)
    name = os.path.join(directory, f"{stem}.{report.start}-{report.stop}.json")
    tmp = f"{name}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(asdict(report), f)
    os.replace(tmp, name)


# slot codes: 0 int_v, 1 double_v, 2 text_v, 3 bytes_v, 5 uint -> int_v, 6 bool -> int_v,
# 9 null (no slot)
_CODE_OF_TYPE = {1: 6, 3: 5}
_NULL_CODE = 9
# FieldType -> slot code of a non-null value (type 0, a null session variable, is always null)
_TYPE_CODE = {t: _CODE_OF_TYPE.get(t, k[1]) for t, k in _COLUMN_KIND.items()}
_TYPE_CODE[0] = _NULL_CODE
_SLOT_OF_CODE = {0: 0, 1: 1, 2: 2, 3: 3, 5: 0, 6: 0}
_WHICH = methodcaller("WhichOneof", "kind")


class _Columns:
    """The columns a statement's value lists are aligned with, prepared once per distinct
    field list (``_columns`` caches them): names, FieldTypes and the Value case each type
    uses."""

    __slots__ = ("expected", "has_decimal", "names", "plan", "types")

    def __init__(self, fields: Any) -> None:
        names, types, expected = [], [], []
        for f in fields:
            kind = _COLUMN_KIND.get(f.type)
            if kind is None:
                raise ValueError(f"field {f.name!r} has invalid type {f.type}")
            names.append(f.name)
            types.append(f.type)
            expected.append(kind[0])
        self.names, self.types, self.expected = names, types, expected
        self._prepare()

    def _prepare(self) -> None:
        """``plan``: per column, its position, a getter of its value, its slot (0 int_v ..
        3 bytes_v) and conversion code (``_TYPE_CODE``), for the all-non-null fast path."""
        self.has_decimal = "decimal_value" in self.expected
        self.plan = [(j, attrgetter(e), _SLOT_OF_CODE[_TYPE_CODE[t]], _TYPE_CODE[t])
                     for j, (e, t) in enumerate(zip(self.expected, self.types, strict=True))]

    def __len__(self) -> int:
        return len(self.names)

    def subset(self, keep: list[bool]) -> _Columns:
        """The columns whose ``keep`` flag is true."""
        out = _Columns(())
        for attr in ("names", "types", "expected"):
            setattr(out, attr, [x for x, k in zip(getattr(self, attr), keep, strict=True) if k])
        out._prepare()
        return out


_COLUMNS_CACHE: dict[tuple[tuple[str, int], ...], _Columns] = {}


def _columns(fields: Any) -> _Columns:
    """``_Columns(fields)``, shared by every statement with the same names and types (the
    cached object is never mutated)."""
    sig = tuple([(f.name, f.type) for f in fields])
    cols = _COLUMNS_CACHE.get(sig)
    if cols is None:
        cols = _Columns(fields)  # raises on an invalid type: nothing cached
        if len(_COLUMNS_CACHE) > 4096:
            _COLUMNS_CACHE.clear()
        _COLUMNS_CACHE[sig] = cols
    return cols


class _Cells:
    """A ``list<cell>`` column being built, one Python list per child column (name, type and
    the four value slots, None where a cell does not use the slot). Statements whose values
    are all non-null and of their columns' cases -- nearly all -- fill the slot lists column by
    column with C-level ``map``/slice assignment; others go value by value (``_put``)."""

    __slots__ = ("blobs", "dbls", "ints", "names", "offsets", "txts", "types")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.types: list[int] = []
        self.ints: list[int | None] = []
        self.dbls: list[float | None] = []
        self.txts: list[str | None] = []
        self.blobs: list[bytes | None] = []
        self.offsets: list[int] = [0]

    def mark(self) -> tuple[int, int]:
        return len(self.names), len(self.offsets)

    def truncate(self, mark: tuple[int, int]) -> None:
        n, o = mark
        for lst in (self.names, self.types, self.ints, self.dbls, self.txts, self.blobs):
            del lst[n:]
        del self.offsets[o:]

    def close_row(self) -> None:
        self.offsets.append(len(self.names))

    def _put(self, vals: Any, cases: list[str | None], types: list[int]) -> None:
        """Append cells value by value (any mix of nulls and cases; every value has a case:
        the callers refuse one without)."""
        tc = _TYPE_CODE
        ints, dbls, txts, blobs = self.ints, self.dbls, self.txts, self.blobs
        for v, c, t in zip(vals, cases, types, strict=True):
            k = _NULL_CODE if c == "null_value" else tc[t]
            r: Any = None if k == _NULL_CODE else getattr(v, cast(str, c))
            ints.append(r if k == 0 else (r - _U64 if r >= _U63 else r) if k == 5
                        else int(r) if k == 6 else None)
            dbls.append(r if k == 1 else None)
            txts.append(r if k == 2 else None)
            blobs.append(r if k == 3 else None)
        self.types += types

    def add(self, cols: _Columns, values: Any, what: str) -> None:
        """Append one cell per column; ``ValueError`` naming the column when a value does not
        fit the log model (wrong case for its type, no case set, a bad decimal)."""
        if len(values) != len(cols.names):
            raise ValueError(f"{what}: {len(values)} values for {len(cols.names)} fields")
        cases = [v.WhichOneof("kind") for v in values]
        if cases != cols.expected:
            for name, exp, case in zip(cols.names, cols.expected, cases, strict=True):
                if case != exp and case != "null_value":
                    got = case or "no case set"
                    raise ValueError(f"{what} column {name!r}: {got} in a column that holds "
                                     f"{exp}")
        if cols.has_decimal:
            for name, v, case in zip(cols.names, values, cases, strict=True):
                if case == "decimal_value":
                    _check_decimal(v.decimal_value, name)
        self._put(values, cases, cols.types)
        self.names += cols.names

    def add_rows(self, cols: _Columns, lists: list[Any], what: str) -> None:
        """``add`` then ``close_row`` for each value list of ``lists`` (one per record), in one
        pass over the statement."""
        k = len(cols.names)
        m = len(lists)
        if [len(vals) for vals in lists] != [k] * m:
            for r_no, vals in enumerate(lists, 1):
                if len(vals) != k:
                    raise ValueError(f"record {r_no}{what}: {len(vals)} values for {k} fields")
        base = self.offsets[-1]
        if not k:
            self.offsets += [base] * m
            return
        flat = [v for vals in lists for v in vals]
        cases = list(map(_WHICH, flat))
        expected = cols.expected * m
        if cases != expected:
            for i, (case, exp) in enumerate(zip(cases, expected, strict=True)):
                if case != exp and case != "null_value":
                    got = case or "no case set"
                    raise ValueError(f"record {i // k + 1}{what} column {cols.names[i % k]!r}: "
                                     f"{got} in a column that holds {exp}")
        if cols.has_decimal:
            for i, (v, case) in enumerate(zip(flat, cases, strict=True)):
                if case == "decimal_value":
                    _check_decimal(v.decimal_value, cols.names[i % k])
        n = k * m
        if cases != expected:  # some nulls
            self._put(flat, cases, cols.types * m)
        else:
            slots: list[list[Any] | None] = [None, None, None, None]
            for j, getter, slot, code in cols.plan:
                col = list(map(getter, flat[j::k]))
                if code == 5:
                    col = [r - _U64 if r >= _U63 else r for r in col]
                elif code == 6:
                    col = list(map(int, col))
                out = slots[slot]
                if out is None:
                    out = slots[slot] = [None] * n
                out[j::k] = col
            nones = [None] * n
            ints, dbls, txts, blobs = slots
            self.ints += nones if ints is None else ints
            self.dbls += nones if dbls is None else dbls
            self.txts += nones if txts is None else txts
            self.blobs += nones if blobs is None else blobs
            self.types += cols.types * m
        self.names += cols.names * m
        self.offsets += range(base + k, base + n + 1, k)

    def close_rows(self, m: int) -> None:
        """``m`` rows without cells."""
        self.offsets += [self.offsets[-1]] * m

    def add_variables(self, variables: Any) -> None:
        """Append one cell per session variable; its type is the one its value case means."""
        for var in variables:
            case = var.value.WhichOneof("kind")
            if case is None:
                raise ValueError(f"session variable @{var.name} has no value case set")
            ftype = 0 if case == "null_value" else _CASE_KIND[case][0]
            if case == "decimal_value":
                _check_decimal(var.value.decimal_value, var.name)
            self._put([var.value], [case], [ftype])
            self.names.append(var.name)

    def array(self) -> pa.Array:
        children = pa.StructArray.from_arrays(
            [pa.array(self.names, pa.string()), pa.array(self.types, pa.int32()),
             pa.array(self.ints, pa.int64()), pa.array(self.dbls, pa.float64()),
             pa.array(self.txts, pa.string()), pa.array(self.blobs, pa.binary())],
            fields=list(CELL))
        return pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32()), children)

    def pylist(self) -> list[dict[str, Any]]:
        """The cells as dicts (all rows flattened)."""
        cells: list[dict[str, Any]] = self.array().values.to_pylist()
        return cells


def _check_decimal(text: str, name: str) -> None:
    try:
        Decimal(text)
    except InvalidOperation:
        raise ValueError(f"column {name!r}: decimal_value {text!r} is not a number") from None


_UNSIGNED = value_pb2.FIELD_TYPE_UNSIGNED
_APPLY_KEY = _Columns([statement_pb2.FieldMetadata(name="server_id", type=_UNSIGNED)])
_APPLY_COLS = _Columns([statement_pb2.FieldMetadata(name="epoch", type=_UNSIGNED),
                        statement_pb2.FieldMetadata(name="applied_by", type=_UNSIGNED)])


class _Batch:
    """Columns of a batch of rows (``_read`` flushes at ``_FIRST_BATCH_ROWS`` rows, doubling
    up to ``_BATCH_ROWS``); ``add_transaction`` is all-or-nothing.

    Columns that are constant over a transaction (log index .. segment statements) are kept
    once per transaction, and those constant over a statement (statement, op, schema, table)
    once per statement; ``flush`` repeats them with one Arrow ``take`` each."""

    def __init__(self) -> None:
        self.txn_meta: list[tuple[Any, ...]] = []  # log_index .. segment_statements
        self.txn_rows: list[int] = []
        self.stmt_meta: list[tuple[int, str, str, str]] = []  # statement, op, schema, table
        self.stmt_rows: list[int] = []
        self.op_no: list[int] = []
        self.key = _Cells()
        self.values = _Cells()
        self.new_key = _Cells()
        self.sql: list[tuple[int, dict[str, Any]]] = []  # (row, value) of SQL rows only
        self.rows = 0

    def _mark(self) -> tuple[Any, ...]:
        cells = (self.key, self.values, self.new_key)
        return (len(self.stmt_meta), len(self.op_no), [c.mark() for c in cells], len(self.sql))

    def _rollback(self, mark: tuple[Any, ...]) -> None:
        nstmt, nops, cell_marks, nsql = mark
        del self.stmt_meta[nstmt:]
        del self.stmt_rows[nstmt:]
        del self.op_no[nops:]
        for c, m in zip((self.key, self.values, self.new_key), cell_marks, strict=True):
            c.truncate(m)
        del self.sql[nsql:]

    def add_transaction(self, txn: transaction_pb2.Transaction, index: int, term: int,
                        segment: int, position: int) -> int:
        """Append the rows of one transaction segment; return how many. ``ValueError`` (with
        nothing appended) if it breaks the log model."""
        mark = self._mark()
        try:
            n = self._ops(txn)
        except ValueError:
            self._rollback(mark)
            raise
        multi = txn.segment_id != 1 or not txn.end_segment
        if multi:  # the marker row describing this segment
            self._op_row(0, n, MARKER_OP, "", "")
            self.key.close_row()
            self.values.close_row()
            self.new_key.close_row()
            n += 1
        g = txn.gtid
        self.txn_meta.append((index, term, segment, position, g.server_id, g.trans_id, txn.epoch,
                              txn.author, txn.commit_timestamp_ns, txn.segment_id,
                              txn.end_segment, txn.HasField("rollback"), len(txn.statements)))
        self.txn_rows.append(n)
        self.rows += n
        return n

    def _op_row(self, statement: int, op_no: int, op: str, schema: str, table: str) -> None:
        self.stmt_meta.append((statement, op, schema, table))
        self.stmt_rows.append(1)
        self.op_no.append(op_no)

    def _ops(self, txn: transaction_pb2.Transaction) -> int:
        n = 0
        for s_no, stmt in enumerate(txn.statements, 1):
            try:
                n = self._statement(stmt, s_no, n)
            except ValueError as exc:
                raise ValueError(f"statement {s_no}: {exc}") from None
        return n

    def _statement(self, stmt: Any, s_no: int, n: int) -> int:
        kind = stmt.WhichOneof("kind")
        key, values, new_key, sql = self.key, self.values, self.new_key, self.sql
        if kind is None:
            raise ValueError("statement has no kind set")
        if kind == "sql":
            q = stmt.sql
            sql.append((len(self.op_no),  # the row this SQL statement's row will be
                        {"query": q.query, "default_schema": q.default_schema,
                         "session_id": q.session_id,
                         "variables": _variable_cells(q.variables)}))
            self._op_row(s_no, n, "SQL", "", "")
            key.close_row()
            values.close_row()
            new_key.close_row()
            return n + 1
        if kind == "apply_status":
            st = stmt.apply_status
            self._op_row(s_no, n, "UPSERT", "gateway", "apply_status")
            key.add(_APPLY_KEY, [value_pb2.Value(uint_value=st.server_id)], "apply status")
            values.add(_APPLY_COLS, [value_pb2.Value(uint_value=st.epoch),
                                     value_pb2.Value(uint_value=st.applied_by)], "apply status")
            key.close_row()
            values.close_row()
            new_key.close_row()
            return n + 1
        body = getattr(stmt, kind)
        tref = body.table
        schema, table = tref.schema_name, tref.table_name
        if not table:
            raise ValueError("table has no name")
        key_cols = _columns(body.key_fields)
        if not key_cols.names:
            raise ValueError("no key_fields")
        recs = body.records
        if kind == "update":
            cols = _columns(body.set_fields)
            knames = key_cols.names
            if any(name in knames for name in cols.names):
                return self._update(body, s_no, n, schema, table, key_cols)
            k = len(cols.names)
            if not {len(rec.before_values) for rec in recs} <= {0, k}:
                for r_no, rec in enumerate(recs, 1):
                    if rec.before_values and len(rec.before_values) != k:
                        raise ValueError(f"record {r_no}: {len(rec.before_values)} before "
                                         f"values for {k} set_fields")
        m = len(recs)
        key.add_rows(key_cols, [rec.key_values for rec in recs], " key")
        if kind == "insert":
            values.add_rows(_columns(body.fields), [rec.after_values for rec in recs], "")
        elif kind == "update":
            values.add_rows(cols, [rec.after_values for rec in recs], "")
        else:
            values.close_rows(m)
        new_key.close_rows(m)
        self.stmt_meta.append((s_no, _OP_NAMES[kind], schema, table))
        self.stmt_rows.append(m)
        self.op_no += range(n, n + m)
        return n + m

    def _update(self, body: Any, s_no: int, n: int, schema: str, table: str,
                key_cols: _Columns) -> int:
        cols = _columns(body.set_fields)
        key_pos = {name: i for i, name in enumerate(key_cols.names)}
        touches_key = [name in key_pos for name in cols.names]
        rest_cols = cols.subset([not k for k in touches_key])
        for r_no, rec in enumerate(body.records, 1):
            if rec.before_values and len(rec.before_values) != len(cols.names):
                raise ValueError(f"record {r_no}: {len(rec.before_values)} before values for "
                                 f"{len(cols)} set_fields")
            if len(rec.after_values) != len(cols.names):
                raise ValueError(f"record {r_no}: {len(rec.after_values)} values for "
                                 f"{len(cols)} fields")
            op = "UPDATE"
            after = rec.after_values
            rest = after
            if any(touches_key):
                rest = [v for v, k in zip(after, touches_key, strict=True) if not k]
                new = list(rec.key_values)
                for name, v, k in zip(cols.names, after, touches_key, strict=True):
                    if k:
                        new[key_pos[name]] = v
                if [_py(v) for v in new] != [_py(v) for v in rec.key_values]:
                    op = "MOVE"
                    self.new_key.add(key_cols, new, f"record {r_no} new key")
            self._op_row(s_no, n, op, schema, table)
            self.key.add(key_cols, rec.key_values, f"record {r_no} key")
            self.values.add(rest_cols, rest, f"record {r_no}")
            self.key.close_row()
            self.values.close_row()
            self.new_key.close_row()
            n += 1
        return n

    def flush(self) -> pa.RecordBatch:
        rows = self.rows
        arrays = _repeat(list(zip(*self.txn_meta, strict=True)), self.txn_rows,
                         list(ARROW_SCHEMA.types[:13]))
        statement, op, schema, table = _repeat(
            list(zip(*self.stmt_meta, strict=True)), self.stmt_rows,
            [pa.int32(), pa.string(), pa.string(), pa.string()])
        sql_type = ARROW_SCHEMA.field("sql").type
        if self.sql:
            sql_col: list[Any] = [None] * rows
            for row, value in self.sql:
                sql_col[row] = value
            sql = pa.array(sql_col, sql_type)
        else:
            sql = pa.nulls(rows, sql_type)
        arrays += [statement, pa.array(self.op_no, pa.int32()), op, schema, table,
                   self.key.array(), self.values.array(), self.new_key.array(), sql]
        batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
        self.__init__()  # type: ignore[misc]
        return batch


_OP_NAMES = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}


def _repeat(columns: list[tuple[Any, ...]], counts: list[int],
            types: list[pa.DataType]) -> list[pa.Array]:
    """Arrow arrays of ``columns`` (one value per group) with value ``i`` repeated
    ``counts[i]`` times."""
    offsets = [0]
    total = 0
    for c in counts:
        total += c
        offsets.append(total)
    groups = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.nulls(total))
    index = pc.list_parent_indices(groups)
    return [pa.array(col, t).take(index) for col, t in zip(columns, types, strict=True)]


def _variable_cells(variables: Any) -> list[dict[str, Any]]:
    cells = _Cells()
    cells.add_variables(variables)
    cells.close_row()
    return cells.pylist()


def _py(v: Any) -> Any:
    case = v.WhichOneof("kind")
    return (case, getattr(v, case)) if case and case != "null_value" else None


def read_range(rr: ReadRange, report: RangeReport | None = None, *,
               buffer: Any = None) -> Iterator[pa.RecordBatch]:
    """Yield the rows of ``rr`` as record batches, filling ``report`` as it goes. ``buffer``
    (closed here when done) holds the file's bytes at their offsets instead of the file at
    ``rr.file.path`` -- at least the range and its resync slack (``remote.read_window``)."""
    f = rr.file
    report = report if report is not None else RangeReport(f.path, rr.start, rr.stop)
    buf = open_buffer(f.path) if buffer is None else buffer
    try:
        yield from _read(buf, rr, report)
    finally:
        if not isinstance(buf, bytes):
            buf.close()


def _read(buf: Any, rr: ReadRange, report: RangeReport) -> Iterator[pa.RecordBatch]:
    f = rr.file
    wal = f.kind == "wal"
    generation = f.generation
    lo, hi, gtids = rr.index_from, rr.index_to, rr.gtids
    batch = _Batch()
    cdec = _c_decoder(gtids)
    runs: list[list[int]] = []  # [source (0: C, 1: Python), rows] in row order
    limit = _FIRST_BATCH_ROWS
    expected = _first_position(buf, rr.start, rr.stop)
    ordinal = rr.ordinal_base
    counted = rr.start
    parse = transaction_pb2.Transaction.FromString
    for rec in records.scan(buf, rr.start, rr.stop):
        if rec.position != expected:
            _note_damage(buf, expected, rec.position, report)
        expected = rec.end
        report.records += 1
        payload = rec.payload
        term = 0
        if wal:
            tag = payload[:1]
            if rec.generation != generation:
                report.damaged.append((rec.offset, rec.end))
                continue
            if tag != _ENTRY_TAG:
                if tag and tag[0] in _WAL_STRUCTURE:
                    report.records -= 1
                else:
                    report.undecodable.append((rec.offset, f"record tag {tag.hex() or 'none'}"))
                continue
            try:
                entry = decode_wal_entry(payload)
            except PayloadError as exc:
                report.undecodable.append((rec.offset, str(exc)))
                continue
            index, term = entry.index, entry.term
            if index < lo or (hi is not None and index > hi):
                continue
            if entry.type != 0 or not entry.data:
                report.skipped += 1
                continue
            payload = entry.data
        else:
            ordinal += _separators(buf, counted, rec.position)
            counted = rec.position
            index = ordinal + 1
            if index < lo or (hi is not None and index > hi):
                continue
        if not payload:
            report.undecodable.append((rec.offset, "empty payload"))
            continue
        if payload[0] != _TXN_TAG:
            if payload[0] in (0, 255) or payload[0] > 127:
                report.undecodable.append((rec.offset, f"type tag {payload[0]}"))
            else:
                report.skipped += 1  # epoch markers and other log-model messages
            continue
        if cdec is not None:
            try:
                n = cdec.add(payload, index, term, f.segment, rec.position)
            except OverflowError:  # an index or term past int64: the Python path decides
                n = _FALLBACK
            if n >= 0:
                report.rows += n
                report.transactions += 1
                _note_run(runs, 0, n)
                if cdec.rows + batch.rows >= limit:
                    yield _flush(batch, cdec, runs)
                    limit = min(2 * limit, _BATCH_ROWS)
                continue
            if n == _FILTERED:
                continue
        try:
            txn = parse(payload[1:])
        except Exception as exc:  # protobuf DecodeError
            report.undecodable.append((rec.offset, f"transaction does not parse: {exc}"))
            continue
        g = txn.gtid
        if gtids is not None and not (g.server_id == gtids.server_id
                                      and gtids.first <= g.trans_id <= gtids.last):
            continue
        if txn.segment_id == 1 and txn.end_segment and txn.HasField("rollback"):
            report.skipped += 1
            continue
        if g.trans_id >= _U63 or txn.epoch >= _U63 or txn.commit_timestamp_ns >= _U63:
            report.rejected.append((rec.offset, f"({g.server_id},{g.trans_id}): a 64-bit "
                                                f"field exceeds 2**63 - 1"))
            continue
        if txn.segment_id >= _U31:  # the segment_id column is int32
            report.rejected.append((rec.offset, f"({g.server_id},{g.trans_id}): segment_id "
                                                f"{txn.segment_id} exceeds 2**31 - 1"))
            continue
        try:
            n = batch.add_transaction(txn, index, term, f.segment, rec.position)
        except ValueError as exc:
            report.rejected.append((rec.offset, f"transaction ({g.server_id},{g.trans_id}) "
                                                f"at index {index}: {exc}"))
            continue
        report.rows += n
        report.transactions += 1
        _note_run(runs, 1, n)
        if batch.rows + (cdec.rows if cdec is not None else 0) >= limit:
            yield _flush(batch, cdec, runs)
            limit = min(2 * limit, _BATCH_ROWS)
    if expected < rr.stop:
        _note_damage(buf, expected, rr.stop, report)
    if batch.rows or (cdec is not None and cdec.rows):
        yield _flush(batch, cdec, runs)


def _c_decoder(gtids: Any) -> Any:
    """A C decoder for this range, or None (not built, or a GTID filter it cannot hold)."""
    if _cdecode is None:
        return None
    if gtids is None:
        return _cdecode.Decoder()
    bounds = (gtids.server_id, gtids.first, gtids.last)
    if not all(0 <= b < _U64 for b in bounds):
        return None
    return _cdecode.Decoder(gtids=bounds)


def _note_run(runs: list[list[int]], source: int, n: int) -> None:
    """Record that the next ``n`` rows come from ``source`` (0: C decoder, 1: ``_Batch``)."""
    if runs and runs[-1][0] == source:
        runs[-1][1] += n
    else:
        runs.append([source, n])


def _flush(batch: _Batch, cdec: Any, runs: list[list[int]]) -> pa.RecordBatch:
    """One record batch of the rows both decoders hold, in log order (``runs``)."""
    c = _c_batch(cdec.flush()) if cdec is not None and cdec.rows else None
    p = batch.flush() if batch.rows else None
    order = [list(r) for r in runs]
    runs.clear()
    if p is None:
        assert c is not None
        return c
    if c is None:
        return p
    index: list[int] = []
    at = [0, c.num_rows]  # next row of each source in the concatenation
    for source, n in order:
        index += range(at[source], at[source] + n)
        at[source] += n
    return pa.concat_batches([c, p]).take(pa.array(index, pa.int32()))


_INT64, _INT32, _BOOL, _STRING, _BINARY = pa.int64(), pa.int32(), pa.bool_(), pa.string(), \
    pa.binary()
_CELLS_TYPE = ARROW_SCHEMA.field("key").type
_SQL_TYPE = ARROW_SCHEMA.field("sql").type
_ROW_TYPES = [_INT64] * 9 + [_INT32, _BOOL, _BOOL, _INT32, _INT32, _INT32]


def _c_batch(parts: tuple[Any, ...]) -> pa.RecordBatch:
    """The record batch of ``_txndecode.Decoder.flush()`` buffers (layout in its docstring)."""
    buf = pa.py_buffer
    rows = parts[0]
    arrays = [pa.Array.from_buffers(t, rows, [None, buf(b)])
              for t, b in zip(_ROW_TYPES, parts[1:16], strict=True)]
    for i in (16, 18, 20):  # op, schema, table
        arrays.append(pa.Array.from_buffers(_STRING, rows, [None, buf(parts[i]),
                                                              buf(parts[i + 1])]))
    for cells in parts[22:25]:
        (n, lists, name_off, names, types, int_ok, ints, dbl_ok, dbls, txt_ok, txt_off, txts,
         bin_ok, bin_off, bins) = cells
        struct = pa.Array.from_buffers(CELL, n, [None], children=[
            pa.Array.from_buffers(_STRING, n, [None, buf(name_off), buf(names)]),
            pa.Array.from_buffers(_INT32, n, [None, buf(types)]),
            pa.Array.from_buffers(_INT64, n, [buf(int_ok), buf(ints)]),
            pa.Array.from_buffers(pa.float64(), n, [buf(dbl_ok), buf(dbls)]),
            pa.Array.from_buffers(_STRING, n, [buf(txt_ok), buf(txt_off), buf(txts)]),
            pa.Array.from_buffers(_BINARY, n, [buf(bin_ok), buf(bin_off), buf(bins)]),
        ])
        arrays.append(pa.Array.from_buffers(_CELLS_TYPE, rows, [None, buf(lists)],
                                            children=[struct]))
    arrays.append(pa.nulls(rows, _SQL_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _separators(buf: Any, a: int, b: int) -> int:
    """Separators whose position is in ``[a, b)``."""
    if b <= a:
        return 0
    n: int = buf[a : b + 1].count(b"\xfe\xfd")
    return n


def _first_position(buf: Any, start: int, stop: int) -> int:
    """Position of the first chunk in ``[start, stop)`` (``stop`` if there is none)."""
    head = records.first_nonzero(buf)
    if start <= head:
        return head if head < stop else stop
    sep = buf.find(b"\xfe\xfd", start, stop + 1)
    return stop if sep < 0 or sep >= stop else sep


def _note_damage(buf: Any, a: int, b: int, report: RangeReport) -> None:
    """Classify the chunks whose position is in ``[a, b)``: damage or harmless holes."""
    for d in records.verify(buf, a, b).damaged:
        report.damaged.append((d.start, d.end))
