"""Where each node's CPU goes, thread by thread, during one write cell of bench_node.py.

    python benchmarks/bench_threads.py --cell batch --appliers sqlite --duration 8

Starts a 3-node cluster (fsync on, as ``bench_node.py`` does) with the given appliers, warms it
for a second, runs one cell (``batch``: WriteBatch x200 one-row transactions from 4 callers;
``stream``: StreamWrite w1024; ``big``: 500-row transactions from 8 clients; ``unary``: Write
from 64 clients; ``go-unary``, ``go-batch``, ``go-stream``: those from bench_node's Go load
generator, built with the machine's ``go``; ``go-unary1``: its unary Write from one client;
``go-stream-keyed``: its stream with idempotency keys) and prints, per node (leader first), the
user and system CPU of every thread per row written (and the client's CPU per row), read from
``/proc/<pid>/task/<tid>/stat`` before and after the cell. Thread names come from ``py-spy
dump`` when py-spy is installed (``MainThread`` is the event loop: API, Raft, peers, state
machine; ``applier-<name>`` an applier's dispatcher; ``raft-io-*`` the WAL writes), else only
thread ids are printed. It shows what bench_node's "CPU us/row L/F/F" column is made of: how
much is the applier's thread, and how much of the event loop's work a configuration adds.
Timings are informative only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_node as bn

_HZ = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    """tid -> (user s, system s) of every thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out[int(tid)] = (int(fields[11]) / _HZ, int(fields[12]) / _HZ)
    return out


def thread_names(pid: int) -> dict[int, str]:
    """tid -> Python thread name (from ``py-spy dump``), empty without py-spy."""
    if shutil.which("py-spy") is None:
        return {}
    dump = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True,
                          text=True, timeout=60).stdout
    names = {}
    for line in dump.splitlines():
        m = re.match(r'Thread (\d+) \([^)]*\): "([^"]*)"', line)
        if m:
            names[int(m.group(1))] = m.group(2)
    return names


GO_CELLS = {"go-unary": ("unary", 64), "go-unary1": ("unary", 1), "go-batch": ("batch", 4),
            "go-stream": ("stream", 1), "go-stream-keyed": ("stream", 1)}


async def run_cell(cell: str, address: str, size: str, duration: float,
                   loadgen: str | None) -> bn.Result:
    if cell in GO_CELLS:
        assert loadgen is not None
        mode, clients = GO_CELLS[cell]
        return await bn.bench_go(loadgen, address, size, mode, clients, duration,
                                 keyed=cell.endswith("-keyed"))
    if cell == "batch":
        return await bn.bench_batch(address, size, 4, duration)
    if cell == "stream":
        return await bn.bench_stream(address, size, duration)
    if cell == "big":
        return await bn.bench_big(address, size, 8, duration)
    return await bn.bench_unary(address, size, 64, duration)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cell", choices=["batch", "stream", "big", "unary", *GO_CELLS],
                   default="batch")
    p.add_argument("--appliers", default="sqlite",
                   help="GATEWAY_APPLIERS of the nodes: 'sqlite' (the default) or 'none'")
    p.add_argument("--size", choices=list(bn.SIZES), default="10 B", help="row size")
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--min-share", type=float, default=0.5,
                   help="hide threads under this many us per row")
    args = p.parse_args()

    from tests.harness.cluster import ProcessCluster

    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        loadgen = bn.build_loadgen(tmp) if args.cell in GO_CELLS else None
        if args.cell in GO_CELLS and loadgen is None:
            sys.exit(f"the {args.cell} cell needs the Go load generator")
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=bn.gateway_env(args.appliers))
        try:
            address, pids = bn.start_gateway(cluster)
            asyncio.run(run_cell(args.cell, address, args.size, 1.0, loadgen))  # warm up
            before = [thread_cpu(pid) for pid in pids]
            start, mine = time.monotonic(), time.process_time()
            result = asyncio.run(run_cell(args.cell, address, args.size, args.duration,
                                          loadgen))
            mine = time.process_time() - mine
            after = [thread_cpu(pid) for pid in pids]
            elapsed = time.monotonic() - start
            names = [thread_names(pid) for pid in pids]
        finally:
            cluster.close()
    rows = max(result.rows, 1)
    print(f"{args.cell} cell, {args.size}, appliers={args.appliers or 'none'}: "
          f"{result.rows_per_s:,.0f} rows/s over {elapsed:.1f} s (load average at the end "
          f"{os.getloadavg()[0]:.2f})")
    print(f"| cell | rows/s |\n|---|---|\n| {args.cell} {args.size} | {result.rows_per_s:.0f} |\n")
    print("| node | thread | user us/row | system us/row |")
    print("|---|---|---|---|")
    for k in range(len(pids)):
        role = "leader" if k == 0 else f"follower {k}"
        total_u = total_s = 0.0
        lines = []
        for tid, (u, s) in sorted(after[k].items()):
            u0, s0 = before[k].get(tid, (0.0, 0.0))
            du, ds = (u - u0) / rows * 1e6, (s - s0) / rows * 1e6
            total_u, total_s = total_u + du, total_s + ds
            if du + ds >= args.min_share:
                lines.append(f"| {role} | {names[k].get(tid, f'tid {tid}')} | {du:.1f} | "
                             f"{ds:.1f} |")
        print("\n".join(lines))
        print(f"| {role} | all threads | {total_u:.1f} | {total_s:.1f} |")
    client = (result.client_cpu if result.client_cpu != "-"  # the Go load generator's
              else f"{1e6 * mine / max(result.all_rows, 1):.1f}")
    print(f"\nclient CPU (user + system) us/row: {client}")


if __name__ == "__main__":
    main()
