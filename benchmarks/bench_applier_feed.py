"""The node's applier path in one process: committed entries -> dispatcher -> SQLite.

    python benchmarks/bench_applier_feed.py [--transactions 40000] [--rows 1] [--value-bytes 10]
                                            [--no-floor]

What each node's ``applier-sqlite`` thread does per committed transaction, without the rest of
the node: a source that, like the node's committed-log source, keeps the log's entries as bytes
and reads each read batch of them as the node does (``PayloadSource``: at most 4 MiB), the real
``Dispatcher`` with the node's settings for it (``SQLITE_DISPATCH``: read batches of 1,024, the
columns path) and the built-in ``SqliteApplier`` on a temporary file (synchronous=NORMAL,
WAL). Transactions insert ``--rows`` rows each into one table, values of
``--value-bytes`` (10 by default), as ``bench_node.py``'s cells do, under the node process's
collector policy (``gateway.node.loop.gc_policy``) where the tree has one. Prints CPU and wall time
per transaction and per row, and the share of the CPU spent inside
``SqliteApplier.apply_columns`` (SQLite and its Python around it). ``bench_threads.py`` gives
the same thread's CPU inside a loaded node (about twice this: two cores shared by three nodes).

Beside it, in the same run, the peer that bounds it: **SQLite alone** writing the same rows --
the same keys and values, the same statements the applier sends (``INSERT OR REPLACE`` of 128,
16 and 1 rows), the same table and page size (8 KiB), WAL and synchronous=NORMAL, the same
rows per SQLite transaction as the applier's ``apply_columns`` calls were given -- with every
parameter list built before the clock starts. Its CPU per row is what no applier built on
SQLite can go below; the ratio ``applier cost / SQLite alone`` is what decoding, dispatch and
bookkeeping add. ``--no-floor`` skips it. Runs on any tree (for ``compare_revisions.py``).
Timings are informative only.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_node as bn

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import CommittedEntry
from gateway.appliers.sqlite import SqliteApplier
from gateway.node.appliers.feed import _READ_BYTES  # where the node's source stops a read
from gateway.raft import Entry
from gateway.raft.types import limit_size
from gateway.v1 import transaction_pb2

try:  # the node's read of one transaction entry (trees since stop 31)
    from gateway.node.appliers.feed import transaction_entry
except ImportError:
    transaction_entry = None
try:  # the node's read of a batch of entries in one C loop (trees since stop 44)
    from gateway.node.appliers.feed import _UNIT, feed_entries
except ImportError:
    feed_entries = None
try:  # the node's dispatcher settings for SQLite, named (trees since stop 50)
    from gateway.node.server import SQLITE_DISPATCH
except ImportError:  # what earlier trees' nodes wrote in place
    SQLITE_DISPATCH = DispatcherConfig(poll_interval=0.05, threads=1, window=64)
try:  # the collector policy of the node's process (trees since stop 31)
    from gateway.node.loop import gc_policy
except ImportError:
    gc_policy = None
_TAKES_WIRE = "wire" in inspect.signature(CommittedEntry).parameters


class PayloadSource:
    """Entries kept as the log keeps them (type tag + serialized transaction), read as the
    node's source reads them: a read batch of log ``Entry`` objects through the C
    ``feed_entries`` where the tree has it, else
    ``gateway.node.appliers.feed.transaction_entry`` per entry, else parsed at each read."""

    def __init__(self, payloads: list[bytes]) -> None:
        self._entries = [Entry(1, i + 1, data=b"\x01" + p) for i, p in enumerate(payloads)]

    def last_index(self) -> int:
        return len(self._entries)

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        # As the node's log storage reads: at most _READ_BYTES of entries, never none.
        ents = limit_size(self._entries[from_index - 1:from_index - 1 + max_entries],
                          _READ_BYTES)
        if feed_entries is not None:
            got, todo = feed_entries(_UNIT, ents, set(), CommittedEntry)
            assert not todo  # transactions only: nothing left for the Python path
            return got
        out = []
        for i, data in enumerate(e.data for e in ents):
            if transaction_entry is not None:
                out.append(transaction_entry(from_index + i, data))
                continue
            wire = data[1:]
            txn = transaction_pb2.Transaction.FromString(wire)
            out.append(CommittedEntry(from_index + i, txn, wire=wire) if _TAKES_WIRE
                       else CommittedEntry(from_index + i, txn))
        return out


def payloads(n: int, rows: int, value_bytes: int) -> list[bytes]:
    out = []
    for i in range(n):
        req = bn.put_request(f"t10-{i % 8}-{i // 8}", "x" * value_bytes, rows)
        txn = transaction_pb2.Transaction(statements=req.statements, commit_timestamp_ns=1 + i,
                                          segment_id=1, end_segment=True)
        txn.gtid.server_id, txn.gtid.trans_id = 1, i + 1
        out.append(txn.SerializeToString())
    return out


def rows_of(payloads: list[bytes]) -> list[tuple[str, str]]:
    """``(key, value)`` of every row the transactions ``payloads`` insert, in log order (each
    holds one insert statement of one key and one value column: ``payloads``' shape)."""
    out = []
    for wire in payloads:
        for stmt in transaction_pb2.Transaction.FromString(wire).statements:
            for rec in stmt.insert.records:
                out.append((rec.key_values[0].string_value, rec.after_values[0].string_value))
    return out


#: Rows per statement of the applier's multi-row inserts (``gateway.appliers.sqlite``), the
#: largest first; the rest go one by one.
FLOOR_SIZES = (128, 16)


def sqlite_floor(rows: list[tuple[str, str]], groups: list[int], path: Path) -> float:
    """CPU seconds SQLite alone takes to insert ``rows`` into a new database at ``path`` as
    the applier does (module docstring): one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per entry of
    ``groups`` (rows per transaction, in order), each group's rows as statements of
    ``FLOOR_SIZES`` rows then one by one. Every parameter list is built before timing."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size=8192")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute('CREATE TABLE "kv" ("k" TEXT, "v" TEXT, PRIMARY KEY ("k"))')
    one = '(?, ?)'
    sql = {n: 'INSERT OR REPLACE INTO "kv" ("k", "v") VALUES ' + ", ".join([one] * n)
           for n in (*FLOOR_SIZES, 1)}
    plan: list[list[tuple[str, list[str]]]] = []  # per transaction: (statement, parameters)
    at = 0
    for size in groups:
        steps, end = [], at + size
        for n in (*FLOOR_SIZES, 1):
            while end - at >= n:
                steps.append((sql[n], list(itertools.chain.from_iterable(rows[at:at + n]))))
                at += n
        plan.append(steps)
    t0 = time.process_time()
    for steps in plan:
        conn.execute("BEGIN IMMEDIATE")
        for statement, params in steps:
            conn.execute(statement, params)
        conn.execute("COMMIT")
    spent = time.process_time() - t0
    conn.close()
    return spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transactions", type=int, default=40_000)
    p.add_argument("--rows", type=int, default=1, help="rows per transaction")
    p.add_argument("--value-bytes", type=int, default=10, help="bytes of each row's value")
    p.add_argument("--no-floor", action="store_true",
                   help="skip the SQLite-alone peer (the floor)")
    args = p.parse_args()
    if args.transactions < 1 or args.rows < 1 or args.value_bytes < 0:
        p.error("--transactions and --rows must be at least 1, --value-bytes at least 0")
    data = payloads(args.transactions, args.rows, args.value_bytes)
    if gc_policy is not None:
        gc_policy.settle()  # as `gateway run` does once the node has started
    spent = [0.0]
    groups: list[int] = []  # rows given to each apply_columns call, in order
    with tempfile.TemporaryDirectory(prefix="bench-applier-feed-") as tmp:
        applier = SqliteApplier(Path(tmp) / "target.db")
        apply_columns = applier.apply_columns

        def timed(batches, *a, **k):  # type: ignore[no-untyped-def]
            batches = list(batches)
            groups.append(sum(len(b) for b in batches))
            t0 = time.process_time()
            try:
                return apply_columns(batches, *a, **k)
            finally:
                spent[0] += time.process_time() - t0

        applier.apply_columns = timed  # type: ignore[method-assign]
        d = Dispatcher(applier, PayloadSource(data), Path(tmp) / "state", config=SQLITE_DISPATCH)
        c0, w0 = time.process_time(), time.perf_counter()
        d.run()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        applier.close()
        n, rows = args.transactions, args.transactions * args.rows
        floor = None
        if not args.no_floor and sum(groups) == rows:
            floor = sqlite_floor(rows_of(data), groups, Path(tmp) / "floor.db")
    print(f"{n:,} transactions, bytes passed on: {_TAKES_WIRE}, "
          f"{len(groups):,} apply_columns calls")
    head = "| feed | CPU us/txn | CPU us/row | wall us/txn | apply_columns share % |"
    line = (f"| {args.rows} row(s) of {args.value_bytes} B per transaction | "
            f"{cpu / n * 1e6:.2f} | {cpu / rows * 1e6:.3f} | {wall / n * 1e6:.2f} | "
            f"{100 * spent[0] / cpu:.1f} |")
    if floor is not None:
        # "cost": compare_revisions reads a falling ratio as better
        head += " SQLite alone CPU us/row | applier cost / SQLite alone |"
        line += f" {floor / rows * 1e6:.3f} | {cpu / floor:.2f}x |"
    elif not args.no_floor:  # rows went another way than apply_columns: no like-for-like peer
        print("(SQLite alone skipped: not every row went through apply_columns)")
    print(head)
    print("|" + "---|" * head.count(" |"))
    print(line)

if __name__ == "__main__":
    main()
