"""etcd beside the gateway in ``bench_node.py``: a 3-member cluster on loopback and etcd's own
``benchmark`` tool, from binaries built here (docs/benchmarks.md, "Building etcd").

``run_etcd(directory, duration, ports)`` starts the members (fsync on: etcd always syncs its
WAL), waits until every member answers ``/health``, finds the leader, and runs
``benchmark put`` with 1, 64 and 1000 clients, ``benchmark txn-put`` (100 puts per
transaction, 64 clients) and ``benchmark range`` of one existing key (64 clients, linearizable
and serializable) against the leader -- the gateway's clients also write to the
leader -- and returns one ``Result`` per run (rows/s, p50/p99 from the tool's summary, CPU per
row of each member from /proc, leader first) and the members' peak RSS. The tool counts requests
(``--total``), not time: each run's total is sized from the rates seen on this 2-core machine so
that it lasts about ``duration`` seconds.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: (mode, clients, connections, expected requests/s here, extra tool arguments)
RUNS = (
    ("put", 1, 1, 600, ["--sequential-keys"]),
    ("put", 64, 16, 4500, ["--sequential-keys"]),
    ("put", 1000, 100, 7000, ["--sequential-keys"]),
    ("txn-put x100", 64, 16, 300, ["--txn-ops=100", "--key-space-size=1000000"]),
    ("range linearizable", 64, 16, 8000, ["--consistency=l"]),
    ("range serializable", 64, 16, 15000, ["--consistency=s"]),
)
#: The key the range runs read (put once before them, with the cell's value size).
RANGE_KEY = "bench-range-key"
VALUE_SIZES = {"10 B": 10, "1 KiB": 1024}


def _get(url: str, body: bytes | None = None) -> dict[str, Any]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=2) as resp:
        return json.loads(resp.read())


def _wait_healthy(clients: list[str], procs: list[subprocess.Popen], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"etcd member exited with {p.returncode}")
        try:
            if all(_get(f"{c}/health").get("health") == "true" for c in clients):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("etcd members not healthy within 60 s")
        time.sleep(0.2)


def _leader(clients: list[str]) -> int:
    """Position in ``clients`` of the member that is leader."""
    for i, c in enumerate(clients):
        st = _get(f"{c}/v3/maintenance/status", b"{}")
        if st.get("leader") == st.get("header", {}).get("member_id"):
            return i
    raise RuntimeError("no etcd leader")


def _summary(text: str) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) from ``benchmark``'s report."""
    rate = re.search(r"Requests/sec:\s*([0-9.]+)", text)
    p50 = re.search(r"50% in ([0-9.]+) secs", text)
    p99 = re.search(r"99% in ([0-9.]+) secs", text)
    if not (rate and p50 and p99):
        raise RuntimeError(f"cannot read etcd benchmark output: {text[-500:]}")
    return float(rate.group(1)), 1000 * float(p50.group(1)), 1000 * float(p99.group(1))


def missing_binaries(directory: str) -> str | None:
    """Why ``directory`` cannot serve as ``--etcd`` (an ``etcd`` or ``benchmark`` binary is not
    there or not executable), or None."""
    for name in ("etcd", "benchmark"):
        if not os.access(Path(directory) / name, os.X_OK):
            return (f"--etcd {directory}: no executable {name} there "
                    "(docs/benchmarks.md: Building etcd)")
    return None


def run_tool(tool: Path, endpoint: str, clients: int, conns: int, total: int,
             what: list[str]) -> tuple[float, float, float]:
    """Run etcd's ``benchmark`` tool (``what``: its command and arguments) against
    ``endpoint``; (requests/s, p50 ms, p99 ms) from its summary."""
    run = subprocess.run(
        [str(tool), f"--endpoints={endpoint.removeprefix('http://')}", f"--conns={conns}",
         f"--clients={clients}", f"--total={total}", *what],
        capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"etcd benchmark {' '.join(what)} failed: {run.stderr[-500:]}")
    return _summary(run.stdout)


@contextlib.contextmanager
def started_etcd(directory: str, ports: list[int]
                 ) -> Iterator[tuple[list[str], int, list[subprocess.Popen]]]:
    """A 3-member etcd cluster on loopback (``ports``: six free ports, client then peer per
    member), healthy: yields (the members' client URLs, the leader's position in them, the
    processes with the leader's first); stops the members on the way out."""
    problem = missing_binaries(directory)
    if problem:
        raise SystemExit(problem)
    etcd = Path(directory) / "etcd"
    names = [f"m{i}" for i in range(1, 4)]
    clients = [f"http://127.0.0.1:{ports[i]}" for i in range(3)]
    peers = [f"http://127.0.0.1:{ports[3 + i]}" for i in range(3)]
    cluster = ",".join(f"{n}={p}" for n, p in zip(names, peers, strict=True))
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as tmp:
        procs = [subprocess.Popen(
            [str(etcd), "--name", n, "--data-dir", f"{tmp}/{n}",
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", "bench", "--log-level", "error",
             "--quota-backend-bytes", str(8 << 30)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n, c, p in zip(names, clients, peers, strict=True)]
        try:
            _wait_healthy(clients, procs)
            lead = _leader(clients)
            yield clients, lead, [procs[lead]] + [p for i, p in enumerate(procs) if i != lead]
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


def run_etcd(directory: str, sizes: list[str], duration: float, ports: list[int],
             result_type: Any, cpu_seconds: Any, peak_rss_kib: Any,
             steal_meter: Any = None) -> tuple[list[Any], list[int]]:
    """See the module docstring; ``ports``: six free ports (client, peer per member);
    ``steal_meter()``: starts measuring, giving an object whose ``stop() -> str`` is the share
    of CPU time stolen meanwhile; called around each run of the tool."""
    problem = missing_binaries(directory)
    if problem:
        raise SystemExit(problem)
    tool = Path(directory) / "benchmark"
    results: list[Any] = []
    with started_etcd(directory, ports) as (clients, lead, order):
        for size in sizes:
            value = base64.b64encode(b"x" * VALUE_SIZES[size]).decode()
            _get(f"{clients[lead]}/v3/kv/put", json.dumps(
                {"key": base64.b64encode(RANGE_KEY.encode()).decode(),
                 "value": value}).encode())
            for mode, n_clients, conns, rate, extra in RUNS:
                ops_per = 100 if mode.startswith("txn") else 1
                if mode.startswith("range"):
                    what = ["range", RANGE_KEY, *extra]
                else:
                    what = [mode.split()[0], "--key-size=16",
                            f"--val-size={VALUE_SIZES[size]}", *extra]
                total = max(200, int(rate * duration * (0.5 if size == "1 KiB" else 1)))
                before = [cpu_seconds(p.pid) for p in order]
                meter = steal_meter() if steal_meter is not None else None
                req_s, p50, p99 = run_tool(tool, clients[lead], n_clients, conns, total, what)
                r = result_type("etcd", mode, size, n_clients)
                if meter is not None:
                    r.steal = meter.stop()
                r.seconds = total / req_s
                r.rows = r.all_rows = total * ops_per
                r.ops = total
                r.p50_ms, r.p99_ms = p50, p99
                r.cpu = "/".join(f"{1e6 * (cpu_seconds(p.pid) - b) / r.rows:.0f}"
                                 for p, b in zip(order, before, strict=True))
                results.append(r)
        rss = [peak_rss_kib(p.pid) for p in order]
    return results, rss
