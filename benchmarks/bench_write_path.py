"""The leader's event-loop CPU per written row, in one process, for comparing trees
(``compare_revisions.py``) where the cluster's figures are too noisy.

    python benchmarks/bench_write_path.py [--rows 20000] [--repeat 3] [--no-gc]
    python benchmarks/bench_write_path.py --parts
    valgrind --tool=callgrind --separate-threads=yes \
        python3 benchmarks/bench_write_path.py --rows 4992 --repeat 1 --cells StreamWrite

Default: starts one single-node ``GatewayNode`` in this process (fsync off, no applier) and
drives its API handlers directly -- no gRPC, no client process: ``StreamWrite`` with requests
of 64 one-row writes and at most 1024 rows unacknowledged, then ``WriteBatch`` of 200 one-row
writes from 4 callers (``bench_node.py``'s rows: ``put_request``, 10 B values). The requests are
built before the clock starts. It prints the CPU time of this thread (the event loop: API,
driver, Raft, state machine, LSM memtable) per acknowledged row, best and median of
``--repeat``, and the garbage collector's collections (under ``gateway run``'s policy,
``gc_policy.settle``). The batching is fixed by the script, so
the figure does not move with the cluster's batching; a busy machine still moves it (caches,
frequency: read the A/A spread). ``--no-gc`` turns the collector off once the node runs;
``--cells`` runs one cell: under valgrind, the event-loop thread's instructions at two
``--rows``, differenced, are its instructions per row, which load does not move. The tree is
the working directory: ``compare_revisions.py`` can run this file against trees that do not
have it (the handlers before issue 53 took parsed messages; both are driven).

``--parts``: the per-write pieces issues 52-53 added to the leader's write path, each timed
alone with ``timeit`` (best of 7) beside what ``97dc67c`` did in its place, rebuilt inline.
Timings are informative only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import tempfile
import time
import timeit
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

TREE = Path.cwd()
sys.path.insert(0, str(TREE))
sys.path.insert(0, str(TREE / "benchmarks"))

import bench_node as bn  # noqa: E402

from gateway.v1 import gateway_pb2  # noqa: E402

try:  # issue 53: the write handlers take the bytes as received beside the parsed message
    from gateway.node.api.api_handlers import ReceivedRequest
except ImportError:
    ReceivedRequest = None  # type: ignore[assignment,misc]

PER_REQUEST, WINDOW, BATCH, CALLERS = 64, 1024, 200, 4


def _received(msg: Any) -> Any:
    return msg if ReceivedRequest is None else ReceivedRequest(msg.SerializeToString(), msg)


class _Context:
    """The servicer context the handlers use: no metadata, no deadline."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> None:
        return None

    def set_trailing_metadata(self, md: Any) -> None:
        pass

    async def abort(self, code: Any, details: str = "") -> None:
        raise RuntimeError(f"{code}: {details}")


class _Rows:
    def __init__(self) -> None:
        self.n = 0

    def write(self) -> gateway_pb2.WriteRequest:
        self.n += 1
        return bn.put_request(f"k{self.n}", bn.value_of(10))


async def _stream(sv: Any, rows: _Rows, n: int) -> tuple[float, int]:
    reqs = [_received(gateway_pb2.StreamWriteRequest(
        seq=1 + i * PER_REQUEST, writes=[rows.write() for _ in range(PER_REQUEST)]))
        for i in range(n // PER_REQUEST)]
    acked = sent = 0
    room = asyncio.Event()

    async def requests() -> AsyncIterator[Any]:
        nonlocal sent
        for r in reqs:
            while sent - acked >= WINDOW:
                room.clear()
                await room.wait()
            sent += PER_REQUEST
            yield r

    t0 = time.thread_time()
    async for out in sv.StreamWrite(requests(), _Context()):
        resp = gateway_pb2.StreamWriteResponse.FromString(out) if isinstance(out, bytes) else out
        acked += len(resp.acks)
        room.set()
    return time.thread_time() - t0, acked


async def _batch(sv: Any, rows: _Rows, n: int) -> tuple[float, int]:
    reqs = iter([_received(gateway_pb2.WriteBatchRequest(
        writes=[rows.write() for _ in range(BATCH)])) for _ in range(n // BATCH)])
    done = 0

    async def caller() -> None:
        nonlocal done
        for r in reqs:
            await sv.WriteBatch(r, _Context())
            done += BATCH

    t0 = time.thread_time()
    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    return time.thread_time() - t0, done


def _settle_gc() -> None:
    """The node process's collector policy (``gc_policy.settle``), in trees that have it."""
    for name in ("gateway.node.loop.gc_policy", "gateway.node.gc_policy"):
        try:
            module = __import__(name, fromlist=["settle"])
        except ImportError:
            continue
        module.settle()
        return


async def run_node(n: int, repeat: int, no_gc: bool, only: str = "") -> None:
    from gateway.node import GatewayNode
    from tests.node.conftest import node_configs

    logging.disable(logging.WARNING)
    cells = {"StreamWrite w1024": _stream, "WriteBatch x200": _batch}
    if only:
        cells = {k: v for k, v in cells.items() if k.split()[0] in only.split(",")}
    got: dict[str, list[float]] = {name: [] for name in cells}
    rows = _Rows()
    with tempfile.TemporaryDirectory(prefix="bench-write-path-") as tmp:
        node = GatewayNode(node_configs(Path(tmp), 1)[0])
        await node.start()
        try:
            while not node.driver.is_leader:
                await asyncio.sleep(0.02)
            sv = node.servicer
            _settle_gc()  # as `gateway run` does once its node started
            for fn in cells.values():  # warm-up: the table's shape learned, caches filled
                await fn(sv, rows, 4096)
            if no_gc:
                gc.disable()
            before = [s["collections"] for s in gc.get_stats()]
            for _ in range(repeat):
                for name, fn in cells.items():
                    cpu, acked = await fn(sv, rows, n)
                    got[name].append(cpu / acked * 1e6)
            after = [s["collections"] for s in gc.get_stats()]
        finally:
            gc.enable()
            await node.stop()
    print(f"one node in process, {n} rows per cell, {repeat} rounds, gc "
          f"{'off' if no_gc else 'on'}, load average {os.getloadavg()[0]:.2f}")
    print("| cell | loop CPU us/row (best) | loop CPU us/row (median) |")
    print("|---|---|---|")
    for name, v in got.items():
        v.sort()
        print(f"| {name} | {v[0]:.2f} | {v[len(v) // 2]:.2f} |")
    print("\n| gc generation | collections |\n|---|---|")
    for g, (a, b) in enumerate(zip(before, after, strict=True)):
        print(f"| gen{g} | {b - a} |")


def run_parts() -> None:
    """Each per-write piece beside what 97dc67c did instead (ns per write)."""
    from dataclasses import dataclass

    from gateway.node.loop.sequencer import Sequencer
    from gateway.node.loop.write_proposal import WriteProposal
    from gateway.node.state.alarms import SpaceMonitor

    n = 200_000
    loop = asyncio.new_event_loop()
    fut = loop.create_future()
    w = gateway_pb2.WriteRequest.FromString(bn.put_request("k1", "x" * 10).SerializeToString())

    def ns(stmt: str, env: dict[str, Any]) -> float:
        return min(timeit.repeat(stmt, globals=env, number=n, repeat=7)) / n * 1e9

    space = SpaceMonitor(1, "/tmp", "/tmp", 1 << 20, lambda d: 1 << 40, lambda b: None,
                         lambda: {})

    class Node:
        pass

    node = Node()
    node.space = space  # type: ignore[attr-defined]

    class Space52:  # issue 52's SpaceMonitor.refusal, asked once per write of a stream
        local = None
        replicated = staticmethod(lambda: {})

        def refusal(self) -> Any:
            replicated, local = self.replicated(), self.local
            alarm = local if local is not None else next(
                (replicated[k] for k in sorted(replicated)), None)
            return None if alarm is None else RuntimeError(alarm)

    node52 = Node()
    node52.space = Space52()  # type: ignore[attr-defined]

    @dataclass(slots=True)
    class OldPending:  # 97dc67c's PendingWrite: the write's fields and its future
        statements: Any
        idempotency_key: str
        start_ns: int
        future: Any
        created: Any = None
        raw: Any = None
        wire: bool = False

    def old_submit(statements: Any, idempotency_key: str = "", start_ns: int = 0, *,
                   created: Any = None, raw: Any = None, wire: bool = False,
                   unrecorded: bool = False) -> Any:
        return OldPending(statements, idempotency_key, start_ns or 1, fut, created, raw, wire)

    def new_submit(p: WriteProposal) -> Any:  # the proposal is the queued write
        p.future = fut
        if not p.start_ns:
            p.start_ns = 1
        return p

    class Leader:  # 97dc67c's leader state, stamped inline in _propose_writes
        last_commit_ts = next_trans_id = open_epoch = last_trans_in_epoch = 0
        open_epoch_txns = 0

    st = Leader()

    def old_stamp(now: int) -> tuple[int, int, int]:
        commit_ts = max(now, st.last_commit_ts + 1)
        st.last_commit_ts = commit_ts
        out = (st.next_trans_id, st.open_epoch, commit_ts)
        st.last_trans_in_epoch = st.next_trans_id
        st.next_trans_id += 1
        st.open_epoch_txns += 1
        return out

    seq = Sequencer.take_over(1, 0.0, 1.0, 0, 0)

    def new_stamp(now: int) -> tuple[int, int, int]:
        s = seq.stamp(now)
        return (s.trans_id, s.epoch, s.commit_ts)

    env = dict(node=node, node52=node52, w=w, fut=fut, old_submit=old_submit, new_submit=new_submit,
               WriteProposal=WriteProposal, old_stamp=old_stamp, new_stamp=new_stamp)
    parts = [
        ("NOSPACE alarm check, no alarm (as issue 52 wrote it)", None,
         "getattr(node52, 'space', None).refusal()"),
        ("NOSPACE alarm check, no alarm (now; StreamWrite: per request)", None,
         "getattr(node, 'space', None).refusal()"),
        ("conditions field read (w.conditions or None)", None, "w.conditions or None"),
        ("proposal queued (keywords, as before issue 53's fix)",
         "old_submit(w.statements, w.idempotency_key, 5, raw=b'', wire=True, unrecorded=False)",
         "new_submit(WriteProposal(w.statements, w.idempotency_key, 5, raw=b'', wire=True, "
         "unrecorded=False, admin=True, conditions=None))"),
        ("proposal queued (WriteProposal by position)",
         "old_submit(w.statements, w.idempotency_key, 5, raw=b'', wire=True, unrecorded=False)",
         "new_submit(WriteProposal(w.statements, w.idempotency_key, 5, None, b'', True, False, "
         "True, None))"),
        ("GTID, epoch, commit ts stamped", "old_stamp(1)", "new_stamp(1)"),
    ]
    print("| per write | 97dc67c ns | this tree ns | added ns |")
    print("|---|---|---|---|")
    for name, old, new in parts:
        o = ns(old, env) if old else 0.0
        m = ns(new, env)
        print(f"| {name} | {o:.0f} | {m:.0f} | {m - o:.0f} |")
    loop.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="rows per cell and round")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gc", action="store_true", help="garbage collector off while measuring")
    ap.add_argument("--parts", action="store_true", help="time each per-write piece alone")
    ap.add_argument("--cells", default="", help="StreamWrite and/or WriteBatch (default both)")
    args = ap.parse_args()
    if args.parts:
        run_parts()
    else:
        asyncio.run(run_node(args.rows, args.repeat, args.no_gc, args.cells))


if __name__ == "__main__":
    main()
