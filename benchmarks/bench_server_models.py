"""The per-call ceiling of grpcio's server models: one echo method, 64 Go clients and one.

    python3 benchmarks/bench_server_models.py [--duration 3] [--etcd /tmp/etcd-src/bin]

Each model serves ``/bench.Echo/Echo`` (returns the request's bytes: the serialized
``WriteRequest`` of one 10 B row) on one port, and ``benchmarks/goload -mode echo`` calls it
closed-loop with 64 clients over 8 connections, then with one client:

* ``aio``: ``grpc.aio`` in one process (the node's model today);
* ``aio, pooled accept``: the same with the node's accept of 32 calls at a time
  (``gateway.node.api.grpc_server.aio_server``);
* ``sync, N threads``: grpcio's thread-pool server (``grpc.server(ThreadPoolExecutor(N))``);
* ``aio x P processes``: P ``grpc.aio`` processes bound to one port with ``SO_REUSEPORT``
  (the kernel spreads the connections among them).

With ``--etcd DIR`` etcd's ``benchmark put`` runs beside (64 clients / 16 connections and one
client) for the ratios the issue sets: unary ``Write`` >= 75 % of etcd's put rate. Prints calls/s,
p50/p99, the servers' CPU per call (all processes of the model) and each model's ratio to
``aio``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import grpc  # noqa: E402

MODELS = ("aio", "aio-pooled", "sync-8", "sync-32", "aio-x2", "aio-x3")


def _handler() -> grpc.GenericRpcHandler:
    def echo(request: bytes, context: object) -> bytes:
        return request

    async def aecho(request: bytes, context: object) -> bytes:
        return request

    return echo, aecho  # type: ignore[return-value]


def serve(model: str, port: int) -> None:
    """One server process of ``model`` on ``port`` (SO_REUSEPORT on for the x-P models)."""
    echo, aecho = _handler()  # type: ignore[misc]
    opts = [("grpc.so_reuseport", 1)]
    if model.startswith("sync"):
        server = grpc.server(futures.ThreadPoolExecutor(int(model.split("-")[1])), options=opts)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        print("ready", flush=True)
        server.wait_for_termination()
        return

    async def main() -> None:
        if model == "aio-pooled":
            from gateway.node.api.grpc_server import aio_server

            server = aio_server(options=opts)
            handlers = {"Echo": grpc.unary_unary_rpc_method_handler(aecho)}
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler("bench.Echo", handlers),))
            server.add_registered_method_handlers("bench.Echo", handlers)
        else:
            server = grpc.aio.server(options=opts)
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
                "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(aecho)}),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_model(exe: str, model: str, port: int, duration: float) -> list[dict[str, float]]:
    n = int(model.split("-x")[1]) if "-x" in model else 1
    procs = [subprocess.Popen([sys.executable, __file__, "--serve", model, str(port)],
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]
    out = []
    try:
        for p in procs:
            assert p.stdout is not None
            p.stdout.readline()
        for clients in (64, 1):
            before = sum(cpu_seconds(p.pid) for p in procs)
            run = subprocess.run([exe, "-mode", "echo", "-target", f"127.0.0.1:{port}",
                                  "-clients", str(clients), "-conns", str(max(1, clients // 8)),
                                  "-duration", str(duration)],
                                 capture_output=True, text=True, timeout=300, check=True)
            got = json.loads(run.stdout)
            cpu = sum(cpu_seconds(p.pid) for p in procs) - before
            out.append({"clients": clients, "rate": got["ops"] / got["seconds"],
                        "p50": got["p50_ms"], "p99": got["p99_ms"],
                        "cpu_us": 1e6 * cpu / max(1, got["all_rows"]),
                        "client_us": 1e6 * got["cpu_seconds"] / max(1, got["all_rows"])})
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--etcd", metavar="DIR", help="etcd's binaries: its put rate beside")
    args = p.parse_args()
    from tests.harness.cluster import PortAllocator

    ports = PortAllocator()
    print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-models-") as build:
        exe = os.path.join(build, "goload")
        subprocess.run(["go", "build", "-o", exe, "."], cwd=HERE / "goload", check=True)
        for model in args.models.split(","):
            results[model] = run_model(exe, model, ports.take(), args.duration)
            for r in results[model]:
                print(f"{model:<12} {int(r['clients']):>3} clients: {r['rate']:>8,.0f} calls/s "
                      f"p50 {r['p50']:.2f} ms p99 {r['p99']:.2f} ms, server CPU "
                      f"{r['cpu_us']:.0f} us/call, client {r['client_us']:.0f}", flush=True)
    etcd: dict[int, tuple[float, float]] = {}
    if args.etcd:
        from etcd_peer import run_tool, started_etcd

        tool = Path(args.etcd) / "benchmark"
        with started_etcd(args.etcd, [ports.take() for _ in range(6)]) as (clients, lead, _):
            for n, conns, total in ((64, 16, 12000), (1, 1, 1500)):
                time.sleep(0.5)
                rate, p50, _ = run_tool(tool, clients[lead], n, conns, total,
                                        ["put", "--key-size=16", "--val-size=10",
                                         "--sequential-keys"])
                etcd[n] = (rate, p50)
                print(f"etcd put     {n:>3} clients: {rate:>8,.0f} puts/s p50 {p50:.2f} ms",
                      flush=True)
    print("load:", Path("/proc/loadavg").read_text().strip())
    base = {int(r["clients"]): r for r in results.get("aio", [])}
    for model, rows in results.items():
        for r in rows:
            n = int(r["clients"])
            line = f"{model:<12} {n:>3} clients: {r['rate']:>8,.0f} calls/s"
            if n in base:
                line += (f", {r['rate'] / base[n]['rate']:.2f}x aio's rate, p50 "
                         f"{r['p50'] / base[n]['p50']:.2f}x aio's")
            if n in etcd:
                line += (f", {100 * r['rate'] / etcd[n][0]:.0f} % of etcd's put rate, p50 "
                         f"{r['p50'] / etcd[n][1]:.2f}x etcd's")
            print(line)


if __name__ == "__main__":
    main()
