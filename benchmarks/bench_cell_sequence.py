"""bench_node.py's write cells one after another on one cluster: CPU and disk writes per row.

    python benchmarks/bench_cell_sequence.py --appliers sqlite \\
        --cells batch:10B:3,stream:10B:3,big:1KiB:3:3

Starts one 3-node cluster (fsync on, as ``bench_node.py`` does) and runs the given cells in
order on it, so that each finds the state the cells before it left -- the level-0 tables a
merge will take, the applier's database -- as in a full ``bench_node.py`` run. A cell is
``KIND:SIZE:SECONDS[:REPEAT]``: KIND one of ``bench_threads.py``'s cells (``batch``,
``stream``, ``big``, ``unary``, ``go-batch``, ``go-stream``...), SIZE ``10B`` or ``1KiB``.
For every cell it prints rows/s and, per node (leader first), the CPU per row of each group of
threads (``MainThread``: the event loop; ``applier``; ``lsm-flush``; ``lsm-compact``;
``raft-io``; ``other``) and the bytes each group caused to be written to disk per row
(``/proc/<pid>/task/<tid>/io`` ``write_bytes``), both counted from the cell's start until the
nodes are quiet again -- so a merge that comes due in a cell is charged to it. Thread names
come from ``py-spy dump`` (without py-spy everything is ``other``). docs/benchmarks.md,
"Per thread and per cell", shows what it found. Timings are informative only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_node as bn
import bench_threads as bt

GROUPS = ("MainThread", "applier", "lsm-flush", "lsm-compact", "raft-io")
KINDS = ("batch", "stream", "big", "unary", *bt.GO_CELLS)
SIZES = {"10B": "10 B", "1KiB": "1 KiB"}


def parse_cells(spec: str) -> list[tuple[str, str, float, int]]:
    """``KIND:SIZE:SECONDS[:REPEAT],...`` as (kind, bench_node size, seconds, repeat); a
    ValueError naming the part that is not one."""
    cells = []
    for part in spec.split(","):
        bits = part.split(":")
        try:
            if len(bits) not in (3, 4) or bits[0] not in KINDS or bits[1] not in SIZES:
                raise ValueError
            seconds, repeat = float(bits[2]), int(bits[3]) if len(bits) == 4 else 1
            if not 0 < seconds < float("inf") or repeat < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"{part!r} is not KIND:SIZE:SECONDS[:REPEAT] (KIND one of "
                             f"{', '.join(KINDS)}; SIZE 10B or 1KiB; SECONDS > 0; "
                             "REPEAT >= 1)") from None
        cells.append((bits[0], SIZES[bits[1]], seconds, repeat))
    return cells


def _group(name: str) -> str:
    return next((g for g in GROUPS if name.startswith(g)), "other")


def thread_written(pid: int) -> dict[int, int]:
    """tid -> bytes the thread caused to be written to disk so far."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{tid}/io").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        fields = dict(line.split(": ") for line in text.splitlines())
        out[int(tid)] = int(fields["write_bytes"])
    return out


def _per_group(before: dict[int, float], after: dict[int, float], names: dict[int, str],
               rows: int) -> dict[str, float]:
    got: collections.Counter[str] = collections.Counter()
    for tid, v in after.items():
        got[_group(names.get(tid, ""))] += (v - before.get(tid, 0)) / rows
    return got


async def run(cells: list[tuple[str, str, float, int]], address: str, pids: list[int],
              loadgen: str | None) -> None:
    for kind, size, seconds, repeat in cells:
        for _ in range(repeat):
            cpu0 = [{t: u + s for t, (u, s) in bt.thread_cpu(p).items()} for p in pids]
            io0 = [thread_written(p) for p in pids]
            result = await bt.run_cell(kind, address, size, seconds, loadgen)
            await bn.settle(pids)
            cpu1 = [{t: u + s for t, (u, s) in bt.thread_cpu(p).items()} for p in pids]
            io1 = [thread_written(p) for p in pids]
            names = [bt.thread_names(p) for p in pids]
            rows = max(result.all_rows, 1)
            print(f"{kind} {size}: {result.rows_per_s:,.0f} rows/s")
            for k in range(len(pids)):
                role = "leader" if k == 0 else f"follower {k}"
                cpu = _per_group(cpu0[k], cpu1[k], names[k], rows)
                io = _per_group(io0[k], io1[k], names[k], rows)
                print(f"  {role}: CPU us/row {sum(cpu.values()) * 1e6:.1f} ("
                      + ", ".join(f"{g} {v * 1e6:.1f}" for g, v in sorted(cpu.items())
                                  if v * 1e6 >= 0.05)
                      + f"); written B/row {sum(io.values()):.0f} ("
                      + ", ".join(f"{g} {v:.0f}" for g, v in sorted(io.items()) if v >= 1)
                      + ")", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", required=True, help="KIND:SIZE:SECONDS[:REPEAT],... in order")
    p.add_argument("--appliers", default="sqlite", choices=["sqlite", "none"],
                   help="'sqlite' (the default product config) or 'none'")
    args = p.parse_args()
    try:
        cells = parse_cells(args.cells)
    except ValueError as exc:
        p.error(f"--cells: {exc}")

    from tests.harness.cluster import ProcessCluster

    with tempfile.TemporaryDirectory(prefix="bench-sequence-") as tmp:
        go = any(kind in bt.GO_CELLS for kind, *_ in cells)
        loadgen = bn.build_loadgen(tmp) if go else None
        if go and loadgen is None:
            sys.exit("bench_cell_sequence: the go-* cells need the Go load generator (go)")
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=bn.gateway_env(args.appliers))
        try:
            address, pids = bn.start_gateway(cluster)
            asyncio.run(run(cells, address, pids, loadgen))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
