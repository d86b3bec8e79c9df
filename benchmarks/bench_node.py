"""Gateway node figures: a 3-node cluster of local processes (fsync on) beside PySyncObj and a
bare grpc.aio echo server, same machine, same run.

    python benchmarks/bench_node.py [--duration 5] [--quick] [--only gateway,echo,pysyncobj]

Rows measured (closed loop, every client waits for its reply before the next request):

* gateway ``Write`` (one row per transaction) of 10 B and 1 KiB rows with 1 and 64 concurrent
  clients, sent to the leader through the generated stub;
* gateway ``Write`` of 500-row transactions (8 callers), ``WriteBatch`` (200 one-row
  transactions per call, 4 concurrent callers) and ``StreamWrite`` (one bidi stream, 1024
  one-row writes in flight -- the clients' default window --, free slots refilled with requests
  of up to 256 writes), both payload sizes, through the product's Python client
  (``gateway.client``: ``write``, ``write_batch``, ``stream``) with rows encoded by a
  ``PreparedInsert`` -- what a Python producer at these rates uses; message objects cost the
  client ~3.5 ms per 500-row transaction and ~12 us per one-row write, CPU the nodes need on
  the same two cores;
* echo: a grpc.aio server in its own process that returns the request bytes (the serialized
  ``WriteRequest`` of the same row), same clients and concurrency: the transport ceiling;
* PySyncObj: 3 local ``SyncObj`` processes with its default in-memory journal replicating a dict
  (``set(key, value)``), every process keeping ~333 commands in flight (~1000 in total), its own
  benchmark's style (asynchronous calls with callbacks, all nodes submitting);
* gateway ``Write`` (1 and 64 clients), ``WriteBatch`` and ``StreamWrite`` (as above) again
  from a Go client (``clients/go/internal/loadgen``; the stream through the Go client's
  ``WriteStream``; built with the machine's ``go`` when there is one, ``--no-go`` skips it): a
  compiled client like etcd's own ``benchmark`` tool, so the ratios to etcd compare servers
  with clients of the same kind (the Python client spends ~400 us of CPU per unary call, and
  ~12 us per streamed write, on the same two cores);
* gateway ``Read`` of one existing row (keys written by a WriteBatch before the cell), 64
  clients, linearizable (ReadIndex: a quorum round trip per read batch) and stale (the node's
  store as it is), sent to the leader;
* etcd, with ``--etcd DIR`` (``etcd`` and ``benchmark`` binaries built from a release checkout,
  docs/benchmarks.md, "Building etcd"): 3 members on loopback, its ``benchmark`` tool against the
  leader -- put with 1, 64 and 1000 clients, txn-put of 100 puts per transaction, range of one
  existing key with 64 clients, linearizable and serializable (``etcd_peer.py``). etcd runs twice,
  before the gateway's cells and after everything else: its own rate moved by up to 2x between runs
  on the same machine, so the ratios use the better of its two rounds for each figure (the higher
  rows/s, the lower p50) -- the comparison least favourable to the gateway.

Before each system (etcd's rounds, each gateway configuration, echo, PySyncObj) the file
data the previous one left dirty is written back (``sync``) and the machine waits to be quiet
(:func:`quiesce`, which prints what it took). Everything listens on 127.0.0.1 only; every
measurement is bounded by ``--duration``. Prints one table with rows/s, p50/p99 latency and
the ratios the issue asks for, and each process's RSS.
Needs ``pysyncobj`` (``pip install -e '.[bench]'``) for its rows (left out, with a line
saying so, when it is not installed); RSS comes from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import grpc  # noqa: E402

from gateway.client import AsyncGatewayClient, GatewayError, PreparedInsert  # noqa: E402
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, statement_pb2, value_pb2  # noqa: E402

SIZES = {"10 B": 10, "1 KiB": 1024}
ECHO_METHOD = "/bench.Echo/Echo"
BATCH = 200
BIG_ROWS = 500
BIG_CLIENTS = 8
#: writes in flight on the stream cells: the Python and Go clients' default window (1024,
#: sent as requests of at most their default 256 writes) -- etcd's put cell it is compared
#: with has 1000 clients in flight. Until stop 41 the cells used 256 in flight with
#: 256-write requests, a stop-and-wait stream (``git show 97dc67c:docs/benchmarks.md``,
#: Change 20).
STREAM_WINDOW = 1024
STREAM_MAX_PER_REQUEST = 256
PYSYNCOBJ_INFLIGHT = 1000


@dataclass
class Result:
    """One measured cell: operations (RPCs), rows committed, latencies (seconds) and errors."""

    system: str
    mode: str
    size: str
    clients: int
    seconds: float = 0.0
    ops: int = 0
    rows: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    all_rows: int = 0  # every row acknowledged during the cell, warm-up and tail included
    cpu: str = "-"  # server CPU microseconds per row: leader/follower/follower (echo: server)
    client_cpu: str = "-"  # the benchmark client's (this process's) CPU microseconds per row
    steal: str = "-"  # % of the machine's CPU time the hypervisor took during the cell
    error_codes: dict[str, int] = field(default_factory=dict)  # gRPC code -> count
    p50_ms: float | None = None  # from a peer's own tool, when there are no latencies
    p99_ms: float | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        """Latency percentile ``q`` (0..1) in milliseconds."""
        if not self.latencies:
            given = self.p50_ms if q == 0.5 else self.p99_ms if q == 0.99 else None
            return float("nan") if given is None else given
        lat = sorted(self.latencies)
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))]


def value_of(size: int) -> str:
    return "x" * size


_TABLE = statement_pb2.TableMetadata(schema_name="bench", table_name="kv")
_KEY_FIELDS = [statement_pb2.FieldMetadata(name="k", type=value_pb2.FIELD_TYPE_VARCHAR)]
_FIELDS = [statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)]


def put_request(key: str, value: str, rows: int = 1) -> gateway_pb2.WriteRequest:
    """One transaction inserting ``rows`` rows ``(k = key[-i], v = value)`` into ``bench.kv``
    (key column ``k``, one value column ``v``: a shape every applier takes as is)."""
    records = [statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(string_value=key if rows == 1 else f"{key}-{i}")],
        after_values=[value_pb2.Value(string_value=value)]) for i in range(rows)]
    stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_TABLE, key_fields=_KEY_FIELDS, fields=_FIELDS, records=records))
    return gateway_pb2.WriteRequest(statements=[stmt])


# ---------------------------------------------------------------------------------- load loop


async def closed_loop(
    result: Result,
    clients: int,
    op: Callable[[int, int], Awaitable[int]],
    duration: float,
    warmup: float,
) -> Result:
    """Run ``clients`` tasks calling ``op(client, seq) -> rows`` back to back; count what
    completes between ``warmup`` and ``warmup + duration``."""
    t0 = time.perf_counter()
    start, end = t0 + warmup, t0 + warmup + duration

    async def client(c: int) -> None:
        seq = 0
        while True:
            now = time.perf_counter()
            if now >= end:
                return
            seq += 1
            try:
                rows = await op(c, seq)
            except (grpc.RpcError, GatewayError) as exc:
                if now >= start:
                    result.errors += 1
                    code = (exc.code.name if isinstance(exc, GatewayError) else
                            exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else "?")
                    result.error_codes[code] = result.error_codes.get(code, 0) + 1
                await asyncio.sleep(0.01)
                continue
            done = time.perf_counter()
            result.all_rows += rows
            if now >= start and done <= end:
                result.ops += 1
                result.rows += rows
                result.latencies.append(done - now)

    await asyncio.gather(*(client(c) for c in range(clients)))
    result.seconds = duration
    return result


def channels(address: str, n: int) -> list[grpc.aio.Channel]:
    opts = [("grpc.max_receive_message_length", 64 << 20), ("grpc.enable_retries", 0)]
    return [grpc.aio.insecure_channel(address, options=opts) for _ in range(n)]


# ---------------------------------------------------------------------------------- echo


def serve_echo(port: int) -> None:
    """The echo server process: returns every request's bytes unchanged."""

    async def main() -> None:
        async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return request

        handler = grpc.method_handlers_generic_handler(
            "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


async def bench_echo(address: str, size: str, clients: int, duration: float) -> Result:
    payloads = [put_request(f"k{c}", value_of(SIZES[size])).SerializeToString()
                for c in range(clients)]
    chans = channels(address, max(1, clients // 8))
    calls = [ch.unary_unary(ECHO_METHOD) for ch in chans]

    async def op(c: int, seq: int) -> int:
        await calls[c % len(calls)](payloads[c], timeout=10)
        return 1

    r = await closed_loop(Result("echo", "unary", size, clients), clients, op, duration, 0.5)
    for ch in chans:
        await ch.close()
    return r


# ---------------------------------------------------------------------------------- gateway


async def bench_unary(address: str, size: str, clients: int, duration: float) -> Result:
    value = value_of(SIZES[size])
    chans = channels(address, max(1, clients // 8))
    stubs = [gateway_pb2_grpc.GatewayStub(ch) for ch in chans]
    tag = f"u{clients}-{SIZES[size]}"

    async def op(c: int, seq: int) -> int:
        await stubs[c % len(stubs)].Write(put_request(f"{tag}-{c}-{seq}", value), timeout=10)
        return 1

    r = await closed_loop(Result("gateway", "Write", size, clients), clients, op, duration, 0.5)
    for ch in chans:
        await ch.close()
    return r


async def bench_coalesced(address: str, size: str, clients: int, duration: float) -> Result:
    """``Write`` as :func:`bench_unary` (the same rows, no idempotency key), from ``clients``
    tasks sharing one ``AsyncGatewayClient`` with ``coalesce_writes=COALESCE``: the writes
    waiting at one moment leave as one ``WriteBatch``."""
    value = value_of(SIZES[size])
    ins = prepared_kv()
    tag = f"cw{clients}-{SIZES[size]}"
    async with AsyncGatewayClient(address, timeout=20, attempt_timeout=20,
                                  coalesce_writes=COALESCE) as c:
        async def op(n: int, seq: int) -> int:
            await c.write(ins.encode((f"{tag}-{n}-{seq}",), (value,)), idempotency_key="")
            return 1

        return await closed_loop(Result("gateway", "Write, coalescing", size, clients),
                                 clients, op, duration, 0.5)


def build_loadgen(out_dir: str) -> str | None:
    """Build the Go load generator into ``out_dir``; its path, or None (printing why) when
    there is no ``go`` or the build fails."""
    exe = os.path.join(out_dir, "loadgen")
    try:
        subprocess.run(["go", "build", "-o", exe, "./internal/loadgen"],
                       cwd=REPO / "clients" / "go", check=True, capture_output=True,
                       text=True, timeout=600)
    except FileNotFoundError:
        print("no 'go' on PATH: the Go client cells are skipped", flush=True)
        return None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        err = getattr(exc, "stderr", "") or ""
        print(f"building the Go load generator failed ({err.strip()[-300:]}): the Go client "
              "cells are skipped", flush=True)
        return None
    return exe


GO_MODES = {"unary": "Go client Write", "batch": f"Go client WriteBatch x{BATCH}",
            "stream": f"Go client StreamWrite w{STREAM_WINDOW}",
            "coalesced": "Go client Write, coalescing"}
#: the coalescing client's batch (``WithWriteCoalescing``): at most one write per client
COALESCE = 256


async def bench_go(loadgen: str, address: str, size: str, mode: str, clients: int,
                   duration: float, keyed: bool = False) -> Result:
    """One-row writes from the Go load generator: ``mode`` ``unary`` (``Write``, same rows,
    closed loop and connections as :func:`bench_unary`), ``batch`` (``WriteBatch`` of
    ``BATCH``, as :func:`bench_batch`), ``stream`` (``STREAM_WINDOW`` writes in flight on one
    ``StreamWrite`` through the Go client's ``WriteStream``, as :func:`bench_stream`) or
    ``coalesced`` (``Write`` as ``unary``, through one Go client with ``WithWriteCoalescing``:
    the writes waiting at one moment leave as one ``WriteBatch``); its
    client CPU comes from the tool. The writes carry no idempotency key, as every cell's here,
    unless ``keyed`` (streamed writes then carry the client's random keys)."""
    proc = await asyncio.create_subprocess_exec(
        loadgen, "-target", address, "-mode", mode, "-clients", str(clients), "-conns",
        str(max(1, clients // 8)), "-batch", str(COALESCE if mode == "coalesced" else BATCH),
        "-window", str(STREAM_WINDOW),
        "-duration", str(duration), "-warmup", "0.5", "-size", str(SIZES[size]),
        "-tag", f"go{mode}{clients}-{SIZES[size]}", *(["-idempotency"] if keyed else []),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"Go load generator failed: {err.decode()[-500:]}")
    got = json.loads(out)
    name = GO_MODES[mode] + (", keyed" if keyed else "")
    r = Result("gateway", name, size, clients, seconds=got["seconds"],
               ops=got["ops"], rows=got["rows"], errors=got["errors"],
               all_rows=got["all_rows"], error_codes=got["error_codes"] or {},
               p50_ms=got["p50_ms"], p99_ms=got["p99_ms"])
    if r.all_rows:
        r.client_cpu = f"{1e6 * got['cpu_seconds'] / r.all_rows:.0f}"
    return r


def prepared_kv() -> PreparedInsert:
    """The ``PreparedInsert`` of ``bench.kv`` rows (``put_request``'s table and columns)."""
    return PreparedInsert("bench.kv", key={"k": str}, values={"v": str})


def client_of(address: str) -> AsyncGatewayClient:
    """The product's asyncio client for the batched cells: one channel, no retries of a
    timed-out attempt within the cell (every attempt may take 20 s)."""
    return AsyncGatewayClient(address, timeout=20, attempt_timeout=20)


async def bench_batch(address: str, size: str, clients: int, duration: float) -> Result:
    """``WriteBatch`` of ``BATCH`` one-row writes per call from ``clients`` callers, through
    the Python client's ``write_batch`` with ``PreparedInsert`` rows and no idempotency keys
    (as every cell here and the Go client's)."""
    value = value_of(SIZES[size])
    ins = prepared_kv()
    no_keys = [""] * BATCH
    tag = f"b{SIZES[size]}"
    name = f"WriteBatch x{BATCH}"
    async with client_of(address) as client:

        async def op(c: int, seq: int) -> int:
            writes = [ins.encode((f"{tag}-{c}-{seq}-{i}",), (value,)) for i in range(BATCH)]
            return len(await client.write_batch(writes, idempotency_keys=no_keys))

        return await closed_loop(Result("gateway", name, size, clients), clients, op,
                                 duration, 0.5)


async def bench_big(address: str, size: str, clients: int, duration: float) -> Result:
    """Unary ``Write`` of one ``BIG_ROWS``-row transaction per call, ``clients`` callers,
    through the Python client's ``write`` of one ``PreparedInsert.encode_many`` (no key)."""
    value = value_of(SIZES[size])
    ins = prepared_kv()
    tag = f"t{SIZES[size]}"
    name = f"Write {BIG_ROWS}-row txn"
    async with client_of(address) as client:

        async def op(c: int, seq: int) -> int:
            await client.write(ins.encode_many([((f"{tag}-{c}-{seq}-{i}",), (value,))
                                                for i in range(BIG_ROWS)]), idempotency_key="")
            return BIG_ROWS

        return await closed_loop(Result("gateway", name, size, clients), clients, op,
                                 duration, 0.5)


READ_KEYS = 1000
_CONSISTENCY = {"linearizable": gateway_pb2.CONSISTENCY_LINEARIZABLE,
                "stale": gateway_pb2.CONSISTENCY_STALE}


async def bench_read(address: str, size: str, clients: int, duration: float,
                     consistency: str) -> Result:
    """``Read`` of one of ``READ_KEYS`` rows (written first, one WriteBatch) per call; a row
    not found counts as an error."""
    value = value_of(SIZES[size])
    chans = channels(address, max(1, clients // 8))
    stubs = [gateway_pb2_grpc.GatewayStub(ch) for ch in chans]
    tag = f"r{SIZES[size]}"
    writes = [put_request(f"{tag}-{i}", value) for i in range(READ_KEYS)]
    await stubs[0].WriteBatch(gateway_pb2.WriteBatchRequest(writes=writes), timeout=30)
    level = _CONSISTENCY[consistency]
    requests = [gateway_pb2.ReadRequest(table="bench.kv", consistency=level,
                                        key=[value_pb2.Value(string_value=f"{tag}-{i}")])
                for i in range(READ_KEYS)]

    async def op(c: int, seq: int) -> int:
        resp = await stubs[c % len(stubs)].Read(requests[(c * 7919 + seq) % READ_KEYS],
                                                timeout=10)
        if not resp.found:
            raise RuntimeError("a row written before the cell was not found")
        return 1

    r = await closed_loop(Result("gateway", f"Read {consistency}", size, clients), clients, op,
                          duration, 0.5)
    for ch in chans:
        await ch.close()
    return r


async def bench_stream(address: str, size: str, duration: float) -> Result:
    """One ``StreamWrite`` through the Python client's ``WriteStream`` keeping
    ``STREAM_WINDOW`` one-row writes in flight, each a ``PreparedInsert``'s bytes with no
    idempotency key (as the Go client's cell and every other cell here): whenever acks free
    room the producer fills it, and the stream sends what it queued in requests of at most
    ``STREAM_MAX_PER_REQUEST`` writes (the server packs its acks the same way). A write's
    latency is from its ``send`` returning (queued) to its result."""
    value = value_of(SIZES[size])
    result = Result("gateway", f"StreamWrite w{STREAM_WINDOW}", size, 1)
    ins = prepared_kv()
    pending: deque[tuple[float, asyncio.Future[Any]]] = deque()
    queued = asyncio.Event()
    done = False  # the producer has sent its last write
    tag = f"s{SIZES[size]}"
    t0 = time.perf_counter()
    start, end = t0 + 0.5, t0 + 0.5 + duration

    async def consumer() -> None:
        while True:
            if not pending:
                if done:
                    return
                queued.clear()
                await queued.wait()
                continue
            began, fut = pending.popleft()
            try:
                await fut
            except GatewayError:
                result.errors += 1
                continue
            now = time.perf_counter()
            result.all_rows += 1
            if began >= start and now <= end:
                result.ops += 1
                result.rows += 1
                result.latencies.append(now - began)

    async with AsyncGatewayClient(address, timeout=duration + 30) as client:
        async with client.stream(window=STREAM_WINDOW, max_per_request=STREAM_MAX_PER_REQUEST,
                                 timeout=duration + 30) as stream:
            reader = asyncio.create_task(consumer())
            seq = 0
            while time.perf_counter() < end:
                seq += 1
                fut = await stream.send(ins.encode((f"{tag}-{seq}",), (value,)),
                                        idempotency_key="")
                pending.append((time.perf_counter(), fut))
                queued.set()
            done = True
            queued.set()
        await reader
    result.seconds = duration
    return result


# ---------------------------------------------------------------------------------- pysyncobj


def pysyncobj_node(self_addr: str, partners: list[str], size: int, inflight: int,
                   start_at: float, duration: float) -> None:
    """One PySyncObj process: wait for a leader, then from ``start_at`` keep ``inflight``
    ``set`` commands outstanding for ``duration`` seconds; print a JSON summary."""
    from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

    class Store(SyncObj):
        def __init__(self) -> None:
            super().__init__(self_addr, partners, SyncObjConf(dynamicMembershipChange=False))
            self.data: dict[str, str] = {}

        @replicated
        def set(self, key: str, value: str) -> None:
            self.data[key] = value

    obj = Store()
    while obj._getLeader() is None:
        time.sleep(0.05)
    value = "x" * size
    done = {"ok": 0, "err": 0}
    lat: list[float] = []
    outstanding = [0]
    end = start_at + duration
    while time.time() < start_at:
        time.sleep(0.01)

    def callback_for(began: float) -> Callable[[object, object], None]:
        def cb(res: object, err: object) -> None:
            outstanding[0] -= 1
            now = time.time()
            if now > end:
                return
            if err == FAIL_REASON.SUCCESS:
                done["ok"] += 1
                lat.append(now - began)
            else:
                done["err"] += 1

        return cb

    seq = 0
    while time.time() < end:
        while outstanding[0] < inflight:
            seq += 1
            outstanding[0] += 1
            obj.set(f"{self_addr}-{seq}", value, callback=callback_for(time.time()))
        time.sleep(0.0005)
    time.sleep(0.5)
    print(json.dumps({"ok": done["ok"], "err": done["err"], "lat": lat[:: max(1, len(lat) // 5000)],
                      "rss": rss_kib(os.getpid())}), flush=True)
    obj.destroy()


def bench_pysyncobj(size: str, duration: float, ports: list[int]) -> tuple[Result, list[int]]:
    addrs = [f"127.0.0.1:{p}" for p in ports]
    start_at = time.time() + 4.0  # every process up and a leader elected by then
    procs = []
    for i, a in enumerate(addrs):
        partners = [x for j, x in enumerate(addrs) if j != i]
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--pysyncobj-node", a, ",".join(partners),
             str(SIZES[size]), str(PYSYNCOBJ_INFLIGHT // len(addrs)), str(start_at),
             str(duration)],
            stdout=subprocess.PIPE, text=True,
        ))
    result = Result("pysyncobj", "set (async)", size, PYSYNCOBJ_INFLIGHT, seconds=duration)
    rss = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=duration + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        line = (out.strip().splitlines() or ["{}"])[-1]
        data = json.loads(line) if line.startswith("{") else {}
        result.rows += data.get("ok", 0)
        result.ops += data.get("ok", 0)
        result.errors += data.get("err", 0)
        result.latencies += data.get("lat", [])
        rss.append(data.get("rss", 0))
    return result, rss


# ---------------------------------------------------------------------------------- helpers


def rss_kib(pid: int) -> int:
    """Current resident set size of ``pid`` in KiB (0 if unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def best_of_rounds(rounds: list[list[Result]]) -> list[Result]:
    """One result per cell of a peer run in several rounds (same cells, same order): the
    highest rows/s of the rounds and, separately, the lowest p50/p99 -- the figures least
    favourable to whatever is compared with them."""
    out = []
    for cells in zip(*rounds, strict=True):
        fast = max(cells, key=lambda r: r.rows_per_s)
        quick = min(cells, key=lambda r: r.pct(0.5))
        best = Result(fast.system, fast.mode, fast.size, fast.clients, seconds=fast.seconds,
                      ops=fast.ops, rows=fast.rows, all_rows=fast.all_rows, cpu=fast.cpu,
                      steal=fast.steal,
                      p50_ms=quick.pct(0.5), p99_ms=min(r.pct(0.99) for r in cells))
        out.append(best)
    return out


def table(results: list[Result]) -> str:
    lines = [
        "| system | call | row | clients | rows/s | p50 ms | p99 ms | errors "
        "| CPU us/row L/F/F | client us/row | steal % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.system} | {r.mode} | {r.size} | {r.clients} | {r.rows_per_s:,.0f} | "
            f"{r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {r.errors} | {r.cpu} | {r.client_cpu} "
            f"| {r.steal} |"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> str:
    def find(system: str, mode: str, size: str, clients: int | None = None) -> Result | None:
        for r in results:
            if (r.system, r.size) == (system, size) and r.mode.startswith(mode) and (
                clients is None or r.clients == clients
            ):
                return r
        return None

    lines = []
    for size in SIZES:  # the default configuration against the stripped one, cell by cell
        for r in results:
            if r.system != "gateway" or r.size != size:
                continue
            bare = find("gateway (no applier)", r.mode, size, r.clients)
            if bare and bare.rows_per_s:
                lines.append(f"gateway default / no applier: {r.mode}, {r.clients} clients, "
                             f"{size}: {r.rows_per_s / bare.rows_per_s:.0%} (target >= 75%)")
    for size in SIZES:  # against etcd
        put1, put64 = find("etcd", "put", size, 1), find("etcd", "put", size, 64)
        put1000, txn = find("etcd", "put", size, 1000), find("etcd", "txn-put", size)
        for system, want in (("gateway", 1.0), ("gateway (no applier)", 1.5)):
            big = find(system, f"Write {BIG_ROWS}", size)
            if big and txn and txn.rows_per_s:
                lines.append(f"{system}: {BIG_ROWS}-row txns / etcd txn-put rows, {size}: "
                             f"{big.rows_per_s / txn.rows_per_s:.2f}x (target >= {want}x)")
        for mode in ("WriteBatch", "StreamWrite", "Go client WriteBatch",
                     "Go client StreamWrite"):
            g = find("gateway", mode, size)
            if g and put1000 and put1000.rows_per_s:
                lines.append(f"gateway: {mode} / etcd put 1000 clients, {size}: "
                             f"{g.rows_per_s / put1000.rows_per_s:.2f}x (target >= 1x)")
        for gw, etcd in (("Read linearizable", "range linearizable"),
                         ("Read stale", "range serializable")):
            g, e = find("gateway", gw, size), find("etcd", etcd, size)
            if g and e and e.rows_per_s:
                lines.append(f"gateway: {gw} / etcd {etcd}, 64 clients, {size}: "
                             f"{g.rows_per_s / e.rows_per_s:.0%}")
        for system in ("gateway", "gateway (no applier)"):
            for mode, client in (("Write", ""), ("Write, coalescing", " (coalescing)"),
                                 ("Go client Write", " (Go client)"),
                                 ("Go client Write, coalescing", " (Go client, coalescing)")):
                u64, u1 = find(system, mode, size, 64), find(system, mode, size, 1)
                if u64 and put64 and put64.rows_per_s:
                    lines.append(f"{system}: unary Write{client} / etcd put, 64 clients, "
                                 f"{size}: {u64.rows_per_s / put64.rows_per_s:.0%} "
                                 "(target >= 25%)")
                if u1 and put1 and put1.pct(0.5):
                    lines.append(f"{system}: p50 of 1 client{client} / etcd's, {size}: "
                                 f"{u1.pct(0.5) / put1.pct(0.5):.1f}x (target <= 2x)")
    for system in ("gateway", "gateway (no applier)"):
        for size in SIZES:
            unary, echo = find(system, "Write", size, 64), find("echo", "unary", size, 64)
            if unary and echo and echo.rows_per_s:
                ratio = unary.rows_per_s / echo.rows_per_s
                lines.append(f"{system}: unary Write / echo, 64 clients, {size}: {ratio:.0%} "
                             f"(target >= 50%)")
            pso = find("pysyncobj", "set", size)
            for mode in ("WriteBatch", "StreamWrite", f"Write {BIG_ROWS}"):
                g = find(system, mode, size)
                if g and pso and pso.rows_per_s:
                    lines.append(f"{system}: {mode} / PySyncObj, {size}: "
                                 f"{g.rows_per_s / pso.rows_per_s:.1f}x (target >= 10x)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main


def cpu_ticks() -> list[int]:
    """The machine's CPU time so far, per /proc/stat column (user, nice, system, idle,
    iowait, irq, softirq, steal, ...), in clock ticks; empty where there is no /proc/stat."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return []


def steal_seconds() -> float:
    """CPU seconds the hypervisor has taken from this machine's CPUs since boot (the
    ``steal`` column of /proc/stat; 0 where there is none)."""
    ticks = cpu_ticks()
    return ticks[7] / os.sysconf("SC_CLK_TCK") if len(ticks) > 7 else 0.0


class StealMeter:
    """The share of the machine's CPU time stolen between its creation and :meth:`stop`
    (a virtual machine's CPUs run only when the host schedules them: a cell measured while
    the host is busy runs slower with every figure of its own unchanged)."""

    def __init__(self) -> None:
        self.t0, self.s0 = time.perf_counter(), steal_seconds()

    def stop(self) -> str:
        wall = (time.perf_counter() - self.t0) * (os.cpu_count() or 1)
        return f"{100 * (steal_seconds() - self.s0) / wall:.0f}" if wall > 0 else "-"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` used so far (0 if unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dirty_mib() -> float:
    """MiB of file data waiting to be written back (``Dirty`` + ``Writeback`` of
    /proc/meminfo; 0 where there is none)."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text()
                    .splitlines() if ":" in line)
        return sum(int(info[k].split()[0]) for k in ("Dirty", "Writeback")) / 1024
    except (OSError, KeyError, ValueError):
        return 0.0


def machine_busy() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (``cpu_ticks``; idle and iowait
    are not busy)."""
    ticks = cpu_ticks()
    return sum(ticks) - sum(ticks[3:5]), sum(ticks)


def quiesce(what: str, quiet: float = 0.1, window: float = 1.0, limit: float = 60.0) -> None:
    """Before ``what`` starts: write back the file data the last system left dirty
    (``sync``) and wait until the machine's CPUs are at most ``quiet`` busy over a
    ``window`` (at most ``limit`` seconds); say what it took, so that a run shows that no
    system's cells paid for the previous one's leftovers (writeback, background work). (Stop
    35 looked for why the default configuration's first cells, right after etcd's first
    round, cost 30-50 % more CPU per row in two full runs than in runs without etcd: not
    this -- etcd leaves nothing dirty and the machine quiet.)"""
    t0, dirty = time.perf_counter(), dirty_mib()
    os.sync()
    last = machine_busy()
    while time.perf_counter() - t0 < limit:
        time.sleep(window)
        now = machine_busy()
        if not now[1] or (now[1] > last[1] and (now[0] - last[0]) / (now[1] - last[1]) <= quiet):
            break  # quiet (or no /proc/stat to tell)
        last = now
    print(f"({what}: {dirty:.0f} MiB written back, machine quiet after "
          f"{time.perf_counter() - t0:.1f} s)", flush=True)


async def settle(pids: list[int], quiet: float = 0.3, window: float = 0.5,
                 limit: float = 20.0, windows: int = 2) -> float:
    """Wait until the processes ``pids`` together use less than ``quiet`` of one CPU in
    ``windows`` consecutive windows of ``window`` seconds (their background work -- memtable
    flushes, compactions, appliers catching up -- has ended), at most ``limit`` seconds; the
    seconds waited. Run after every cell, so a cell's CPU per row includes the work it left
    behind and the next cell does not measure it. Two windows, not one: the store holds a
    due merge while writes come in and starts it 0.25-0.5 s after they stop (docs/lsm.md,
    "Foreground first"), which a single quiet window right after the cell can miss."""
    t0 = time.perf_counter()
    last = sum(cpu_seconds(p) for p in pids)
    calm = 0
    while time.perf_counter() - t0 < limit:
        await asyncio.sleep(window)
        now = sum(cpu_seconds(p) for p in pids)
        calm = calm + 1 if now - last < quiet * window else 0
        if calm >= windows:
            break
        last = now
    return time.perf_counter() - t0


async def run_gateway(address: str, sizes: list[str], duration: float, system: str,
                      pids: list[int], loadgen: str | None = None) -> list[Result]:
    """Every gateway cell against ``address``; ``pids`` (leader first) are sampled for the
    CPU each node spent per acknowledged row, from the cell's start until the cluster is quiet
    again (:func:`settle`); ``loadgen``: the Go load generator, if built."""
    out: list[Result] = []

    async def cell(make: Awaitable[Result]) -> None:
        before = [cpu_seconds(p) for p in pids]
        mine = cpu_seconds(os.getpid())
        steal = StealMeter()
        r = await make
        r.steal = steal.stop()
        r.system = system
        client = cpu_seconds(os.getpid()) - mine
        await settle(pids)  # the cell's deferred work (flushes, compactions) is its own
        if r.all_rows:
            r.cpu = "/".join(f"{1e6 * (cpu_seconds(p) - b) / r.all_rows:.0f}"
                             for p, b in zip(pids, before, strict=True))
            if r.client_cpu == "-":
                r.client_cpu = f"{1e6 * client / r.all_rows:.0f}"
        out.append(r)
        print(table(out[-1:]).splitlines()[-1], flush=True)

    for size in sizes:
        for clients in (1, 64):
            await cell(bench_unary(address, size, clients, duration))
        await cell(bench_coalesced(address, size, 64, duration))
        if loadgen:
            for mode in ("unary", "coalesced"):
                for clients in (1, 64):
                    await cell(bench_go(loadgen, address, size, mode, clients, duration))
        await cell(bench_batch(address, size, 4, duration))
        await cell(bench_stream(address, size, duration))
        if loadgen:
            await cell(bench_go(loadgen, address, size, "batch", 4, duration))
            await cell(bench_go(loadgen, address, size, "stream", 1, duration))
        await cell(bench_big(address, size, BIG_CLIENTS, duration))
        for consistency in _CONSISTENCY:
            await cell(bench_read(address, size, 64, duration, consistency))
    return out


async def run_echo(address: str, sizes: list[str], duration: float, pid: int) -> list[Result]:
    """The echo cells; ``pid`` (the echo server) is sampled for its CPU per call."""
    out = []
    for size in sizes:
        for clients in (1, 64):
            before, mine = cpu_seconds(pid), cpu_seconds(os.getpid())
            steal = StealMeter()
            r = await bench_echo(address, size, clients, duration)
            r.steal = steal.stop()
            if r.all_rows:
                r.cpu = f"{1e6 * (cpu_seconds(pid) - before) / r.all_rows:.0f}"
                r.client_cpu = f"{1e6 * (cpu_seconds(os.getpid()) - mine) / r.all_rows:.0f}"
            out.append(r)
            print(table(out[-1:]).splitlines()[-1], flush=True)
    return out


def gateway_env(appliers: str) -> dict[str, str]:
    """The nodes' environment of a benchmark cluster: fsync on, warnings only, ``appliers``
    (``sqlite``, the default product configuration, or ``none``)."""
    return {"GATEWAY_FSYNC": "true", "GATEWAY_LOG_LEVEL": "warning",
            "GATEWAY_APPLIERS": "" if appliers == "none" else appliers}


def start_gateway(cluster: Any) -> tuple[str, list[int]]:
    """Start ``cluster`` (a ``tests.harness.cluster.ProcessCluster``); the leader's API address
    and the nodes' pids, the leader's first."""
    cluster.start()
    lead = cluster.wait_for_leader()
    pids = [n.proc.pid for i, n in sorted(cluster.nodes.items(), key=lambda kv: kv[0] != lead)
            if n.proc]
    return cluster.nodes[lead].api_address, pids


#: What ``--only`` and ``--appliers`` may name.
SYSTEMS = ("gateway", "echo", "pysyncobj", "etcd")
APPLIER_CONFIGS = ("sqlite", "none")


def check_arguments(p: argparse.ArgumentParser, args: argparse.Namespace, duration: float,
                    only: set[str]) -> None:
    """Refuse, before anything starts, arguments the run would otherwise fail on minutes in
    or silently ignore (``p.error``: usage and the reason on stderr, exit status 2)."""
    if not 0 < duration < float("inf"):
        p.error(f"--duration must be a number of seconds > 0, not {args.duration:g}")
    unknown = sorted(only - set(SYSTEMS))
    if unknown:
        p.error(f"--only: unknown {', '.join(map(repr, unknown))} "
                f"(choose from {', '.join(SYSTEMS)})")
    configs = args.appliers.split(",")
    if any(c not in APPLIER_CONFIGS for c in configs) or len(set(configs)) != len(configs):
        p.error(f"--appliers {args.appliers!r}: a comma-separated list of distinct "
                f"{' / '.join(APPLIER_CONFIGS)}")
    if args.etcd and "etcd" in only:
        from etcd_peer import missing_binaries

        problem = missing_binaries(args.etcd)
        if problem:
            p.error(problem)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--pysyncobj-node":
        a = sys.argv[2:]
        pysyncobj_node(a[0], a[1].split(","), int(a[2]), int(a[3]), float(a[4]), float(a[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--echo-server":
        serve_echo(int(sys.argv[2]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured cell")
    p.add_argument("--quick", action="store_true", help="2 s cells, 10 B rows only")
    p.add_argument("--only", default=",".join(SYSTEMS),
                   help="comma-separated systems to run (default: all; etcd needs --etcd)")
    p.add_argument("--etcd", metavar="DIR",
                   help="directory with etcd's etcd and benchmark binaries: run etcd beside")
    p.add_argument("--no-go", action="store_true",
                   help="skip the Go client cells (built from clients/go when 'go' is there)")
    p.add_argument("--appliers", default="sqlite,none",
                   help="gateway configurations to run: 'sqlite' (the default product "
                        "config, the built-in SQLite applier) and/or 'none' (no applier: "
                        "replication and the LSM store only)")
    args = p.parse_args()
    duration = 2.0 if args.quick else args.duration
    sizes = ["10 B"] if args.quick else list(SIZES)
    only = set(args.only.split(","))
    check_arguments(p, args, duration, only)

    from tests.harness.cluster import PortAllocator, ProcessCluster

    ports = PortAllocator()
    results: list[Result] = []
    rss: dict[str, list[int]] = {}
    build_dir = tempfile.TemporaryDirectory(prefix="bench-node-go-")  # removed at exit
    etcd_rounds: list[list[Result]] = []
    etcd_rss: list[int] = []

    def etcd_round() -> None:
        from etcd_peer import run_etcd

        got, mem = run_etcd(args.etcd, sizes, duration, [ports.take() for _ in range(6)],
                            Result, cpu_seconds, peak_rss_kib, StealMeter)
        for r in got:
            r.system = f"etcd (round {len(etcd_rounds) + 1})"
        etcd_rounds.append(got)
        etcd_rss[:] = [max(a, b) for a, b in zip(etcd_rss, mem, strict=True)] if etcd_rss \
            else mem
        print(table(got), flush=True)

    with_etcd = "etcd" in only and bool(args.etcd)
    if with_etcd and "gateway" in only:
        quiesce("etcd, round 1")
        etcd_round()  # before the gateway's cells; the second round comes last
    loadgen = None if args.no_go or "gateway" not in only else build_loadgen(build_dir.name)
    for appliers in args.appliers.split(",") if "gateway" in only else []:
        system = "gateway" if appliers == "sqlite" else "gateway (no applier)"
        quiesce(system)
        with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
            cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=gateway_env(appliers))
            try:
                address, pids = start_gateway(cluster)
                results += asyncio.run(run_gateway(address, sizes, duration, system, pids,
                                                   loadgen))
                rss[f"{system} node (peak)"] = [peak_rss_kib(p) for p in pids]
            finally:
                cluster.close()
    if "echo" in only:
        quiesce("echo")
        port = ports.take()
        server = subprocess.Popen([sys.executable, __file__, "--echo-server", str(port)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            server.stdout.readline()
            results += asyncio.run(run_echo(f"127.0.0.1:{port}", sizes, duration,
                                           server.pid))
            rss["echo server (peak)"] = [peak_rss_kib(server.pid)]
        finally:
            server.kill()
            server.wait(10)
    if "pysyncobj" in only and importlib.util.find_spec("pysyncobj") is None:
        print("bench_node: pysyncobj is not installed (pip install -e '.[bench]'): its cells "
              "and ratios are left out", file=sys.stderr, flush=True)
    elif "pysyncobj" in only:
        quiesce("pysyncobj")
        for size in sizes:
            r, node_rss = bench_pysyncobj(size, duration, [ports.take() for _ in range(3)])
            results.append(r)
            rss[f"pysyncobj node ({size}, at end)"] = node_rss
            print(table([r]).splitlines()[-1], flush=True)

    if with_etcd:
        quiesce("etcd, round 2")
        etcd_round()
        for got in etcd_rounds:
            results += got
        best = best_of_rounds(etcd_rounds)
        for r in best:
            r.system = "etcd"
        results += best
        rss["etcd member (peak)"] = etcd_rss

    print()
    print(f"3 nodes on {os.cpu_count()} CPUs, {duration:g} s per cell, fsync on (gateway)")
    print(table(results))
    if with_etcd:
        print(f"(etcd: the better of its {len(etcd_rounds)} rounds, figure by figure: the "
              "higher rows/s, the lower p50 and p99; the ratios below use it)")
    print()
    print(ratios(results))
    for r in results:
        if r.error_codes:
            print(f"errors in {r.system} {r.mode} {r.size}: {r.error_codes}")
    print()
    for name, values in rss.items():
        print(f"RSS {name}: " + ", ".join(f"{v / 1024:.0f} MiB" for v in values))


if __name__ == "__main__":
    main()
