"""Replication channel throughput and lag: a source cluster beside its replica, same run.

For each shape (two single-node clusters; two 3-node clusters), both in the product's default
configuration (fsync on, the embedded SQLite applier on) and as real processes on loopback:

1. **source max**: clients write 500-row transactions to the source as fast as it commits them
   for ``--duration`` seconds, while the replica's channel runs -> the source's rows/s;
2. **channel**: rows/s the replica applied over the same run plus its drain (from the first
   write until the replica holds every row), and the ratio channel / source (target >= 0.8);
3. **lag at 50 % load**: once both clusters are idle again (the flat-out phase leaves
   compactions behind: measured in their wake, a p99 says how fast a replica recovers from
   an overload, not its lag at 50 %), the source driven at half its measured maximum; for
   every origin transaction, the time from its commit in the source (its commit
   timestamp) to its arrival on the replica's ``Subscribe`` stream (applied there) -> p50
   and p99 (target: p99 <= epoch interval + 150 ms).

Each shape runs in the default configuration (``--appliers sqlite``) and stripped (``none``:
no applier on either cluster), so the cost of the embedded applier shows beside the rest.

    python benchmarks/bench_channels.py [--duration 5] [--shapes 1,3] [--appliers sqlite,none]
                                        [--load 0.5] [--conflicts none,NDB$EPOCH2] [--repeat 3]
                                        [--conflicting 0.5]

With ``--conflicts``, each shape also runs with the replica PRIMARY judging every row it
applies under each function, and prints the replica's CPU per replicated row beside the run
without rules (``--repeat`` runs interleaved, medians compared: single runs vary by +-20 %
with compaction timing).

With ``--conflicting F``, before the measured phases the replica itself writes the first
``F`` of the keys of every 500-row transaction the source will write: under an epoch
function on the PRIMARY replica, that fraction of every epoch's rows is then in conflict
(rejected, recorded in ``bench.rows$EX`` and refreshed); the replica's handled rows are the
source's rows it applied plus the exception rows it wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError  # noqa: E402
from gateway.client.prepared import PreparedInsert  # noqa: E402
from gateway.v1 import statement_pb2, value_pb2  # noqa: E402

ROWS = 500
EPOCH_MS = 100


def _ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    out = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return out


class Cluster:
    def __init__(self, root: Path, cid: int, n: int, source_apis: list[str] | None,
                 appliers: str, conflicts: str = "none") -> None:
        ports = _ports(2 * n)
        self.peer = {i + 1: f"127.0.0.1:{ports[2 * i]}" for i in range(n)}
        self.api = {i + 1: f"127.0.0.1:{ports[2 * i + 1]}" for i in range(n)}
        self.procs = []
        peers = ",".join(f"{k}={v}" for k, v in self.peer.items())
        for i in range(1, n + 1):
            cfg = root / f"c{cid}n{i}.toml"
            text = (f'node_id = {i}\ncluster_id = {cid}\nlisten = "{self.peer[i]}"\n'
                    f'api = "{self.api[i]}"\npeers = "{peers}"\ndata_dir = "{root}/c{cid}n{i}"\n'
                    f'log_format = "text"\nlog_level = "warning"\nepoch_ms = {EPOCH_MS}\n')
            if source_apis:
                srcs = ", ".join(f'"{s}"' for s in source_apis)
                text += f'[[channels]]\nname = "bench"\nsources = [{srcs}]\n'
            if conflicts != "none":  # this cluster judges what the channel brings in
                text = (f'conflict_role = "{"PRIMARY" if source_apis else "SECONDARY"}"\n'
                        + text + f'[[conflicts]]\ntable = "bench.*"\nfunction = "{conflicts}"\n')
            cfg.write_text(text)
            log = open(root / f"c{cid}n{i}.log", "ab")  # noqa: SIM115
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "run", "--config", str(cfg)],
                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    [str(ROOT), os.environ.get("PYTHONPATH", "")]),
                     "GATEWAY_APPLIERS": "" if appliers == "none" else appliers},
                stdout=log, stderr=log))

    def wait_leader(self) -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                with GatewayClient(list(self.api.values()), timeout=2) as c:
                    if c.status(timeout=1).leader_id:
                        return
            except GatewayError:
                pass
            time.sleep(0.1)
        raise SystemExit("no leader")

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


#: The load generator encodes its rows as the product's high-rate producers do
#: (``PreparedInsert``: the same bytes as the ``InsertStatement`` built from messages, 0.39 ms
#: of CPU per transaction where building the messages alone took 1.0 ms). It shares the
#: machine with both clusters: built from messages, it took about half a core in the flat-out
#: phase, and without that the sources measured 14-26 % faster (docs/benchmarks.md, "The load
#: generator's own CPU").
_INSERT = PreparedInsert("bench.rows", key={"id": int}, values={"v": str})
_VALUE = ("x" * 10,)


def _txn(base: int) -> bytes:
    """The 500-row transaction of keys ``base .. base + 499``: a ``WriteRequest``'s
    ``statements`` field, which every client write method takes in place of a list."""
    return _INSERT.encode_many([((k,), _VALUE) for k in range(base, base + ROWS)])


class ReplicaWatch:
    """Counts origin rows arriving on the replica's Subscribe stream and their lag."""

    def __init__(self, api: list[str], source_id: int, replica_id: int = 2) -> None:
        self.rows = 0
        self.exceptions = 0
        self._replica = replica_id
        self.lags: list[float] = []
        self.first_ns = 0
        self._source = source_id
        self._stop = threading.Event()
        self._client = GatewayClient(api, timeout=3600)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stream = self._client.subscribe()
        try:
            for ev in stream:
                t = ev.transaction
                if t.gtid.server_id == self._replica:  # rows rejected as in conflict
                    n = sum(len(s.insert.records) for s in t.statements
                            if s.insert.table.table_name.endswith("$EX"))
                    self.exceptions += n
                    self.rows += n
                    continue
                if t.gtid.server_id != self._source:
                    continue
                now = time.time_ns()
                self.rows += sum(len(s.insert.records) for s in t.statements)
                self.lags.append((now - t.commit_timestamp_ns) / 1e6)
                if self._stop.is_set():
                    break
        except GatewayError:
            pass

    def close(self) -> None:
        self._stop.set()
        self._client.close()


async def _drive(api: list[str], seconds: float, rate: float | None, key0: int,
                 clients: int = 8) -> int:
    """Write 500-row transactions for ``seconds``; ``rate``: rows/s cap (None: flat out).
    At a capped rate the transactions are built before the clock starts, so the load
    generator's own CPU (it shares the machine) stays out of the lag being measured."""
    built: dict[int, bytes] = {}
    if rate is not None:
        for i in range(int(rate * seconds / ROWS) + 2 * clients):
            built[key0 + i * ROWS] = _txn(key0 + i * ROWS)
    end = time.monotonic() + seconds
    written = 0
    nxt = [key0]
    start = time.monotonic()

    async def one() -> None:
        nonlocal written
        async with AsyncGatewayClient(api, timeout=30) as c:
            while time.monotonic() < end:
                if rate is not None:
                    due = start + written / rate
                    if due > time.monotonic():
                        await asyncio.sleep(due - time.monotonic())
                        continue
                base = nxt[0]
                nxt[0] += ROWS
                await c.write(built.pop(base, None) or _txn(base))
                written += ROWS

    await asyncio.gather(*(one() for _ in range(clients if rate is None else 2)))
    return nxt[0] - key0


async def _prewrite(api: list[str], bases: range, fraction: float, clients: int = 8) -> None:
    """Write into the replica, as its own rows, the first ``fraction`` of the keys of each
    500-row block starting at ``bases`` (several blocks per transaction)."""
    per = max(1, int(ROWS * fraction))
    todo = list(bases)
    group = 4

    def txn(blocks: list[int]) -> list[statement_pb2.Statement]:
        ins = statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="bench", table_name="rows"),
            key_fields=[statement_pb2.FieldMetadata(name="id",
                                                    type=value_pb2.FIELD_TYPE_INTEGER)],
            fields=[statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)])
        for b in blocks:
            for k in range(b, b + per):
                ins.records.add(key_values=[value_pb2.Value(int_value=k)],
                                after_values=[value_pb2.Value(string_value="replica")])
        return [statement_pb2.Statement(insert=ins)]

    async def one() -> None:
        async with AsyncGatewayClient(api, timeout=60) as c:
            while todo:
                blocks = [todo.pop() for _ in range(min(group, len(todo)))]
                await c.write(txn(blocks))

    await asyncio.gather(*(one() for _ in range(clients)))


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def _cpu_seconds(procs: list[subprocess.Popen]) -> float:
    """User + system CPU time so far of ``procs`` (Linux ``/proc``)."""
    total = 0
    for p in procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _settle(procs: list[subprocess.Popen], idle: float = 0.05, limit: float = 60.0) -> None:
    """Wait until ``procs`` use less than ``idle`` of a core over half a second (at most
    ``limit`` seconds): the set-up's flushes and compactions end before a measured phase
    starts, so its CPU and rate are the phase's own."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        c0 = _cpu_seconds(procs)
        time.sleep(0.5)
        if _cpu_seconds(procs) - c0 < idle * 0.5 * len(procs):
            return


def run_shape(n: int, seconds: float, appliers: str, load: float,
              conflicts: str = "none", conflicting: float = 0.0) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-channels-{n}-"))
    src = Cluster(root, 1, n, None, appliers, conflicts)
    rep = Cluster(root, 2, n, list(src.api.values()), appliers, conflicts)
    try:
        src.wait_leader()
        rep.wait_leader()
        watch = ReplicaWatch(list(rep.api.values()), 1)
        warm = asyncio.run(_drive(list(src.api.values()), 1.0, None, 10**9))  # warm-up
        end = time.monotonic() + 60
        while watch.rows < warm and time.monotonic() < end:
            time.sleep(0.05)
        if conflicting:  # the replica's own rows under the keys the source will write
            expect = int(warm * seconds * 2)  # the warm-up ran 1 s flat out
            asyncio.run(_prewrite(list(rep.api.values()), range(0, expect, ROWS), conflicting))
            asyncio.run(_prewrite(list(rep.api.values()),
                                  range(2 * 10**9, 2 * 10**9 + int(expect * load), ROWS),
                                  conflicting))
        _settle(src.procs + rep.procs)  # the warm-up's and prewrite's compactions, not ours
        base_rows = watch.rows
        base_ex = watch.exceptions
        watch.lags.clear()
        cpu0 = _cpu_seconds(rep.procs)
        t0 = time.monotonic()
        total = asyncio.run(_drive(list(src.api.values()), seconds, None, 0))
        t_src = time.monotonic() - t0
        end = time.monotonic() + 120
        while watch.rows - base_rows < total and time.monotonic() < end:
            time.sleep(0.01)
        t_rep = time.monotonic() - t0
        cpu_row_us = (_cpu_seconds(rep.procs) - cpu0) * 1e6 / max(1, watch.rows - base_rows)
        in_conflict = (watch.exceptions - base_ex) / max(1, watch.rows - base_rows)
        src_rate = total / t_src
        ch_rate = (watch.rows - base_rows) / t_rep
        _settle(src.procs + rep.procs)  # the flat-out phase's compactions end first
        watch.lags.clear()
        asyncio.run(_drive(list(src.api.values()), seconds, src_rate * load, 2 * 10**9))
        time.sleep(1.0)
        lags = list(watch.lags)
        watch.close()
        return {"source": src_rate, "channel": ch_rate, "ratio": ch_rate / src_rate,
                "p50": _pct(lags, 50), "p99": _pct(lags, 99), "n": len(lags),
                "cpu_row_us": cpu_row_us, "in_conflict": in_conflict}
    finally:
        rep.close()
        src.close()
        shutil.rmtree(root, ignore_errors=True)  # two clusters' data: 1-3 GB a shape


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--shapes", default="1,3", help="nodes per cluster, comma separated")
    p.add_argument("--appliers", default="sqlite,none",
                   help="applier configurations to run, comma separated (none: no applier)")
    p.add_argument("--load", type=float, default=0.5,
                   help="the lag phase's rate as a fraction of the source's maximum")
    p.add_argument("--conflicts", default="none",
                   help="conflict functions to run, comma separated (none: no rule; e.g. "
                        "none,NDB$EPOCH2: the replica PRIMARY judging every row)")
    p.add_argument("--conflicting", type=float, default=0.0,
                   help="fraction of each source transaction's keys the replica writes first "
                        "(in conflict under an epoch function on the PRIMARY replica)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of every configuration, interleaved; CPU/row medians printed")
    args = p.parse_args()
    avg = os.getloadavg()
    print(f"load average before: {avg[0]:.2f} {avg[1]:.2f} {avg[2]:.2f}; epoch {EPOCH_MS} ms")
    pct = f"{args.load:.0%}"
    print("| clusters | appliers | conflicts | rows in conflict | source rows/s (500-row txns) | "
          f"channel rows/s | channel/source | lag p50 at {pct} load | lag p99 | p99 target | "
          "replica CPU/row |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    summary: list[str] = []
    for n in (int(x) for x in args.shapes.split(",")):
        for appliers in args.appliers.split(","):
            cpu: dict[str, list[float]] = {}
            for _ in range(args.repeat):  # interleaved, so drift hits every function alike
                for fn in args.conflicts.split(","):
                    r = run_shape(n, args.duration, appliers, args.load, fn, args.conflicting)
                    cpu.setdefault(fn, []).append(r["cpu_row_us"])
                    print(f"| 2 x {n} node(s) | {appliers} | {fn} | {r['in_conflict']:.0%} | "
                          f"{r['source']:,.0f} | "
                          f"{r['channel']:,.0f} | {r['ratio']:.2f} | {r['p50']:.0f} ms | "
                          f"{r['p99']:.0f} ms | <= {EPOCH_MS + 150} ms | "
                          f"{r['cpu_row_us']:.1f} us |", flush=True)
            base = statistics.median(next(iter(cpu.values())))
            for fn, xs in cpu.items():
                med = statistics.median(xs)
                summary.append(f"| 2 x {n} node(s) | {appliers} | {fn} | {len(xs)} | "
                               f"{' / '.join(f'{x:.1f}' for x in xs)} | {med:.1f} us | "
                               f"{med / base - 1:+.0%} |")
    print("\nreplica CPU per replicated row, medians of the interleaved runs (vs the first "
          "function):\n")
    print("| clusters | appliers | conflicts | runs | CPU/row per run (us) | median | vs first |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(summary))

if __name__ == "__main__":
    main()
