"""Seeding a new cluster: its time against a plain export of the same rows, and what it costs
the source's writers (docs/replication.md, "Seeding a new cluster"), same run.

Two single-node clusters as real processes on loopback, in the product's default
configuration (fsync on, the embedded SQLite applier on: ``--appliers sqlite``) and stripped
(no applier: ``none``). Per configuration:

1. **load**: ``--rows`` rows (``id`` INTEGER, ``v`` VARCHAR of ``--value-bytes``) written to
   the source in 2,000-row transactions by 8 clients (untimed);
2. **export** (the peer): every row of the table read out of the source over the API --
   ``Scan`` pages of 10,000 rows, each page's rows written to a file as they arrive, which is
   the export an operator has (``gateway sql "SELECT * ... BETWEEN"`` pages the same way, by
   1,000; ``gateway store`` has only ``verify``) -> seconds;
3. **writer without a seed**: one client writing one-row transactions to another table of the
   source, back to back, each awaited (a separate process, so nothing here shares its GIL),
   for as long as the seed is allowed to take (1.5 x the export, at least 3 s) -> writes/s;
4. **seed**: an empty replica cluster started, then ``gateway channel add seed --from SOURCE
   --seed`` run (the command itself, its start included) while the same writer writes to the
   source; the clock stops when the replica's channel state is ``running`` (the seed's end
   installed: it streams after the snapshot's epoch). Then, off the clock, the replica's row
   count of the table is checked against the source's (they must be equal). -> seconds, the
   ratio seed / export (target <= 1.5), the writer's rate during the seed / without (target
   >= 0.8), and its longest pause: the longest gap between consecutive acknowledged writes
   inside the seed's window (target <= 100 ms).

    python benchmarks/bench_seed.py [--rows 1000000] [--appliers sqlite,none] [--quick]

``--quick``: 20,000 rows, SQLite applier only (for the test that the script runs).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_channels import EPOCH_MS, Cluster, _cpu_seconds, _ports  # noqa: E402

from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, row_insert  # noqa: E402
from gateway.v1 import statement_pb2, value_pb2  # noqa: E402

TABLE = "bench.rows"
LIVE = "bench.live"  # the writer's table: the seeded table's row count stays the loaded one
LOAD_TXN = 2000
EXPORT_PAGE = 10000
TARGET_RATIO, TARGET_RATE, TARGET_PAUSE_MS = 1.5, 0.8, 100.0


def _txn(base: int, n: int, value: str) -> list[statement_pb2.Statement]:
    ins = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="bench", table_name="rows"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)],
        fields=[statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)])
    for k in range(base, base + n):
        ins.records.add(key_values=[value_pb2.Value(int_value=k)],
                        after_values=[value_pb2.Value(string_value=value)])
    return [statement_pb2.Statement(insert=ins)]


async def load(api: list[str], rows: int, value_bytes: int, clients: int = 8) -> None:
    """Write ``rows`` rows to the source, ``LOAD_TXN`` per transaction."""
    nxt = [0]
    value = "x" * value_bytes

    async def one() -> None:
        async with AsyncGatewayClient(api, timeout=120) as c:
            while nxt[0] < rows:
                base = nxt[0]
                nxt[0] += LOAD_TXN
                await c.write(_txn(base, min(LOAD_TXN, rows - base), value))

    await asyncio.gather(*(one() for _ in range(clients)))


def export(api: list[str], out: Path) -> int:
    """Every row of ``TABLE`` read from the source in key order and written to ``out`` (each
    row's serialized bytes, length-prefixed); returns the row count."""
    n = 0
    start: int | None = None
    with GatewayClient(api, timeout=120) as c, open(out, "wb") as f:
        while True:
            resp = c.scan(TABLE, start=start, limit=EXPORT_PAGE, consistency="stale")
            for row in resp.rows:
                b = row.SerializeToString()
                f.write(len(b).to_bytes(4, "little"))
                f.write(b)
            n += len(resp.rows)
            if not resp.more or not resp.rows:
                return n
            start = resp.rows[-1].key_values[0].int_value + 1


def count(api: list[str], table: str = TABLE) -> int:
    """The rows of ``table`` on the node (stale reads: this node's store)."""
    n = 0
    start: int | None = None
    with GatewayClient(api, timeout=120) as c:
        while True:
            resp = c.scan(table, start=start, limit=EXPORT_PAGE, consistency="stale")
            n += len(resp.rows)
            if not resp.more or not resp.rows:
                return n
            start = resp.rows[-1].key_values[0].int_value + 1


def writer_main(api: str, key0: int) -> None:
    """The writer process: one-row writes to ``LIVE`` back to back until a line (or EOF) on
    stdin, then the monotonic time of every acknowledgement as JSON on stdout."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    acks: list[float] = []
    errors = 0
    k = key0
    with GatewayClient([api], timeout=30) as c:
        print("ready", flush=True)
        while not stop.is_set():
            try:
                c.write([row_insert(LIVE, {"id": k}, {"v": "w" * 10})])
                acks.append(time.monotonic())
            except GatewayError:
                errors += 1
            k += 1
    print(json.dumps({"acks": acks, "errors": errors}), flush=True)


class Writer:
    """The writer process, started and stopped from here."""

    def __init__(self, api: str, key0: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--writer", api, "--writer-key", str(key0)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("the writer process did not start")

    def stop(self) -> tuple[list[float], int]:
        out, _ = self.proc.communicate("stop\n", timeout=60)
        got = json.loads(out)
        return got["acks"], got["errors"]


def window(acks: list[float], t0: float, t1: float) -> tuple[float, float]:
    """Writes/s of ``acks`` inside ``[t0, t1]`` and the longest gap there (ms), the window's
    edges counting as acknowledgements (a writer stalled from ``t0`` on shows the stall)."""
    inside = [t for t in acks if t0 <= t <= t1]
    points = [t0, *inside, t1]
    gap = max(b - a for a, b in itertools.pairwise(points))
    return len(inside) / (t1 - t0), gap * 1000


def channel_state(api: str, name: str) -> str:
    try:
        with GatewayClient([api], timeout=5) as c:
            for ch in c.status(timeout=5).channels:
                if ch.name == name:
                    return ch.state
    except GatewayError:
        pass
    return ""


def caught_up(api: list[str], seconds: float = 600) -> None:
    """Wait until every applier of the node has applied its whole log (the load's SQLite
    apply would otherwise run on into the phases measured after it)."""
    deadline = time.monotonic() + seconds
    with GatewayClient(api, timeout=10) as c:
        while time.monotonic() < deadline:
            st = c.status(timeout=5)
            if all(a.lag_entries == 0 for a in st.appliers):
                return
            time.sleep(0.1)
    raise SystemExit(f"the source's appliers did not catch up within {seconds:g} s")


class Node(Cluster):
    """A single-node cluster as ``bench_channels.Cluster`` starts it, with ``extra`` lines
    added to its configuration (a diagnostic run without fsync)."""

    def __init__(self, root: Path, cid: int, appliers: str, extra: str = "") -> None:
        peer, api = (f"127.0.0.1:{p}" for p in _ports(2))
        self.peer, self.api = {1: peer}, {1: api}
        cfg = root / f"c{cid}n1.toml"
        cfg.write_text(f'node_id = 1\ncluster_id = {cid}\nlisten = "{peer}"\napi = "{api}"\n'
                       f'peers = "1={peer}"\ndata_dir = "{root}/c{cid}n1"\nlog_format = "text"\n'
                       f'log_level = "warning"\nepoch_ms = {EPOCH_MS}\n{extra}')
        log = open(root / f"c{cid}n1.log", "ab")  # noqa: SIM115
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--config", str(cfg)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(ROOT), os.environ.get("PYTHONPATH", "")]),
                 "GATEWAY_APPLIERS": "" if appliers == "none" else appliers},
            stdout=log, stderr=log)]


def wait_seeded(api: list[str], last_id: int, seconds: float = 3600) -> None:
    """Wait until the replica's channel runs after its seed. Until the seed's last row is
    there, that row is looked for (a stale read: cheap); only then is ``Status`` asked, every
    20 ms: it costs the node's loop a read of its log's retention, and asked that often
    through the whole seed it took a quarter of the replica's loop."""
    deadline = time.monotonic() + seconds
    with GatewayClient(api, timeout=10) as c:
        while c.get(TABLE, last_id, consistency="stale") is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"the seed did not end within {seconds:g} s")
            time.sleep(0.02)
    while channel_state(api[0], "seed") != "running":
        if time.monotonic() > deadline:
            raise SystemExit(f"the seed did not end within {seconds:g} s")
        time.sleep(0.02)


def run_config(rows: int, value_bytes: int, appliers: str, replica_extra: str = "",
               profile: Path | None = None) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-seed-"))
    src = Node(root, 1, appliers)
    rep: Node | None = None
    try:
        src.wait_leader()
        sapi = list(src.api.values())
        t = time.monotonic()
        asyncio.run(load(sapi, rows, value_bytes))
        caught_up(sapi)
        load_s = time.monotonic() - t
        w = Writer(sapi[0], 2 * 10**9)
        t = time.monotonic()
        exported = export(sapi, root / "export.bin")
        t1 = time.monotonic()
        export_s = t1 - t
        acks, errors2 = w.stop()
        x_rate, x_pause = window(acks, t, t1)
        if exported != rows:
            raise SystemExit(f"the export read {exported} rows of {rows}")
        budget = max(3.0, TARGET_RATIO * export_s)
        w = Writer(sapi[0], 0)
        c0, t0 = _cpu_seconds(src.procs), time.monotonic()
        time.sleep(budget)
        c1, t1 = _cpu_seconds(src.procs), time.monotonic()
        acks, errors0 = w.stop()
        base_rate, base_pause = window(acks, t0, t1)
        base_cpu = (c1 - c0) / (t1 - t0)

        rep = Node(root, 2, appliers, replica_extra)
        rep.wait_leader()
        rapi = list(rep.api.values())
        w = Writer(sapi[0], 10**9)
        spies = [] if profile is None else [
            subprocess.Popen(["py-spy", "record", "--pid", str(n.procs[0].pid), "--format", "raw",
                              "--threads", "--idle", "-r", "200", "-o",
                              str(profile / f"{side}-{appliers}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for side, n in (("source", src), ("replica", rep))]
        c0, r0, t0 = _cpu_seconds(src.procs), _cpu_seconds(rep.procs), time.monotonic()
        add = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "channel", "add", "seed", "--from", sapi[0],
             "--seed", "--target", rapi[0]], capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(ROOT), os.environ.get("PYTHONPATH", "")])})
        if add.returncode != 0:
            w.stop()
            raise SystemExit(f"channel add --seed failed: {add.stderr.strip() or add.stdout}")
        wait_seeded(rapi, rows - 1)
        c1, r1, t1 = _cpu_seconds(src.procs), _cpu_seconds(rep.procs), time.monotonic()
        acks, errors1 = w.stop()
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        seed_s = t1 - t0
        rate, pause = window(acks, t0, t1)
        got = count(rapi)
        if got != rows:
            raise SystemExit(f"the replica holds {got} rows of {TABLE} after its seed, the "
                             f"source {rows}")
        return {"load_s": load_s, "export_s": export_s, "seed_s": seed_s,
                "ratio": seed_s / export_s, "base_rate": base_rate, "base_pause": base_pause,
                "base_s": budget, "rate": rate, "pause": pause,
                "rate_ratio": rate / base_rate if base_rate else float("nan"),
                "errors": errors0 + errors1 + errors2, "x_rate": x_rate, "x_pause": x_pause,
                "base_cpu": base_cpu,
                "src_cpu": (c1 - c0) / seed_s, "rep_cpu": (r1 - r0) / seed_s}
    finally:
        if rep is not None:
            rep.close()
        src.close()
        shutil.rmtree(root, ignore_errors=True)


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--appliers", default="sqlite,none",
                   help="applier configurations to run, comma separated (none: no applier)")
    p.add_argument("--quick", action="store_true", help="20,000 rows, the SQLite applier only")
    p.add_argument("--replica-no-fsync", action="store_true",
                   help="diagnostic: the replica runs with fsync off (its disk writes then "
                        "compete less with the source's)")
    p.add_argument("--profile", type=Path,
                   help="diagnostic: py-spy records both nodes during the seed into this "
                        "directory (collapsed stacks, per thread, idle included)")
    p.add_argument("--writer", help=argparse.SUPPRESS)
    p.add_argument("--writer-key", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.writer:
        writer_main(args.writer, args.writer_key)
        return
    if args.quick:
        args.rows, args.appliers = 20_000, "sqlite"
    if args.rows <= 0:
        p.error(f"--rows: {args.rows} is not a positive number of rows")
    avg = os.getloadavg()
    print(f"load average before: {avg[0]:.2f} {avg[1]:.2f} {avg[2]:.2f}; {args.rows:,} rows of "
          f"{args.value_bytes} B values, 1 node per cluster", flush=True)
    print("| appliers | load (s) | export (s) | seed (s) | seed/export | writes/s without "
          "seed | writes/s during seed | during/without | longest pause without | longest "
          "pause during | source CPU without / during seed | replica CPU during seed | writes/s "
          "during export (/without) | longest pause during export | targets |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for appliers in args.appliers.split(","):
        r = run_config(args.rows, args.value_bytes, appliers,
                       "fsync = false\n" if args.replica_no_fsync else "", args.profile)
        targets = (f"ratio {_met(r['ratio'] <= TARGET_RATIO)}, rate "
                   f"{_met(r['rate_ratio'] >= TARGET_RATE)}, pause "
                   f"{_met(r['pause'] <= TARGET_PAUSE_MS)}")
        print(f"| {appliers} | {r['load_s']:.1f} | {r['export_s']:.2f} | {r['seed_s']:.2f} | "
              f"{r['ratio']:.2f}x | {r['base_rate']:,.0f} ({r['base_s']:.1f} s) | "
              f"{r['rate']:,.0f} | {r['rate_ratio']:.0%} | {r['base_pause']:.0f} ms | "
              f"{r['pause']:.0f} ms | {r['base_cpu']:.0%} / {r['src_cpu']:.0%} | "
              f"{r['rep_cpu']:.0%} | {r['x_rate']:,.0f} ({r['x_rate'] / r['base_rate']:.0%}) | "
              f"{r['x_pause']:.0f} ms | {targets} |", flush=True)
        if r["errors"]:
            print(f"  ({appliers}: the writer saw {r['errors']:.0f} failed write(s))")
    avg = os.getloadavg()
    print(f"load average after: {avg[0]:.2f} {avg[1]:.2f} {avg[2]:.2f}; targets: seed/export "
          f"<= {TARGET_RATIO}x, writes during >= {TARGET_RATE:.0%} of without, longest pause "
          f"<= {TARGET_PAUSE_MS:.0f} ms")


if __name__ == "__main__":
    main()
