"""In-process cost of ``StoreStateMachine.apply``: client transactions (the fast path: inserts
into a known table, a quarter of them with an idempotency key) and replicated epochs (the same
inserts arriving from another cluster), in batches as a Ready delivers them. No Raft, no
network: the figure a change of the state machine moves.

    python benchmarks/bench_apply.py --txns 20000 --rows 8 --batch 64

Prints the apply cost in ``us/txn`` per case: the CPU time of the process (all its threads),
which a machine shared with other work disturbs less than wall time; best of ``--repeat``
runs, each on a fresh store in a temporary directory. Compare two trees with
``benchmarks/compare_revisions.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from gateway.core import messages
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import gtid_pb2, replication_pb2, statement_pb2, transaction_pb2, value_pb2


def _txn(sid: int, tid: int, rows: int, epoch: int) -> transaction_pb2.Transaction:
    stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=3)],
        fields=[statement_pb2.FieldMetadata(name="v", type=12),
                statement_pb2.FieldMetadata(name="n", type=3)],
        records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=tid * rows + r)],
            after_values=[value_pb2.Value(string_value=f"value {tid}-{r}"),
                          value_pb2.Value(int_value=r)]) for r in range(rows)]))
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=sid, trans_id=tid), epoch=epoch, author=sid,
        start_timestamp_ns=5, commit_timestamp_ns=1_000_000 + tid, segment_id=1,
        end_segment=True, statements=[stmt])


def client_entries(n: int, rows: int) -> list[Entry]:
    return [Entry(term=1, index=i + 2, type=EntryType.NORMAL,
                  data=encode_transaction(_txn(1, i + 1, rows, 1 << 32),
                                          f"k{i}" if i % 4 == 0 else ""))
            for i in range(n)]


def epoch_entries(n: int, rows: int, per_epoch: int) -> list[Entry]:
    view = ReplicationState(1)
    out: list[Entry] = []
    tid = 0
    for e in range(1, n // per_epoch + 1):
        items = []
        for _ in range(per_epoch):
            tid += 1
            items.append(replication_pb2.ReplicatedItem(
                transaction=_txn(2, tid, rows, (1 << 32) | e)))
        sealed = SealedEpoch((1 << 32) | e, items, last_log_index=e)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | e):
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(part)))
    return out


def run(entries: list[Entry], batch: int, cluster_id: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        sm = StoreStateMachine(tmp, cluster_id=cluster_id)
        t0 = time.process_time()
        for i in range(0, len(entries), batch):
            sm.apply(entries[i:i + batch])
        took = time.process_time() - t0
        sm.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--txns", type=int, default=20000)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--per-epoch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    client = client_entries(args.txns, args.rows)
    epochs = epoch_entries(args.txns, args.rows, args.per_epoch)
    n_epoch_txns = args.txns // args.per_epoch * args.per_epoch
    best_c = min(run(client, args.batch, 1) for _ in range(args.repeat))
    best_e = min(run(epochs, max(1, args.batch // args.per_epoch), 1)
                 for _ in range(args.repeat))
    print(f"client transactions, fast path, us/txn  {best_c / args.txns * 1e6:.2f}")
    print(f"replicated epochs, us/txn               {best_e / n_epoch_txns * 1e6:.2f}")


if __name__ == "__main__":
    main()
