"""Channel lag figures (docs/replication.md, "Channel lag"): how fast a paused channel's lag
falls back after resume, and an idle source's lag over a window.

Two one-node clusters as real processes on loopback (the harness's settings: fsync on, the
SQLite applier on) replicating both ways; the figures are cluster 2's channel ``from1`` as
its leader's Status gives them (the numbers the page, the API and Prometheus show), read
every ``--sample`` seconds.

1. **idle**: after one write and the channel caught up, no writes for ``--idle-seconds``
   (default 60; the issue's window is 10 min: ``--idle-seconds 600``) -> lag seconds p50,
   p99 and max, lag epochs max, target max <= 1 s;
2. **resume**: ``--writers`` client threads write one-row transactions back to back to
   cluster 1 throughout; the channel is paused for ``--pause-seconds``, then resumed ->
   the lag at resume (epochs, seconds) and the time from resume until the lag is back
   under 1 s (no epoch behind, the source heard from), target within 30 s.

    python3 benchmarks/bench_lag.py [--idle-seconds 60] [--pause-seconds 10] [--writers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.client import GatewayError, row_insert  # noqa: E402
from tests.harness.cluster import wait_until  # noqa: E402
from tests.harness.clusters import MultiCluster, Topology  # noqa: E402

CHANNEL = "from1"


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def _channel(mc: MultiCluster):
    st = mc.status(2)
    if st is None:
        return None
    return next((ch for ch in st.channels if ch.name == CHANNEL), None)


def _caught_up(mc: MultiCluster) -> bool:
    ch = _channel(mc)
    return ch is not None and ch.state == "running" and ch.lag_epochs == 0 \
        and not ch.since_last_heard and ch.lag_seconds < 1.0


def idle(mc: MultiCluster, seconds: float, sample: float) -> tuple[list[float], int, int]:
    """(lag seconds samples, max lag epochs, samples marked since-last-heard)."""
    secs: list[float] = []
    epochs = silent = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        ch = _channel(mc)
        if ch is not None:
            secs.append(ch.lag_seconds)
            epochs = max(epochs, ch.lag_epochs)
            silent += bool(ch.since_last_heard)
        time.sleep(sample)
    return secs, epochs, silent


def resume(mc: MultiCluster, pause: float, writers: int, sample: float
           ) -> tuple[float, int, float, float]:
    """(time from resume to lag under 1 s, lag epochs and seconds at resume, writes/s)."""
    stop = threading.Event()
    written = [0]
    lock = threading.Lock()

    def write(w: int) -> None:
        with mc.client(1) as c:
            k = 0
            while not stop.is_set():
                try:
                    c.write([row_insert("bench.lag", {"id": w * 10**9 + k}, {"v": "x" * 100})])
                except GatewayError:
                    continue
                k += 1
                with lock:
                    written[0] += 1

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(writers)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    try:
        with mc.client(2) as c:
            c.channel_action(CHANNEL, "pause")
            time.sleep(pause)
            ch = _channel(mc)
            at_resume = (ch.lag_epochs, ch.lag_seconds) if ch is not None else (0, 0.0)
            c.channel_action(CHANNEL, "resume")
        t0 = time.monotonic()
        while not _caught_up(mc):
            if time.monotonic() - t0 > 300:
                raise SystemExit("the lag was not back under 1 s within 300 s of the resume")
            time.sleep(sample)
        back = time.monotonic() - t0
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    return back, at_resume[0], at_resume[1], written[0] / (time.monotonic() - t_start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--pause-seconds", type=float, default=10.0)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--sample", type=float, default=0.2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mc = MultiCluster(Path(d) / "pair", Topology("pair", (1, 1)))
        try:
            mc.start()
            with mc.client(1) as c:
                c.write([row_insert("bench.lag", {"id": -1}, {"v": "first"})])
            wait_until("the channel caught up", lambda: _caught_up(mc), 120, 0.2)
            print(f"load before: {os.getloadavg()[0]:.1f}")
            secs, epochs, silent = idle(mc, args.idle_seconds, args.sample)
            print(f"idle source, {args.idle_seconds:.0f} s, {len(secs)} samples: lag p50 "
                  f"{_pct(secs, 50):.3f} s, p99 {_pct(secs, 99):.3f} s, max {max(secs):.3f} s "
                  f"(target <= 1 s: {'met' if max(secs) <= 1.0 else 'MISSED'}); lag epochs "
                  f"max {epochs}; marked since-last-heard {silent} times")
            print(f"load after idle: {os.getloadavg()[0]:.1f}")
            back, e, s, wps = resume(mc, args.pause_seconds, args.writers, args.sample)
            print(f"paused {args.pause_seconds:.0f} s under writes ({args.writers} writers, "
                  f"{wps:.0f} writes/s on the source): lag at resume {e} epochs, {s:.3f} s; "
                  f"back under 1 s {back:.2f} s after resume "
                  f"(target within 30 s: {'met' if back <= 30 else 'MISSED'})")
            print(f"load after: {os.getloadavg()[0]:.1f}")
        finally:
            mc.close()


if __name__ == "__main__":
    main()
