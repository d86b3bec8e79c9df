"""The node's applier path in one process: committed entries -> dispatcher -> SQLite.

    python benchmarks/bench_applier_feed.py [--transactions 40000] [--rows 1] [--value-bytes 10]

What each node's ``applier-sqlite`` thread does per committed transaction, without the rest
of the node: a source that, like the node's committed-log source, keeps the log's entry
payloads as bytes and parses each entry it hands out (passing the bytes on too, where the
tree's ``CommittedEntry`` takes them), the real ``Dispatcher`` (read batches of 256, the
columns path) and the built-in ``SqliteApplier`` on a temporary file (synchronous=NORMAL,
WAL). Transactions insert ``--rows`` rows each into one table, values of ``--value-bytes``
(10 by default), as ``bench_node.py``'s cells do, under the node process's collector policy
(``gateway.node.gc_policy``) where the tree has one. Prints CPU and wall time per transaction
and per row, and the share of the CPU spent inside ``SqliteApplier.apply_columns`` (SQLite
and its Python around it). ``bench_threads.py`` gives the same thread's CPU inside a loaded
node (about twice this: two cores shared by three nodes). Runs on any tree (for
``compare_revisions.py``). Timings are informative only.
"""

from __future__ import annotations

import argparse
import inspect
import os
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
from gateway.v1 import transaction_pb2

try:  # the node's read of one transaction entry (trees since stop 31)
    from gateway.node.feed import transaction_entry
except ImportError:
    transaction_entry = None
try:  # the collector policy of the node's process (trees since stop 31)
    from gateway.node import gc_policy
except ImportError:
    gc_policy = None
_TAKES_WIRE = "wire" in inspect.signature(CommittedEntry).parameters


class PayloadSource:
    """Entries kept as the log keeps them (type tag + serialized transaction), read as the
    node's source reads them: ``gateway.node.feed.transaction_entry`` where the tree has it,
    else parsed at each read."""

    def __init__(self, payloads: list[bytes]) -> None:
        self._payloads = [b"\x01" + p for p in payloads]

    def last_index(self) -> int:
        return len(self._payloads)

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        out = []
        for i, data in enumerate(self._payloads[from_index - 1:from_index - 1 + max_entries]):
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transactions", type=int, default=40_000)
    p.add_argument("--rows", type=int, default=1, help="rows per transaction")
    p.add_argument("--value-bytes", type=int, default=10, help="bytes of each row's value")
    args = p.parse_args()
    data = payloads(args.transactions, args.rows, args.value_bytes)
    if gc_policy is not None:
        gc_policy.settle()  # as `gateway run` does once the node has started
    spent = [0.0]
    with tempfile.TemporaryDirectory(prefix="bench-applier-feed-") as tmp:
        applier = SqliteApplier(Path(tmp) / "target.db")
        apply_columns = applier.apply_columns

        def timed(*a, **k):  # type: ignore[no-untyped-def]
            t0 = time.process_time()
            try:
                return apply_columns(*a, **k)
            finally:
                spent[0] += time.process_time() - t0

        applier.apply_columns = timed  # type: ignore[method-assign]
        d = Dispatcher(applier, PayloadSource(data), Path(tmp) / "state",
                       config=DispatcherConfig())
        c0, w0 = time.process_time(), time.perf_counter()
        d.run()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        applier.close()
    n, rows = args.transactions, args.transactions * args.rows
    print(f"{n:,} transactions, bytes passed on: {_TAKES_WIRE}")
    print("| feed | CPU us/txn | CPU us/row | wall us/txn | apply_columns share % |")
    print("|---|---|---|---|---|")
    print(f"| {args.rows} row(s) of {args.value_bytes} B per transaction | {cpu / n * 1e6:.2f} | "
          f"{cpu / rows * 1e6:.3f} | {wall / n * 1e6:.2f} | {100 * spent[0] / cpu:.1f} |")

if __name__ == "__main__":
    main()
