"""Sending and receiving a snapshot: in memory (the archive as one byte string, as before
``ArchiveReader`` / ``FileSpool``) against from and to files, side by side in one run.

    python benchmarks/bench_snapshot_transfer.py [--mib 384] [--rounds 2]

Builds an LSM store of about ``--mib`` MiB (1 KiB values), exports it and records it as a
node's own snapshot (a directory of links), then runs each side in its own process (so each
has its own peak RSS):

* leader: ``SnapshotFiles.load`` and the Raft core's ``SnapshotSender`` cutting every chunk
  (acknowledged at once). "memory" turns the loaded reader into bytes first, which is what
  ``load`` used to do.
* follower: the chunks into a ``SnapshotReceiver`` -- the default ``MemorySpool`` or the
  node's ``FileSpool`` --, ``stage`` + ``commit`` (as ``install_snapshot``), and ``unpack_dir``
  (the restore's first step).

Printed per side and mode: the longest single step on the caller's thread (the event loop's,
in a node: ``load``, or one chunk's ``receive``), the total, and the peak RSS above the
process's start; then file/memory ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gateway.core.lsm import LSMStore, export_snapshot
from gateway.node.storage.snapshot_files import SnapshotFiles, unpack_dir
from gateway.raft import ConfState, Snapshot, SnapshotMetadata
from gateway.raft.snapshot_transfer import SnapshotReceiver, SnapshotSender


def _status_mib(field: str) -> float:
    """``field`` of /proc/self/status in MiB: ``VmRSS`` (now) or ``VmHWM`` (this process
    image's peak; ``ru_maxrss`` would carry the parent's RSS at the fork across the exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _rss_mib() -> float:
    return _status_mib("VmHWM")


def _current_mib() -> float:
    return _status_mib("VmRSS")


def build(root: str, mib: int) -> None:
    """A store of ~``mib`` MiB exported and recorded as the snapshot in ``root/snaps``."""
    store = LSMStore(os.path.join(root, "store"), background=False)
    rows, batch = mib * 1024, 10_000
    for start in range(0, rows, batch):
        store.write_batch([(b"k%010d" % i, os.urandom(1000))
                           for i in range(start, min(rows, start + batch))],
                          log_index=start // batch + 1)
        store.flush()
    out = os.path.join(root, "export")
    index = export_snapshot(store, out)
    store.close()
    SnapshotFiles(os.path.join(root, "snaps")).save_dir(
        SnapshotMetadata(ConfState(voters=(1, 2, 3)), index, 2), out)


def leader(root: str, mode: str) -> dict[str, float]:
    rss0 = _current_mib()
    t0 = time.perf_counter()
    snap = SnapshotFiles(os.path.join(root, "snaps")).load()
    if mode == "memory":
        snap = Snapshot(snap.metadata, bytes(snap.data))
    loaded = time.perf_counter() - t0
    sender = SnapshotSender(1 << 20, 4)
    sender.start(2, snap)
    worst = loaded
    while True:
        t = time.perf_counter()
        batch = sender.next_chunks(2)
        worst = max(worst, time.perf_counter() - t)
        if not batch:
            break
        sender.ack(2, snap.metadata.index, batch[-1].offset + len(batch[-1].data))
    return {"worst_ms": 1e3 * worst, "total_ms": 1e3 * (time.perf_counter() - t0),
            "first_ms": 1e3 * loaded, "rss_mib": _rss_mib() - rss0, "bytes": len(snap.data)}


def follower(root: str, mode: str) -> dict[str, float]:
    source = SnapshotFiles(os.path.join(root, "snaps")).load()  # read by range: small
    target_dir = os.path.join(root, f"follower-{mode}")
    shutil.rmtree(target_dir, ignore_errors=True)
    target = SnapshotFiles(target_dir)
    rss0 = _current_mib()
    receiver = SnapshotReceiver(target.spool if mode == "file" else None)
    sender = SnapshotSender(1 << 20, 4)
    sender.start(2, source)
    t0 = time.perf_counter()
    got, worst, held = None, 0.0, 0
    while batch := sender.next_chunks(2):
        for chunk in batch:
            t = time.perf_counter()
            held, snap = receiver.receive(chunk)
            worst = max(worst, time.perf_counter() - t)
            got = snap or got
        sender.ack(2, source.metadata.index, held)
    assert got is not None
    received = time.perf_counter()
    target.stage(got.metadata, got.data)
    target.commit(got.metadata)
    staged = time.perf_counter()
    unpacked = os.path.join(root, f"unpacked-{mode}")
    shutil.rmtree(unpacked, ignore_errors=True)
    unpack_dir(got.data, unpacked)
    done = time.perf_counter()
    return {"worst_ms": 1e3 * worst, "total_ms": 1e3 * (done - t0),
            "first_ms": 1e3 * (received - t0), "stage_ms": 1e3 * (staged - received),
            "rss_mib": _rss_mib() - rss0, "bytes": len(got.data)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=384, help="store size to build (MiB of values)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of each mode")
    ap.add_argument("--one", nargs=3, metavar=("ROOT", "SIDE", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        root, side, mode = args.one
        print(json.dumps((leader if side == "leader" else follower)(root, mode)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-snap-") as root:
        t = time.perf_counter()
        build(root, args.mib)
        print(f"store built and exported in {time.perf_counter() - t:.1f} s; load average "
              f"{os.getloadavg()[0]:.2f}")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for side in ("leader", "follower"):
                for mode in ("memory", "file"):
                    out = subprocess.run([sys.executable, __file__, "--one", root, side, mode],
                                         check=True, capture_output=True, text=True).stdout
                    results.setdefault((side, mode), []).append(json.loads(out))
        print(f"\narchive: {results['leader', 'file'][0]['bytes'] / 2**20:.0f} MiB, "
              f"{args.rounds} rounds (best shown)\n")
        print("| side | mode | longest step on the caller's thread (ms) | load / receive (ms) "
              "| total (ms) | peak RSS above start (MiB) |")
        print("|---|---|---|---|---|---|")
        best = {k: {m: min(r[m] for r in v) for m in ("worst_ms", "first_ms", "total_ms",
                                                        "rss_mib")}
                for k, v in results.items()}
        for (side, mode), b in best.items():
            print(f"| {side} | {mode} | {b['worst_ms']:.1f} | {b['first_ms']:.1f} | "
                  f"{b['total_ms']:.0f} | {b['rss_mib']:.0f} |")
        print()
        for side in ("leader", "follower"):
            f, m = best[side, "file"], best[side, "memory"]
            print(f"{side}: file/memory longest step {f['worst_ms'] / m['worst_ms']:.3f}x, "
                  f"total {f['total_ms'] / m['total_ms']:.2f}x, peak RSS "
                  f"{max(f['rss_mib'], 1) / max(m['rss_mib'], 1):.3f}x")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
