"""Backfilling a new SQLite sink from the store, beside the sink's own bulk apply of the rows.

    python benchmarks/bench_backfill.py [--rows 200000] [--value-bytes 100] [--chunk 4096]

A store (``LSMStore`` in a temporary directory) is filled with ``--rows`` rows of one table as
the state machine stores them (a serialized ``gateway.v1.Row`` with its metadata per key),
flushed. Then, timed:

- **backfill**: ``run_backfill`` (``gateway.node.appliers.backfill``) of a new
  ``SqliteApplier`` -- a store snapshot, the rows read in key order ``--chunk`` at a time,
  decoded into UPSERT operations, each chunk one ``apply_columns`` call, the position held in
  the database and saved to its file after every chunk: everything a node's new SQLite sink
  does before it follows the log;
- **bulk apply**: the same applier's ``apply_columns`` of the same rows in the same chunks,
  their columns built before the clock starts (no store read, no decoding, no position):
  what the sink itself costs.

Prints rows/s of each (wall and CPU) and the ratio ``backfill / bulk apply``, and the load
average of the machine (the figures mean little on a busy one). Timings are informative only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

from gateway.appliers import MemorySource
from gateway.appliers.dispatcher import Dispatcher
from gateway.appliers.position import ApplierPosition, PositionStore
from gateway.appliers.sqlite import SqliteApplier
from gateway.core.lsm import LSMStore
from gateway.core.rowops import Column, ColumnOps, OpKind, TableRef
from gateway.node.appliers.backfill import run_backfill
from gateway.node.state import keys
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, value_pb2

FT = value_pb2.FieldType
KEY = (Column("id", FT.FIELD_TYPE_INTEGER),)
COLS = (Column("v", FT.FIELD_TYPE_VARCHAR), Column("n", FT.FIELD_TYPE_INTEGER))
TABLE = TableRef("bench", "items")


def fill(store: LSMStore, rows: int, value_bytes: int) -> None:
    pad = "x" * max(0, value_bytes - 8)
    batch = []
    for i in range(rows):
        row = gateway_pb2.Row(
            table=statement_pb2.TableMetadata(schema_name=TABLE.schema, table_name=TABLE.name),
            key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
            key_values=[value_pb2.Value(int_value=i)],
            fields=[statement_pb2.FieldMetadata(name="v", type=FT.FIELD_TYPE_VARCHAR),
                    statement_pb2.FieldMetadata(name="n", type=FT.FIELD_TYPE_INTEGER)],
            values=[value_pb2.Value(string_value=f"{i:08d}{pad}"), value_pb2.Value(int_value=i)],
            gtid=gtid_pb2.Gtid(server_id=1, trans_id=i + 1), log_index=i + 1, epoch=1,
            author=1, commit_timestamp_ns=1_700_000_000_000_000_000 + i)
        key = keys.row_key(TABLE.schema, TABLE.name, [value_pb2.Value(int_value=i)])
        batch.append((key, row.SerializeToString(), 1, 1, row.commit_timestamp_ns))
        if len(batch) == 10_000:
            store.write_batch(batch, log_index=i + 1)
            batch = []
    if batch:
        store.write_batch(batch, log_index=rows)
    store.flush()


def bulk_chunks(rows: int, value_bytes: int, chunk: int) -> list[tuple[ColumnOps, list]]:
    pad = "x" * max(0, value_bytes - 8)
    out = []
    for start in range(0, rows, chunk):
        ids = list(range(start, min(rows, start + chunk)))
        ops = ColumnOps(TABLE, OpKind.UPSERT, KEY, COLS, [ids],
                        [[f"{i:08d}{pad}" for i in ids], list(ids)])
        out.append((ops, [(1, i + 1) for i in ids]))
    return out


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=4096)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp:
        root = Path(tmp)
        store = LSMStore(str(root / "store"))
        try:
            fill(store, args.rows, args.value_bytes)
            sink = SqliteApplier(root / "backfill.db")
            d = Dispatcher(sink, MemorySource([]), root / "state")
            positions = PositionStore(root / "state", sink.name)
            got: list = []
            b_wall, b_cpu = timed(lambda: got.append(run_backfill(
                sink, d, positions, store, ApplierPosition(), chunk_rows=args.chunk)))
            sink.close()
            assert got[0] is not None and got[0].backfill.rows == args.rows
        finally:
            store.close()
        chunks = bulk_chunks(args.rows, args.value_bytes, args.chunk)
        bulk = SqliteApplier(root / "bulk.db")

        def apply_all() -> None:
            for ops, gtids in chunks:
                bulk.apply_columns([ops], gtids)

        a_wall, a_cpu = timed(apply_all)
        bulk.close()
    n = args.rows
    print(f"rows {n}, value {args.value_bytes} B, chunk {args.chunk}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"backfill    {n / b_wall:10,.0f} rows/s wall  {n / b_cpu:10,.0f} rows/s CPU  "
          f"({b_wall:.2f} s)")
    print(f"bulk apply  {n / a_wall:10,.0f} rows/s wall  {n / a_cpu:10,.0f} rows/s CPU  "
          f"({a_wall:.2f} s)")
    print(f"ratio backfill / bulk apply: {a_wall / b_wall:.2f} of the rows/s (wall), "
          f"{a_cpu / b_cpu:.2f} (CPU)")


if __name__ == "__main__":
    main()
