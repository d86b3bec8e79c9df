"""Reads like with like: gateway and etcd, each read by a compiled Go client, same run.

    python3 benchmarks/bench_reads.py --etcd /tmp/etcd-src/bin [--duration 3] [--sizes 10B,1KiB]

Both systems run as 3 processes on loopback (the gateway with fsync on and its default SQLite
applier unless ``--appliers none``; etcd as ``etcd_peer.py`` starts it), each filled with
``KEYS`` keys (``r-000000`` ...) of the cell's value size, then read against the leader:

=====================  ====================================  =====================================
cell                   gateway (``benchmarks/goload``)        etcd
=====================  ====================================  =====================================
one key, linearizable  ``Read``, 64 clients                  ``benchmark range KEY --consistency=l``
one key, stale         ``Read`` STALE, 64 clients            ``benchmark range KEY --consistency=s``
100 keys per call      ``Reads.ReadBatch`` of 100, 16        a ``txn`` of 100 one-key range ops,
                       clients, linearizable / stale         16 clients, l / s (goload over
                                                             clientv3: the tool has no such command)
1,000-row scan         ``Scan`` limit 1,000, 16 clients,     ``benchmark range r-0 r-9
                       linearizable                          --limit=1000``, 16 clients, l
=====================  ====================================  =====================================

Each etcd cell runs twice (before and after the gateway's) and the better round counts. The
tool counts requests, not time: a short calibration run sizes each ``--total`` to last about
``--duration``. Prints rows/s, p50/p99, the servers' CPU per row (leader/follower/follower,
from /proc) and each gateway / etcd ratio.

``--coalesce N`` runs the one-key cells a second time with goload's 64 clients sharing one Go
client made with ``WithReadCoalescing(N)`` (system "gateway, coalescing"): the ``Read`` calls
waiting at one moment reach the node as one ``Reads.ReadBatch``, so its per-call cost is paid
once per batch. Each ``Read`` keeps its semantics (clients/go/coalesce.go).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_node import (  # noqa: E402
    Result,
    StealMeter,
    cpu_seconds,
    gateway_env,
    quiesce,
    start_gateway,
    table,
)
from etcd_peer import run_tool, started_etcd  # noqa: E402

KEYS = 1000
BATCH = 100
SCAN = 1000
SIZES = {"10B": 10, "1KiB": 1024}
#: (cell, gateway goload arguments, etcd: ("tool", what) or ("go", goload arguments), clients)
CELLS = (
    ("read lin", ["-mode", "gw-read", "-consistency", "linearizable"],
     ("tool", ["range", "r-000000", "--consistency=l"]), 64, 1),
    ("read stale/ser", ["-mode", "gw-read", "-consistency", "stale"],
     ("tool", ["range", "r-000000", "--consistency=s"]), 64, 1),
    (f"batch x{BATCH} lin", ["-mode", "gw-readbatch", "-consistency", "linearizable"],
     ("go", ["-mode", "etcd-txn", "-consistency", "l"]), 16, BATCH),
    (f"batch x{BATCH} stale/ser", ["-mode", "gw-readbatch", "-consistency", "stale"],
     ("go", ["-mode", "etcd-txn", "-consistency", "s"]), 16, BATCH),
    (f"scan {SCAN} lin", ["-mode", "gw-scan", "-consistency", "linearizable"],
     ("tool", ["range", "r-000000", "r-999999", f"--limit={SCAN}", "--consistency=l"]), 16,
     SCAN),
)


def build_goload(out_dir: str) -> str:
    exe = os.path.join(out_dir, "goload")
    subprocess.run(["go", "build", "-o", exe, "."], cwd=HERE / "goload", check=True,
                   timeout=600)
    return exe


def goload(exe: str, target: str, args: list[str], clients: int, duration: float,
           size: int) -> dict[str, object]:
    run = subprocess.run(
        [exe, "-target", target, "-clients", str(clients), "-conns", str(max(1, clients // 8)),
         "-keys", str(KEYS), "-batch", str(BATCH), "-limit", str(SCAN), "-size", str(size),
         "-duration", str(duration), *args], capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"goload {' '.join(args)} failed: {run.stderr[-500:]}")
    out: dict[str, object] = json.loads(run.stdout) if run.stdout.strip() else {}
    return out


def measured(system: str, cell: str, size: str, clients: int, got: dict[str, object],
             pids: list[int], before: list[float], steal: StealMeter) -> Result:
    r = Result(system, cell, size, clients, seconds=float(got["seconds"]),  # type: ignore[arg-type]
               ops=int(got["ops"]), rows=int(got["rows"]),  # type: ignore[call-overload]
               errors=int(got["errors"]), all_rows=int(got["all_rows"]),  # type: ignore[call-overload]
               error_codes=dict(got["error_codes"] or {}),  # type: ignore[call-overload]
               p50_ms=float(got["p50_ms"]), p99_ms=float(got["p99_ms"]))  # type: ignore[arg-type]
    r.steal = steal.stop()
    if r.all_rows:
        r.client_cpu = f"{1e6 * float(got['cpu_seconds']) / r.all_rows:.1f}"  # type: ignore[arg-type]
        r.cpu = "/".join(f"{1e6 * (cpu_seconds(p) - b) / r.all_rows:.0f}"
                         for p, b in zip(pids, before, strict=True))
    return r


def run_gateway(exe: str, sizes: list[str], duration: float, appliers: str,
                coalesce: int = 0, cells: tuple[Any, ...] = CELLS) -> list[Result]:
    """The gateway's cells; with ``coalesce``, the one-key cells again through the Go
    client's ``WithReadCoalescing(coalesce)`` (system "gateway, coalescing")."""
    from tests.harness.cluster import ProcessCluster

    out: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp:
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=gateway_env(appliers))
        try:
            address, pids = start_gateway(cluster)
            # (system, extra goload arguments, the cells it runs)
            passes: list[tuple[str, list[str], tuple[Any, ...]]] = [("gateway", [], cells)]
            if coalesce:
                passes.append(("gateway, coalescing", ["-coalesce", str(coalesce)],
                               tuple(c for c in cells if "gw-read" in c[1])))
            for size in sizes:
                goload(exe, address, ["-mode", "gw-fill"], 1, 1, SIZES[size])
                for system, extra, cells in passes:
                    for cell, args, _, clients, _rows in cells:
                        before, steal = [cpu_seconds(p) for p in pids], StealMeter()
                        got = goload(exe, address, [*args, *extra], clients, duration,
                                     SIZES[size])
                        out.append(measured(system, cell, size, clients, got, pids, before,
                                            steal))
                        print(table(out[-1:]).splitlines()[-1], flush=True)
        finally:
            cluster.close()
    return out


def run_etcd_reads(directory: str, exe: str, sizes: list[str], duration: float,
                   ports: list[int], round_no: int, cells: tuple[Any, ...] = CELLS
                   ) -> list[Result]:
    tool = Path(directory) / "benchmark"
    out: list[Result] = []
    with started_etcd(directory, ports) as (clients, lead, order):
        endpoint = clients[lead].removeprefix("http://")
        pids = [p.pid for p in order]
        for size in sizes:
            goload(exe, endpoint, ["-mode", "etcd-fill"], 1, 1, SIZES[size])
            for cell, _, (kind, what), n, rows in cells:
                before, steal = [cpu_seconds(p) for p in pids], StealMeter()
                if kind == "go":
                    got = goload(exe, endpoint, what, n, duration, SIZES[size])
                    r = measured(f"etcd (round {round_no})", cell, size, n, got, pids,
                                 before, steal)
                else:
                    conns = max(1, n // 4)
                    rate, _, _ = run_tool(tool, endpoint, n, conns, max(200, 2 * n), what)
                    before, steal = [cpu_seconds(p) for p in pids], StealMeter()
                    total = max(200, int(rate * duration))
                    rate, p50, p99 = run_tool(tool, endpoint, n, conns, total, what)
                    r = Result(f"etcd (round {round_no})", cell, size, n,
                               seconds=total / rate, ops=total, rows=total * rows,
                               all_rows=total * rows, p50_ms=p50, p99_ms=p99)
                    r.steal = steal.stop()
                    r.cpu = "/".join(f"{1e6 * (cpu_seconds(p) - b) / r.rows:.0f}"
                                     for p, b in zip(pids, before, strict=True))
                out.append(r)
                print(table(out[-1:]).splitlines()[-1], flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--etcd", metavar="DIR",
                   help="directory with etcd's etcd and benchmark binaries (without: the "
                        "gateway's cells alone)")
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--sizes", default="10B,1KiB")
    p.add_argument("--appliers", default="sqlite", choices=("sqlite", "none"))
    p.add_argument("--rounds", type=int, default=2, help="etcd rounds (the better counts)")
    p.add_argument("--coalesce", type=int, default=0, metavar="N",
                   help="also read one key through the Go client's WithReadCoalescing(N)")
    p.add_argument("--cells", default="", metavar="WORDS",
                   help="only the cells whose name holds one of these comma-separated words "
                        "(e.g. scan; default: every cell)")
    args = p.parse_args()
    cells = CELLS
    if args.cells:
        words = [w for w in args.cells.split(",") if w]
        cells = tuple(c for c in CELLS if any(w in c[0] for w in words))
        if not cells:
            p.error(f"--cells: no cell's name holds any of {words}")
    sizes = args.sizes.split(",")
    if any(s not in SIZES for s in sizes):
        p.error(f"--sizes: from {', '.join(SIZES)}")
    from tests.harness.cluster import PortAllocator

    ports = PortAllocator()
    print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-reads-go-") as build:
        exe = build_goload(build)
        rounds: list[list[Result]] = []
        if args.etcd:
            quiesce("etcd, round 1")
            rounds.append(run_etcd_reads(args.etcd, exe, sizes, args.duration,
                                         [ports.take() for _ in range(6)], 1, cells))
        quiesce("gateway")
        gw = run_gateway(exe, sizes, args.duration, args.appliers, args.coalesce, cells)
        for r in range(2, args.rounds + 1 if args.etcd else 0):
            quiesce(f"etcd, round {r}")
            rounds.append(run_etcd_reads(args.etcd, exe, sizes, args.duration,
                                         [ports.take() for _ in range(6)], r, cells))
    best: dict[tuple[str, str], Result] = {}
    for rr in rounds:
        for r in rr:
            k = (r.mode, r.size)
            if k not in best or r.rows_per_s > best[k].rows_per_s:
                best[k] = r
    print()
    print(table(gw + [r for rr in rounds for r in rr]))
    print()
    print("load:", Path("/proc/loadavg").read_text().strip())
    for r in gw:
        e = best.get((r.mode, r.size))
        if e is None or not e.rows_per_s:
            continue
        print(f"{r.mode:<22} {r.size:>5}: {r.system} {r.rows_per_s:>9,.0f} rows/s, etcd "
              f"{e.rows_per_s:>9,.0f} ({e.system}): {r.rows_per_s / e.rows_per_s:.2f}x; "
              f"p50 {r.pct(0.5):.2f} / {e.pct(0.5):.2f} ms")
    for r in gw + [r for rr in rounds for r in rr]:
        if r.error_codes:
            print(f"errors in {r.system} {r.mode} {r.size}: {r.error_codes}")


if __name__ == "__main__":
    main()
