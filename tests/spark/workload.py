"""Random workloads for the Spark tests: logs of transactions and their sequential reference.

``random_log`` builds a list of transactions (single and multi-segment, rollbacks, several
tables and column types, nulls, updates, deletes, re-inserts, optional key changes and SQL)
that are valid on the state they are applied to, as the committing cluster would log them.
``reference_state`` applies the same log through the dispatcher path (``LogFileSource`` ->
reducer -> built-in ``SqliteApplier``) and returns every table's rows: the sequential
reference the Spark results are compared with.
"""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import LogFileSource
from gateway.appliers.sqlite import SqliteApplier
from gateway.core import messages, records
from gateway.core.rowops import value_message
from gateway.core.wal import SegmentedWal, WalEntry, WalHardState, WalOptions
from gateway.v1 import transaction_pb2

BOOL, INT, UINT, DBL, DEC, TXT, BLOB, TS = 1, 2, 3, 4, 5, 6, 7, 11
TABLES = {
    ("shop", "orders"): ([("id", INT)], [("item", TXT), ("qty", INT), ("price", DEC),
                                         ("paid", BOOL), ("big", UINT)]),
    ("shop", "tags"): ([("k1", TXT), ("k2", INT)], [("w", DBL), ("blob", BLOB), ("at", TS)]),
}


def _value(rng: random.Random, ftype: int) -> Any:
    if rng.random() < 0.1:
        return None
    return {BOOL: lambda: rng.random() < 0.5,
            INT: lambda: rng.randint(-(2**40), 2**40),
            UINT: lambda: rng.choice([0, 7, 2**63 + 5, 2**64 - 1]),
            DBL: lambda: rng.choice([0.5, -1.25, 3e10]),
            DEC: lambda: Decimal(rng.choice(["1.50", "-12.25", "0"])),
            TXT: lambda: rng.choice(["a", "b", "é", "x" * 5]),
            BLOB: lambda: bytes(rng.randrange(256) for _ in range(3)),
            TS: lambda: rng.randint(0, 2**62)}[ftype]()


def _key(rng: random.Random, table: tuple[str, str]) -> tuple:
    if table[1] == "orders":
        return (rng.randint(1, 30),)
    return (rng.choice(["p", "q", "r"]), rng.randint(1, 6))


def random_log(seed: int, transactions: int = 60, *, moves: bool = False, sql: bool = False,
               segments: bool = True) -> list[transaction_pb2.Transaction]:
    """Transactions valid in log order (inserted keys absent, updated/deleted keys present)."""
    rng = random.Random(seed)
    live: dict[tuple, set] = {t: set() for t in TABLES}
    out: list[transaction_pb2.Transaction] = []
    open_multi: list[tuple[transaction_pb2.Transaction, int]] = []
    for trans_id in range(1, transactions + 1):
        stmts = []
        for _ in range(rng.randint(1, 4)):
            table = rng.choice(list(TABLES))
            keys, cols = TABLES[table]
            r = rng.random()
            k = _key(rng, table)
            st = transaction_pb2.Transaction().statements.add()
            body = None
            if k not in live[table] and r < 0.8:
                body = st.insert
                chosen = [c for c in cols if rng.random() < 0.8]
                body.fields.extend(_fields(chosen))
                rec = body.records.add()
                rec.after_values.extend(value_message(t, _value(rng, t)) for _, t in chosen)
                live[table].add(k)
            elif k in live[table] and r < 0.55:
                body = st.update
                chosen = [c for c in cols if rng.random() < 0.5] or [cols[0]]
                new_k = None
                if moves and rng.random() < 0.3:
                    new_k = _key(rng, table)
                    if new_k in live[table]:
                        new_k = None
                    else:
                        chosen = [*chosen, *keys]
                body.set_fields.extend(_fields(chosen))
                rec = body.records.add()
                vals = [_value(rng, t) for _, t in chosen[: len(chosen) - (len(keys) if new_k
                                                                           else 0)]]
                rec.after_values.extend(value_message(t, v) for (_, t), v in
                                        zip(chosen, vals, strict=False))
                if new_k is not None:
                    rec.after_values.extend(value_message(t, v) for (_, t), v in
                                            zip(keys, new_k, strict=True))
                    live[table].discard(k)
                    live[table].add(new_k)
            elif k in live[table]:
                body = st.delete
                rec = body.records.add()
                live[table].discard(k)
            else:
                continue
            body.table.schema_name, body.table.table_name = table
            body.key_fields.extend(_fields(keys))
            rec.key_values.extend(value_message(t, v) for (_, t), v in zip(keys, k, strict=True))
            stmts.append(st)
        if sql and rng.random() < 0.1:
            st = transaction_pb2.Transaction().statements.add()
            st.sql.query = "INSERT INTO audit VALUES (@n)"  # tests create the audit table
            st.sql.variables.add(name="n", value=value_message(INT, trans_id))
            stmts.append(st)
        base = transaction_pb2.Transaction(epoch=rng.randint(1, 5), author=1,
                                           start_timestamp_ns=10**18 + trans_id,
                                           commit_timestamp_ns=10**18 + trans_id)
        base.gtid.server_id, base.gtid.trans_id = 1, trans_id
        split = segments and len(stmts) > 1 and rng.random() < 0.3
        parts = [stmts[: len(stmts) // 2], stmts[len(stmts) // 2 :]] if split else [stmts]
        for i, part in enumerate(parts, 1):
            seg = transaction_pb2.Transaction()
            seg.CopyFrom(base)
            seg.statements.extend(part)
            seg.segment_id, seg.end_segment = i, i == len(parts)
            if i < len(parts):
                open_multi.append((seg, trans_id))
                continue
            while open_multi and rng.random() < 0.5:  # interleave earlier segments later
                out.append(open_multi.pop(0)[0])
            out.extend(s for s, t in open_multi if t == trans_id)
            open_multi = [(s, t) for s, t in open_multi if t != trans_id]
            out.append(seg)
    out.extend(s for s, _ in open_multi)
    return out


def in_schema(txns: list[transaction_pb2.Transaction], schema: str) -> None:
    """Move every row statement of ``txns`` to ``schema`` (e.g. a keyspace of one test)."""
    for t in txns:
        for st in t.statements:
            kind = st.WhichOneof("kind")
            if kind in ("insert", "update", "delete"):
                getattr(st, kind).table.schema_name = schema


def _fields(cols: list[tuple[str, int]]) -> list[Any]:
    from gateway.v1 import statement_pb2

    return [statement_pb2.FieldMetadata(name=n, type=t) for n, t in cols]  # type: ignore[arg-type]


def write_log_file(path: Path, txns: list[transaction_pb2.Transaction]) -> Path:
    """A standalone log file (as ``gateway log write`` makes them)."""
    path.write_bytes(records.SEPARATOR + records.encode_records([messages.pack(t)
                                                                 for t in txns]))
    return path


def write_wal(directory: Path, txns: list[transaction_pb2.Transaction], *,
              segment_bytes: int = 4096, commit: int | None = None) -> Path:
    """A WAL directory holding one entry per transaction, committed up to ``commit``."""
    wal = SegmentedWal(str(directory), options=WalOptions(max_segment_bytes=segment_bytes))
    try:
        entries = [WalEntry(i, 1 + i // 50, 0, messages.pack(t)) for i, t in enumerate(txns, 1)]
        for i in range(0, len(entries), 4):  # small appends, so that segments rotate
            wal.append(entries[i : i + 4])
        wal.save_hard_state(WalHardState(1 + len(txns) // 50, 0,
                                      len(txns) if commit is None else commit))
    finally:
        wal.close()
    return directory


def reference_state(log_file: Path, db: Path, *, max_index: int | None = None
                    ) -> dict[str, list[dict[str, Any]]]:
    """Apply ``log_file`` sequentially through the dispatcher and the SQLite applier."""
    applier = SqliteApplier(db)
    try:
        Dispatcher(applier, LogFileSource(log_file), db.parent / f"{db.name}.state",
                   config=DispatcherConfig(threads=1)).run(max_index=max_index)
        return sqlite_state(db)
    finally:
        applier.close()


def sqlite_state(db: Path) -> dict[str, list[dict[str, Any]]]:
    """Every user table of ``db`` as sorted lists of row dicts (nulls dropped)."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' "
            "ESCAPE '\\'")]
        out = {}
        for name in names:
            cur = conn.execute(f'SELECT * FROM "{name}"')
            cols = [d[0] for d in cur.description]
            rows = [{c: v for c, v in zip(cols, r, strict=True) if v is not None} for r in cur]
            out[name] = sorted(rows, key=repr)
        return out
    finally:
        conn.close()
