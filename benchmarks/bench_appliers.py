"""The reducer post's claim, measured: reduced + multi-threaded apply vs original statements.

Marcus Eriksson (2010) found that applying reduced transactions with a multi-threaded
applier took about half the time of applying the original statements with one thread. This
runs the real dispatcher (``gateway.appliers.Dispatcher``) over the same workload in five ways:

- ``original x1``   every record as its own operation (``reduce=False``), one worker thread;
- ``reduced x1/x4/x8``  reduced transactions, 1, 4 and 8 worker threads;
- ``window16 x8``   window mode (16 transactions reduced together), 8 threads;

against two stores:

- ``sink-1ms``  a remote-store stand-in: every operation costs ~1 ms of waiting (one round
  trip, ``time.sleep``), one operation per call, calls may run in parallel;
- ``sqlite``    the built-in SQLite applier on a temporary file (synchronous=NORMAL, WAL).

The workload is one where transactions touch rows repeatedly: each inserts a few new rows and
updates them several times, updates a few hot existing rows more than once and deletes one.
Every run checks the final store against applying the original statements sequentially, and
that no row ever saw its operations out of log order (per-row order violations must be 0).
Also reported: the reducer's own throughput in input operations per second.

Usage: python benchmarks/bench_appliers.py [--transactions N] [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gateway.appliers.contract import Applier, Capabilities
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import MemorySource
from gateway.appliers.sqlite import SqliteApplier
from gateway.core.reducer import reduce_transaction
from gateway.core.rowops import OpKind, RowOp, statement_ops
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
TABLE = statement_pb2.TableMetadata(schema_name="bench", table_name="accounts")
KEY = [statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)]
FIELDS = [statement_pb2.FieldMetadata(name="balance", type=FT.FIELD_TYPE_INTEGER),
          statement_pb2.FieldMetadata(name="note", type=FT.FIELD_TYPE_VARCHAR)]


def _v(x: Any) -> value_pb2.Value:
    return value_pb2.Value(string_value=x) if isinstance(x, str) else value_pb2.Value(int_value=x)


def workload(n_txns: int, seed: int = 2010) -> list[transaction_pb2.Transaction]:
    """Master-valid transactions that touch rows repeatedly (see the module docstring)."""
    rng = random.Random(seed)
    live: list[int] = []
    next_id = 1
    txns = []
    for t in range(1, n_txns + 1):
        stmts = []
        fresh = list(range(next_id, next_id + 4))
        next_id += 4
        ins = statement_pb2.InsertStatement(table=TABLE, key_fields=KEY, fields=FIELDS)
        for k in fresh:
            ins.records.add(key_values=[_v(k)], after_values=[_v(0), _v(f"t{t}")])
        stmts.append(statement_pb2.Statement(insert=ins))
        hot = rng.sample(live, min(3, len(live)))
        for rnd in range(3):  # three rounds of updates over new and hot rows
            upd = statement_pb2.UpdateStatement(table=TABLE, key_fields=KEY,
                                                set_fields=FIELDS[:1])
            for k in fresh + hot:
                upd.records.add(key_values=[_v(k)], after_values=[_v(t * 10 + rnd)])
            stmts.append(statement_pb2.Statement(update=upd))
        live.extend(fresh)
        if len(live) > 40:
            victim = live.pop(rng.randrange(len(live)))
            dele = statement_pb2.DeleteStatement(table=TABLE, key_fields=KEY)
            dele.records.add(key_values=[_v(victim)])
            stmts.append(statement_pb2.Statement(delete=dele))
        txns.append(transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=1, trans_id=t), epoch=1, author=1,
            start_timestamp_ns=t, commit_timestamp_ns=t, statements=stmts, segment_id=1,
            end_segment=True))
    return txns


def reference(txns: Sequence[transaction_pb2.Transaction]) -> dict:
    """The store after applying the original statements one by one."""
    store: dict = {}
    for i, t in enumerate(txns, 1):
        for op in statement_ops(t, i):
            _apply(store, op)
    return store


def _apply(store: dict, op: RowOp) -> None:
    new = dict(zip((c.name for c in op.columns), op.values, strict=True))
    if op.kind in (OpKind.INSERT, OpKind.UPSERT):
        store[op.key] = new
    elif op.kind is OpKind.UPDATE:
        if op.key in store:
            store[op.key].update(new)
    elif op.kind is OpKind.DELETE:
        store.pop(op.key, None)
    else:
        raise AssertionError(f"unexpected {op.kind} in the benchmark workload")


class LatencySink(Applier):
    """A store where every operation is one ~1 ms round trip; records per-row order."""

    def __init__(self, latency: float) -> None:
        self.name = "sink"
        self.capabilities = Capabilities(accepts_sql=False, max_batch=1)
        self.latency = latency
        self.store: dict = {}
        self.last_seen: dict = {}
        self.violations = 0
        self._lock = threading.Lock()

    def apply(self, ops: Sequence[RowOp]) -> None:
        time.sleep(self.latency * len(ops))
        with self._lock:
            for op in ops:
                order = (op.log_index, op.statement)
                if self.last_seen.get(op.key, (0, 0)) > order:
                    self.violations += 1
                self.last_seen[op.key] = order
                _apply(self.store, op)


def _run(applier: Applier, txns: list, state: Path, *, reduce: bool, threads: int,
         window: int = 1) -> tuple[float, Dispatcher]:
    config = DispatcherConfig(threads=threads, reduce=reduce, window=window,
                              save_interval=0.5)
    d = Dispatcher(applier, MemorySource(txns), state, config=config)
    t0 = time.perf_counter()
    position = d.run()
    elapsed = time.perf_counter() - t0
    assert position.log_index == len(txns), "the run did not finish"
    return elapsed, d


VARIANTS = [("original x1", False, 1, 1), ("reduced x1", True, 1, 1),
            ("reduced x4", True, 4, 1), ("reduced x8", True, 8, 1),
            ("window16 x8", True, 8, 16)]


def bench_store(kind: str, txns: list, expected: dict, tmp: Path) -> list[tuple]:
    rows = []
    base = None
    for label, reduce, threads, window in VARIANTS:
        state = tmp / f"{kind}-{label.replace(' ', '-')}"
        if kind == "sink-1ms":
            applier: Any = LatencySink(0.001)
        else:
            applier = SqliteApplier(state.with_suffix(".db"), name="sqlite")
        elapsed, d = _run(applier, txns, state, reduce=reduce, threads=threads, window=window)
        if kind == "sink-1ms":
            store, violations = applier.store, applier.violations
        else:
            store = {(r["id"],): {"balance": r["balance"], "note": r["note"]}
                     for r in applier.rows("accounts")}
            expected_cmp = {k: {"balance": v.get("balance"), "note": v.get("note")}
                            for k, v in expected.items()}
            violations = 0 if store == expected_cmp else -1
            applier.close()
        if kind == "sink-1ms" and store != expected:
            violations = -1
        if violations:
            raise SystemExit(f"{kind} {label}: wrong final state or {violations} per-row "
                             f"order violations")
        base = base or elapsed
        rows.append((kind, label, d.metrics.ops_out, elapsed, d.metrics.ops_out / elapsed,
                     base / elapsed, violations))
    return rows


def reducer_throughput(txns: list) -> tuple[int, int, float]:
    n_in = sum(len(statement_ops(t)) for t in txns)
    best = float("inf")
    n_out = 0
    for _ in range(3):
        t0 = time.perf_counter()
        n_out = sum(len(reduce_transaction(t, i)) for i, t in enumerate(txns, 1))
        best = min(best, time.perf_counter() - t0)
    return n_in, n_out, n_in / best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="40 transactions")
    ns = parser.parse_args(argv)
    n = 40 if ns.quick else ns.transactions
    txns = workload(n)
    expected = reference(txns)
    n_in, n_out, rate = reducer_throughput(txns)
    print(f"workload: {n} transactions, {n_in} row operations as logged, {n_out} after "
          f"reduction ({n_in / n_out:.1f}x fewer)")
    print(f"reducer: {rate:,.0f} input ops/s (statement_ops + reduce, one thread)\n")
    print(f"{'store':<9} {'variant':<12} {'ops':>6} {'seconds':>8} {'ops/s':>9} "
          f"{'vs original x1':>15} {'order violations':>17}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sink-1ms", "sqlite"):
            for store, label, ops, secs, ops_s, ratio, viol in bench_store(
                    kind, txns, expected, Path(tmp)):
                print(f"{store:<9} {label:<12} {ops:>6} {secs:>8.3f} {ops_s:>9,.0f} "
                      f"{ratio:>14.2f}x {viol:>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
