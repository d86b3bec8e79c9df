"""CPU per replicated row judged by a conflict function, beside the same row unjudged.

The replica's state machine alone (no processes, no network): a store holding ``--rows``
rows written by this cluster (1), then epochs of cluster 2 that update (or delete, or insert
again: held keys) every row once, applied

- **unjudged**: no conflict rule;
- **judged**: ``bench.* -> FUNCTION`` with this cluster PRIMARY (``--conflicting``: the
  fraction of rows this cluster wrote after cluster 2's max replicated epoch, in conflict),
  in C (``node/state/epoch_judge``) and by the Python specification (``judge_unit``).

Prints CPU us per row of each and the differences (issue 58's target: a row judged by
NDB$EPOCH2 <= +5 us over an unjudged one). Inserts of keys held here are in conflict under
an epoch function on a PRIMARY whoever wrote them, so ``insert`` rows all conflict.

    python benchmarks/bench_judge.py [--rows 20000] [--txn 500] [--function NDB$EPOCH2]
                                     [--ops update,delete,insert] [--conflicting 0,0.5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.conflict import Role  # noqa: E402
from gateway.conflict.rules import ConflictRule  # noqa: E402
from gateway.core import messages  # noqa: E402
from gateway.node.state.state_machine import StoreStateMachine  # noqa: E402
from gateway.raft import Entry, EntryType  # noqa: E402
from gateway.replication import ReplicationState, build_unit  # noqa: E402
from gateway.replication.epochs import SealedEpoch  # noqa: E402
from gateway.v1 import (  # noqa: E402
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

_INT = value_pb2.FIELD_TYPE_INTEGER
_STR = value_pb2.FIELD_TYPE_VARCHAR
_T = statement_pb2.TableMetadata(schema_name="bench", table_name="rows")
_KF = [statement_pb2.FieldMetadata(name="id", type=_INT)]
_F = [statement_pb2.FieldMetadata(name="v", type=_STR)]


def _stmt(kind: str, keys: range, value: str) -> statement_pb2.Statement:
    kv = [[value_pb2.Value(int_value=k)] for k in keys]
    after = [value_pb2.Value(string_value=value)]
    if kind == "insert":
        return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=_T, key_fields=_KF, fields=_F, records=[
                statement_pb2.InsertRecord(key_values=k, after_values=after) for k in kv]))
    if kind == "update":
        return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
            table=_T, key_fields=_KF, set_fields=_F, records=[
                statement_pb2.UpdateRecord(key_values=k, after_values=after) for k in kv]))
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=_T, key_fields=_KF, records=[statement_pb2.DeleteRecord(key_values=k)
                                           for k in kv]))


class _Log:
    def __init__(self) -> None:
        self.index = 1
        self.view = ReplicationState(1)

    def entry(self, data: bytes) -> Entry:
        self.index += 1
        return Entry(term=1, index=self.index, type=EntryType.NORMAL, data=data)


def _local(log: _Log, keys: range, n: int) -> Entry:
    """A transaction of this cluster (1) writing ``keys`` in its epoch ``n``."""
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=n), epoch=(1 << 32) | n, author=1,
        commit_timestamp_ns=n, segment_id=1, end_segment=True,
        statements=[_stmt("insert", keys, "local")])
    return log.entry(messages.pack(txn))


def _epoch(log: _Log, kind: str, keys: range, txn_rows: int, n: int) -> list[Entry]:
    items = []
    for t, lo in enumerate(range(keys.start, keys.stop, txn_rows)):
        tid = n * 1000 + t
        items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=2, trans_id=tid), epoch=(1 << 32) | n, author=2,
            commit_timestamp_ns=10**12 + tid, segment_id=1, end_segment=True,
            statements=[_stmt(kind, range(lo, min(lo + txn_rows, keys.stop)), "remote")])))
    sealed = SealedEpoch((1 << 32) | n, items, last_log_index=n)
    out = []
    for part in build_unit(log.view, "c", 2, sealed, (3 << 32) | (100 + n)):
        part.derived_trans_id = 10**6 + n
        part.derived_commit_ts = 10**13 + n
        out.append(log.entry(messages.pack(part)))
    return out


def run(judged: bool, function: str, kind: str, rows: int, txn_rows: int,
        conflicting: float, epoch_rows: int, in_c: bool = True) -> float:
    """Seconds per row of applying the epochs (see the module docstring)."""
    root = tempfile.mkdtemp(prefix="bench-judge-")
    try:
        sm = StoreStateMachine(os.path.join(root, "sm"), cluster_id=1)
        log = _Log()
        sm.apply(_epoch(log, "insert", range(rows), txn_rows, 1))  # the rows: 2's
        hot = int(rows * conflicting)
        if hot:  # rewritten here after what 2 has seen (max replicated epoch 0): conflicts
            sm.apply([_local(log, range(0, hot), 2)])
        if judged:
            sm.conflict_rules = {"bench.*": ConflictRule("bench.*", function, ())}
            sm.conflict_role = Role.PRIMARY
            sm.judge_in_c = in_c
            sm.derive_in_c = in_c
        work = [_epoch(log, kind, range(lo, min(lo + epoch_rows, rows)), txn_rows, 10 + i)
                for i, lo in enumerate(range(0, rows, epoch_rows))]
        t0 = time.process_time()
        for entries in work:
            for a in sm.apply(entries):
                if a.error is not None:
                    raise SystemExit(f"refused: {a.error}")
        dt = time.process_time() - t0
        sm.close()
        return dt / rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--txn", type=int, default=500, help="rows per transaction")
    p.add_argument("--epoch", type=int, default=5000, help="rows per epoch")
    p.add_argument("--function", default="NDB$EPOCH2")
    p.add_argument("--ops", default="update,delete,insert")
    p.add_argument("--conflicting", default="0,0.5")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    avg = os.getloadavg()
    print(f"load average before: {avg[0]:.2f} {avg[1]:.2f} {avg[2]:.2f}; best of "
          f"{args.repeat}, CPU time")
    fn = args.function
    print(f"| rows | conflicting | unjudged us/row | {fn} in C | {fn} in Python | "
          "C - unjudged | Python - unjudged |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.ops.split(","):
        for c in (float(x) for x in args.conflicting.split(",")):
            best = {"plain": 1.0, "c": 1.0, "py": 1.0}
            for _ in range(args.repeat):  # interleaved: drift hits all three alike
                for name, judged, in_c in (("plain", False, True), ("c", True, True),
                                           ("py", True, False)):
                    best[name] = min(best[name], run(judged, fn, kind, args.rows, args.txn,
                                                     c, args.epoch, in_c))
            plain, in_c_s, py = best["plain"], best["c"], best["py"]
            print(f"| {kind} | {c:.0%} | {plain * 1e6:.1f} | {in_c_s * 1e6:.1f} | "
                  f"{py * 1e6:.1f} | {(in_c_s - plain) * 1e6:+.1f} us | "
                  f"{(py - plain) * 1e6:+.1f} us |", flush=True)


if __name__ == "__main__":
    main()
