"""Peak RSS per node beside etcd's member, under ``bench_node.py``'s load, with a breakdown.

    PYTHONPATH=$PWD python benchmarks/bench_memory.py [--duration 3] [--etcd DIR]
        [--appliers sqlite,none] [--variant NAME:KEY=VALUE,KEY=VALUE ...] [--trace N]
        [--quick] [--no-go]

Runs, in one run: etcd (``--etcd``: 3 members and its ``benchmark`` tool through
``etcd_peer.py``, as ``bench_node.py`` runs it: put with 1, 64, 1000 clients, txn-put, range),
then for each gateway configuration (``--appliers``; each ``--variant`` adds one more, a
configuration with extra ``GATEWAY_*`` environment for its nodes -- e.g. the old defaults
of a bound, so that before and after run side by side) a 3-node cluster driven through every
gateway cell of ``bench_node.py`` (one-row ``Write`` at 1 and 64 clients, ``WriteBatch``,
``StreamWrite``, the Go client's cells, 500-row transactions, reads; 10 B then 1 KiB).

Each node runs with ``GATEWAY_MEMORY_REPORT`` (``gateway/node/loop/memory_report.py``): twice
a second it records its resident set, the resident set by kind of mapping, glibc's allocator
totals and its own accounting of the memtables, the block cache and the Raft log's in-memory
tail. Printed: each cell's rows/s (``bench_node``'s table: the write figures of every
configuration in the same run, so a smaller bound that costs speed shows), each node's peak
RSS (``VmHWM``, leader first) beside etcd's members' and the ratio of the largest to etcd's
largest, and for each node the breakdown at its peak line -- ``code``, ``tables`` (mapped table
files, reclaimable), ``files``, the components, ``start (rest)`` (the rest of the resident set
once serving, before any load: the interpreter's objects, imports, gRPC) and ``other`` (what is
left: requests and entries in flight, the applier's SQLite, gRPC's buffers, and memory the
allocator keeps after ``free``) -- the largest each component reached, and glibc's totals
(``used``; ``free``: kept in free chunks, resident until the node's trimmer gives the pages
back, ``malloc_trim_ms``, though the count stays). ``--trace N`` also traces Python allocations
in the nodes (slow: rows/s are then not comparable) and prints the N modules holding the most
at the peak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_node as bn  # noqa: E402

MiB = 1 << 20
#: Report keys that count events rather than bytes (``log_file_reads``: reads of entries
#: older than the log's in-memory tail, answered from its files -- what a smaller
#: ``log_cache_bytes`` costs).
COUNTS = "_reads"


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:KEY=VALUE,KEY=VALUE`` -> ``(NAME, {KEY: VALUE})`` (keys are ``GATEWAY_*``
    environment variables of the nodes, or glibc's allocator tunables ``MALLOC_*``; the
    variant runs with the default appliers)."""
    name, sep, rest = text.partition(":")
    env: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key.startswith(("GATEWAY_", "MALLOC_")):
            raise ValueError(f"--variant {text!r}: expected NAME:GATEWAY_KEY=VALUE,...")
        env[key] = value
    if not sep or not name:
        raise ValueError(f"--variant {text!r}: expected NAME:GATEWAY_KEY=VALUE,...")
    return name, env


def read_report(path: Path) -> list[dict[str, Any]]:
    """The lines a node's memory report wrote (an empty list when it wrote none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def breakdown(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The peak line's figures split by component (MiB), the start's resident set and the
    largest each component reached."""
    first, peak = lines[0], max(lines, key=lambda ln: ln["rss"])
    comp = {k: v for k, v in peak["components"].items() if not k.endswith(COUNTS)}
    maps = peak["maps"]
    parts = {"code": maps["code"], "tables": maps["tables"], "files": maps["files"], **comp}
    start_rest = first["rss"] - first["maps"]["code"] - first["maps"]["tables"] \
        - first["maps"]["files"] - sum(v for k, v in first["components"].items()
                                       if not k.endswith(COUNTS))
    parts["start (rest)"] = max(start_rest, 0)
    parts["other"] = peak["rss"] - sum(parts.values())
    largest = {k: max(ln["components"][k] for ln in lines) for k in comp}
    counts = {k: v - first["components"][k] for k, v in lines[-1]["components"].items()
              if k.endswith(COUNTS)}
    return {"rss": peak["rss"], "hwm": lines[-1]["hwm"], "start": first["rss"],
            "counts": counts,
            "parts": parts, "largest": largest, "threads": peak["threads"],
            "malloc": peak["malloc"], "gc": peak["gc"], "traced": peak.get("traced"),
            "top": next(
                (ln["top"] for ln in reversed(lines) if "top" in ln and ln["rss"] <= peak["rss"]),
                None)}


def print_breakdown(system: str, pids: list[int], report_dir: Path, node_ids: list[int]) -> \
        list[int]:
    """Print each node's breakdown; its peak RSS (KiB, ``VmHWM``) per node, leader first."""
    peaks = []
    for pid, nid in zip(pids, node_ids, strict=True):
        lines = read_report(report_dir / f"node-{nid}.jsonl")
        hwm = bn.peak_rss_kib(pid)
        peaks.append(hwm)
        if not lines:
            print(f"{system} node {nid}: peak {hwm / 1024:.0f} MiB (no memory report)")
            continue
        b = breakdown(lines)
        parts = ", ".join(f"{k} {v / MiB:.0f}" for k, v in b["parts"].items())
        largest = ", ".join(f"{k} {v / MiB:.0f}" for k, v in b["largest"].items())
        print(f"{system} node {nid}: peak {hwm / 1024:.0f} MiB; at the report's peak "
              f"{b['rss'] / MiB:.0f} MiB = {parts} (MiB); start {b['start'] / MiB:.0f}; "
              f"largest: {largest}; threads {b['threads']}; malloc "
              + ", ".join(f"{k} {v / MiB:.0f}" for k, v in b["malloc"].items())
              + f"; gc {b['gc']}; during the run: "
              + ", ".join(f"{k} {v}" for k, v in b["counts"].items()), flush=True)
        if b["top"]:
            print(f"  traced Python allocations at the peak: {(b['traced'] or 0) / MiB:.0f} "
                  "MiB, by module (MiB): " + ", ".join(
                f"{name} {size / MiB:.1f}" for name, size in b["top"]), flush=True)
    return peaks


def run_cluster(system: str, env: dict[str, str], sizes: list[str], duration: float,
                loadgen: str | None, trace: int) -> tuple[list[bn.Result], list[int]]:
    """One gateway configuration's cells and its nodes' peak RSS (KiB, leader first)."""
    from tests.harness.cluster import ProcessCluster

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        report = Path(tmp) / "memory"
        env = {**env, "GATEWAY_MEMORY_REPORT": str(report)}
        if trace:  # tracing slows the nodes' loops: a longer election timeout (3 s) keeps
            # a leader through the cells
            env.update({"GATEWAY_MEMORY_TRACE": str(trace), "GATEWAY_ELECTION_TICKS": "60"})
        cluster = ProcessCluster(Path(tmp), 3, proxied=False, env=env, start_timeout=60)
        try:
            address, pids = bn.start_gateway(cluster)
            by_pid = {n.proc.pid: i for i, n in cluster.nodes.items() if n.proc}
            results = asyncio.run(bn.run_gateway(address, sizes, duration, system, pids,
                                                 loadgen))
            peaks = print_breakdown(system, pids, report, [by_pid[p] for p in pids])
        finally:
            cluster.close()
    return results, peaks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=3.0, help="seconds per measured cell")
    p.add_argument("--quick", action="store_true", help="2 s cells, 10 B rows only")
    p.add_argument("--etcd", metavar="DIR", help="etcd's etcd and benchmark binaries")
    p.add_argument("--appliers", default="sqlite",
                   help="gateway configurations: sqlite (default product) and/or none")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:GATEWAY_KEY=VALUE,...: one more configuration (default "
                        "appliers) with that environment; repeatable")
    p.add_argument("--trace", type=int, default=0, metavar="N",
                   help="trace Python allocations in the nodes; print the N top modules")
    p.add_argument("--no-go", action="store_true", help="skip the Go client cells")
    args = p.parse_args()
    duration = 2.0 if args.quick else args.duration
    sizes = ["10 B"] if args.quick else list(bn.SIZES)
    try:
        variants = [parse_variant(v) for v in args.variant]
    except ValueError as exc:
        p.error(str(exc))
    if args.etcd:
        from etcd_peer import missing_binaries

        problem = missing_binaries(args.etcd)
        if problem:
            p.error(problem)
    configs: list[tuple[str, dict[str, str]]] = []
    for appliers in args.appliers.split(","):
        if appliers not in bn.APPLIER_CONFIGS:
            p.error(f"--appliers: {appliers!r} is not one of {', '.join(bn.APPLIER_CONFIGS)}")
        configs.append(("gateway" if appliers == "sqlite" else "gateway (no applier)",
                        bn.gateway_env(appliers)))
    configs += [(f"gateway ({name})", {**bn.gateway_env("sqlite"), **env})
                for name, env in variants]

    with open("/proc/loadavg") as f:
        print(f"load at the start: {f.read().strip()}", flush=True)
    from tests.harness.cluster import PortAllocator

    ports = PortAllocator()
    peaks: dict[str, list[int]] = {}
    results: list[bn.Result] = []
    if args.etcd:
        from etcd_peer import run_etcd

        bn.quiesce("etcd")
        got, mem = run_etcd(args.etcd, sizes, duration, [ports.take() for _ in range(6)],
                            bn.Result, bn.cpu_seconds, bn.peak_rss_kib, bn.StealMeter)
        print(bn.table(got), flush=True)
        results += got
        peaks["etcd member"] = mem
    build = tempfile.TemporaryDirectory(prefix="bench-memory-go-")
    loadgen = None if args.no_go else bn.build_loadgen(build.name)
    for system, env in configs:
        bn.quiesce(system)
        try:
            got, mem = run_cluster(system, env, sizes, duration, loadgen, args.trace)
        except Exception as exc:  # a cluster that did not start: the others still count
            print(f"{system}: {type(exc).__name__}: {exc}", flush=True)
            continue
        results += got
        peaks[system] = mem
    print()
    print(bn.table(results))
    print()
    with open("/proc/loadavg") as f:
        print(f"load at the end: {f.read().strip()}")
    etcd = max(peaks.get("etcd member", [0]))
    for system, values in peaks.items():
        line = f"peak RSS {system} (leader first): " + ", ".join(
            f"{v / 1024:.0f}" for v in values) + " MiB"
        if etcd and system != "etcd member":
            line += f"; largest / etcd's largest member {max(values) / etcd:.2f}x (target <= 1)"
        print(line)


if __name__ == "__main__":
    main()
