"""Time to converge after a burst of conflicting writes, beside the channel lag, same run.

Two single-node clusters replicate to each other (channels both ways): A is PRIMARY, B
SECONDARY, ``bench.*`` under ``--function`` (default ``NDB$EPOCH2``), both in the product's
default configuration (fsync on, the embedded SQLite applier on; ``--appliers none`` strips it).

1. **lag**: single-row writes in each cluster, the time from their commit to their arrival on
   the other's ``Subscribe`` stream -> p50/p99 per direction; an epoch round trip is A -> B
   plus B -> A.
2. **burst**: ``--rows`` rows (default 1,000) held by both clusters are updated in both at once
   (transactions of 100 rows each side, in parallel): every row in conflict. Both clusters'
   rows are read every 10 ms; a row has converged when both clusters hold the same value from
   then on. Per row, the time from the commit of the later of its two writes to its
   convergence -> p50/p99 (and how long the burst itself took to write), against
   the target: within two epoch round trips (2 x (lag A->B + lag B->A), p50 against p50, p99
   against p99). Checked at the end: both clusters equal, every row on the primary's value.

    python benchmarks/bench_conflicts.py [--rows 1000] [--function NDB$EPOCH2]
                                         [--appliers sqlite,none] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_channels import _pct, _ports  # noqa: E402

from gateway.client import GatewayClient, GatewayError, row_insert, row_update  # noqa: E402

EPOCH_MS = 100
TABLE = "bench.items"


class Node:
    """One single-node cluster as a real process, with a channel from ``source_api``."""

    def __init__(self, root: Path, cid: int, ports: tuple[int, int], source_api: str,
                 role: str, function: str, appliers: str) -> None:
        self.api = f"127.0.0.1:{ports[1]}"
        cfg = root / f"c{cid}.toml"
        cfg.write_text(
            f'conflict_role = "{role}"\nnode_id = 1\ncluster_id = {cid}\n'
            f'listen = "127.0.0.1:{ports[0]}"\napi = "{self.api}"\n'
            f'peers = "1=127.0.0.1:{ports[0]}"\ndata_dir = "{root}/c{cid}"\n'
            f'log_format = "text"\nlog_level = "warning"\nepoch_ms = {EPOCH_MS}\n'
            f'[[channels]]\nname = "from{3 - cid}"\nsources = ["{source_api}"]\n'
            f'[[conflicts]]\ntable = "bench.*"\nfunction = "{function}"\n')
        log = open(root / f"c{cid}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--config", str(cfg)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(ROOT), os.environ.get("PYTHONPATH", "")]),
                 "GATEWAY_APPLIERS": "" if appliers == "none" else appliers},
            stdout=log, stderr=log)
        self.client = GatewayClient(self.api, timeout=30)

    def wait_ready(self) -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                if self.client.status(timeout=1).leader_id:
                    return
            except GatewayError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"no leader at {self.api}")

    def values(self) -> dict[int, str]:
        out: dict[int, str] = {}
        start = None
        while True:
            resp = self.client.scan(TABLE, start=start, consistency="stale")
            for r in resp.rows:
                out[r.key_values[0].int_value] = r.values[0].string_value
            if not resp.more or not resp.rows:
                return out
            start = resp.rows[-1].key_values[0].int_value + 1

    def close(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _lags(src: Node, dst: Node, cid: int, n: int = 30) -> list[float]:
    """Commit -> arrival on ``dst``'s change stream of ``n`` single-row writes at ``src``."""
    got: dict[int, float] = {}
    stream = GatewayClient(dst.api, timeout=3600).subscribe()
    done = threading.Event()

    def watch() -> None:
        try:
            for ev in stream:
                t = ev.transaction
                if t.gtid.server_id == cid and t.statements:
                    got[t.gtid.trans_id] = (time.time_ns() - t.commit_timestamp_ns) / 1e6
                if done.is_set():
                    return
        except GatewayError:
            pass

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    time.sleep(0.3)
    base = cid * 10**6
    ids = []
    for i in range(n):
        res = src.client.write([row_insert("bench.lag", {"id": base + i}, {"v": "x"})])
        ids.append(res.gtid.trans_id)
        time.sleep(0.03)
    end = time.monotonic() + 30
    while not all(i in got for i in ids) and time.monotonic() < end:
        time.sleep(0.01)
    done.set()
    stream.cancel()
    return [got[i] for i in ids if i in got]


def run(rows: int, function: str, appliers: str) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-conflicts-"))
    pa, pb = _ports(2), _ports(2)
    a = Node(root, 1, (pa[0], pa[1]), f"127.0.0.1:{pb[1]}", "PRIMARY", function, appliers)
    b = Node(root, 2, (pb[0], pb[1]), f"127.0.0.1:{pa[1]}", "SECONDARY", function, appliers)
    try:
        a.wait_ready()
        b.wait_ready()
        for lo in range(0, rows, 100):  # the rows both clusters hold before the burst
            a.client.write([row_insert(TABLE, {"id": k}, {"v": "seed"})
                            for k in range(lo, min(rows, lo + 100))])
        end = time.monotonic() + 60
        while len(b.values()) < rows and time.monotonic() < end:
            time.sleep(0.05)
        ab, ba = _lags(a, b, 1), _lags(b, a, 2)

        written: dict[int, float] = {}  # per row: when the later of its two writes committed

        def burst(node: Node, value: str) -> None:
            for lo in range(0, rows, 100):
                node.client.write([row_update(TABLE, {"id": k}, {"v": value})
                                   for k in range(lo, min(rows, lo + 100))])
                now = time.monotonic()
                for k in range(lo, min(rows, lo + 100)):
                    written[k] = max(written.get(k, 0.0), now)

        t0 = time.monotonic()
        writers = [threading.Thread(target=burst, args=(a, "A")),
                   threading.Thread(target=burst, args=(b, "B"))]
        for w in writers:
            w.start()
        since: dict[int, float | None] = dict.fromkeys(range(rows))  # equal since (or None)
        last_change = time.monotonic()
        final = None
        while time.monotonic() - t0 < 120:
            now = time.monotonic()
            va, vb = a.values(), b.values()
            for k in range(rows):
                same = va.get(k) is not None and va.get(k) == vb.get(k) and va.get(k) != "seed"
                if same and since[k] is None:
                    since[k] = now
                    last_change = now
                elif not same and since[k] is not None:
                    since[k] = None
                    last_change = now
            if all(since[k] is not None for k in range(rows)) and now - last_change > 1.0 \
                    and not any(w.is_alive() for w in writers):
                final = (va, vb)
                break
            time.sleep(0.01)
        if final is None:
            raise SystemExit("the clusters did not converge within 120 s")
        va, vb = final
        conv = [(since[k] - written[k]) * 1000 for k in range(rows)]  # type: ignore[operator]
        return {"burst": (max(written.values()) - t0) * 1000, "ab50": _pct(ab, 50),
                "ab99": _pct(ab, 99), "ba50": _pct(ba, 50), "ba99": _pct(ba, 99),
                "c50": _pct(conv, 50), "c99": _pct(conv, 99),
                "primary": sum(1 for k in range(rows) if va[k] == "A") / rows,
                "equal": float(va == vb)}
    finally:
        a.close()
        b.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--function", default="NDB$EPOCH2")
    p.add_argument("--appliers", default="sqlite,none",
                   help="applier configurations to run, comma separated (none: no applier)")
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    avg = os.getloadavg()
    print(f"load average before: {avg[0]:.2f} {avg[1]:.2f} {avg[2]:.2f}; epoch {EPOCH_MS} ms; "
          f"{args.rows} rows updated in both clusters at once under {args.function}")
    print("| appliers | burst written in | lag A->B p50/p99 | lag B->A p50/p99 | converged p50 | "
          "target p50 | "
          "converged p99 | target p99 | on the primary's value | clusters equal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _ in range(args.repeat):
        for appliers in args.appliers.split(","):
            r = run(args.rows, args.function, appliers)
            t50 = 2 * (r["ab50"] + r["ba50"])
            t99 = 2 * (r["ab99"] + r["ba99"])
            print(f"| {appliers} | {r['burst']:.0f} ms | {r['ab50']:.0f} / {r['ab99']:.0f} ms | "
                  f"{r['ba50']:.0f} / {r['ba99']:.0f} ms | {r['c50']:.0f} ms | "
                  f"<= {t50:.0f} ms {'ok' if r['c50'] <= t50 else 'MISSED'} | "
                  f"{r['c99']:.0f} ms | <= {t99:.0f} ms {'ok' if r['c99'] <= t99 else 'MISSED'} | "
                  f"{r['primary']:.0%} | {'yes' if r['equal'] else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
