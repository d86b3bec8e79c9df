"""``gateway console`` (docs/console.md): page load and API latency for a 3-cluster ring.

Three clusters (1: three nodes, 2 and 3: one node each; fsync on, the SQLite applier on, the
harness's settings) replicate both ways round the ring (six channels, as
tests/cli/test_console_browser.py builds them); a console runs in this process polling them
every 2 s (the default). Then:

1. **page load**: headless Chromium (``/usr/bin/chromium`` through Selenium) opens the page
   ``--loads`` times (a fresh browser each time, nothing cached): the time from navigation
   start to the topology view rendered with every cluster and channel (the page's own
   ``performance.now()`` when it first rendered) -> median and worst, target < 1 s;
2. **API under write load**: ``--writers`` client threads per cluster write one-row
   transactions back to back to every cluster while one reader requests, in turn,
   ``/api/v1/topology``, ``/appliers``, ``/conflicts``, a channel's ``/history`` and an
   exceptions table's rows, for ``--seconds`` -> p50/p99 per endpoint, target p99 < 100 ms;
   the writes/s reached are printed beside.

    python3 benchmarks/bench_console.py [--loads 5] [--seconds 30] [--writers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.client import GatewayError, row_insert  # noqa: E402
from gateway.console.local import LocalConsole  # noqa: E402
from tests.harness.cluster import wait_until  # noqa: E402
from tests.harness.clusters import MultiCluster, Topology, channel_name  # noqa: E402


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def _ring(root: Path) -> MultiCluster:
    mc = MultiCluster(root, Topology("ring", (3, 1, 1)))
    mc.start()
    for replica, source in ((1, 2), (2, 3), (3, 1)):
        mc.admin(replica, "add_channel", channel_name(source), mc.apis(source))
    wait_until("six running channels", lambda: all(
        (st := mc.status(c)) is not None and len(st.channels) == 2
        and all(ch.state == "running" for ch in st.channels) for c in (1, 2, 3)), 120, 0.5)
    return mc


def page_loads(url: str, n: int) -> list[float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    out = []
    for _ in range(n):
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu", "--window-size=1400,1100"):
            opts.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            driver.get(url + "/#topology")
            wait_until("rendered", lambda d=driver: d.execute_script(
                "return window.consoleFirstRender && document.querySelectorAll("
                "'#channels-table tr[data-channel]').length === 6"), 30, 0.01)
            out.append(driver.execute_script("return window.consoleFirstRender") / 1000)
            if os.environ.get("BENCH_CONSOLE_DETAIL"):
                print(driver.execute_script(
                    "return performance.getEntries().map(e => e.name.split('/').pop() + ' '"
                    " + Math.round(e.startTime) + '+' + Math.round(e.duration)).join(', ')"))
        finally:
            driver.quit()
    return out


def api_under_writes(mc: MultiCluster, url: str, seconds: float, writers: int
                     ) -> tuple[dict[str, list[float]], float]:
    stop = threading.Event()
    written = [0]
    lock = threading.Lock()

    def write(cid: int, w: int) -> None:
        with mc.client(cid) as c:
            k = 0
            while not stop.is_set():
                try:
                    c.write([row_insert("bench.items", {"id": cid * 10**9 + w * 10**7 + k},
                                        {"v": "x" * 100})])
                except GatewayError:
                    continue
                k += 1
                with lock:
                    written[0] += 1

    threads = [threading.Thread(target=write, args=(cid, w), daemon=True)
               for cid in (1, 2, 3) for w in range(writers)]
    for t in threads:
        t.start()
    paths = {"topology": "/api/v1/topology", "appliers": "/api/v1/appliers",
             "conflicts": "/api/v1/conflicts", "history": "/api/v1/channels/1/from3/history",
             "rows": "/api/v1/conflicts/1/bench.items?limit=100"}
    times: dict[str, list[float]] = {k: [] for k in paths}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for name, path in paths.items():
            s = time.perf_counter()
            with urllib.request.urlopen(url + path, timeout=30) as r:
                r.read()
            times[name].append(time.perf_counter() - s)
    elapsed = time.monotonic() - t0
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return times, written[0] / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--writers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mc = _ring(Path(d) / "ring")
        try:
            with LocalConsole([mc.apis(1)[0]], conflict_tables=["bench.items"]) as con:
                wait_until("the console found three clusters", lambda: len(
                    con.poller.snapshot().clusters) == 3 and all(
                    len(con.poller.snapshot().histories.get((c, n), [])) >= 2
                    for c, n in ((1, "from3"), (1, "from2"))), 60, 0.2)
                print(f"load before: {os.getloadavg()[0]:.1f}")
                loads = page_loads(con.url, args.loads)
                print(f"page load (navigation start -> topology rendered, {len(loads)} fresh "
                      f"browsers): median {statistics.median(loads) * 1000:.0f} ms, worst "
                      f"{max(loads) * 1000:.0f} ms (target < 1000 ms)")
                times, wps = api_under_writes(mc, con.url, args.seconds, args.writers)
                print(f"API under writes ({3 * args.writers} writers, {wps:.0f} writes/s "
                      f"over the 3 clusters, {args.seconds:.0f} s):")
                for name, xs in times.items():
                    print(f"  {name:10s} n={len(xs):5d} p50 {_pct(xs, 50) * 1000:6.1f} ms  "
                          f"p99 {_pct(xs, 99) * 1000:6.1f} ms (target p99 < 100 ms)")
                print(f"load after: {os.getloadavg()[0]:.1f}")
        finally:
            mc.close()


if __name__ == "__main__":
    main()
