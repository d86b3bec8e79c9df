"""A paused channel's lag as the console page shows it in headless Chromium, beside the JSON
API and the replica's Prometheus metrics (docs/replication.md, "Channel lag"): two in-process
clusters, A -> B. Caught up, the page shows the idle level; paused while A takes writes, once
the channel heard of A's newer epoch every later read of the page, the API and Prometheus
shows a lag above 0 epochs, its seconds rising from read to read while nothing is applied;
resumed, the page falls back to the idle level. Only the order of events is asserted.
Skipped as tests/cli/test_console_browser.py is."""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request

from gateway.client import AsyncGatewayClient
from gateway.console.local import LocalConsole
from tests.node.conftest import leader_of, run, running, wait_for
from tests.node.test_channel_lag import IDLE_BOUND_S, _caught_up, _pair, _prom, _rows, _write

from .test_console_browser import _browser_or_skip

#: the fromA row's fields, read in one script run (the page re-renders every poll)
_READ = """
const r = document.querySelector("#channels-table tr[data-cluster='2'][data-channel='fromA']");
const out = {};
for (const f of ["state", "lag_epochs", "lag_seconds"])
  out[f] = r ? r.querySelector(`[data-field=${f}]`).textContent : "";
return out;
"""


def _api(url: str) -> dict:
    with urllib.request.urlopen(url + "/api/v1/topology", timeout=30) as r:
        doc = json.loads(r.read())
    (ch,) = [c for c in doc["channels"] if c["name"] == "fromA"]
    return ch


def _page(driver) -> dict[str, str]:
    """The fromA row's state, lag_epochs and lag_seconds as shown."""
    return driver.execute_script(_READ)


def test_the_page_shows_a_paused_channel_s_lag_rising_and_back_at_idle_after_resume(
        tmp_path):
    driver = _browser_or_skip()
    a, (b,) = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, 0)
            await _caught_up(b, nb, 1)
            with LocalConsole([b.api], interval=0.2) as con:
                await asyncio.to_thread(driver.get, con.url + "/#topology")

                async def shown(pred, what: str) -> dict[str, str]:
                    seen: list[dict[str, str]] = []

                    async def ok() -> bool:
                        seen.append(await asyncio.to_thread(_page, driver))
                        return pred(seen[-1])
                    for _ in range(300):
                        if await ok():
                            return seen[-1]
                        await asyncio.sleep(0.1)
                    raise AssertionError(f"{what}: the page showed {seen[-3:]}")

                idle = await shown(lambda p: p["state"] == "running" and p["lag_epochs"] == "0"
                                   and float(p["lag_seconds"]) < IDLE_BOUND_S, "idle level")
                async with AsyncGatewayClient(b.api) as cb:
                    await cb.channel_action("fromA", "pause")
                await wait_for(lambda: nb.status().channels[0].state == "paused", 10,
                               "paused")
                applied = nb.status().channels[0].applied_epoch
                for k in range(1, 6):
                    await _write(a, k)
                await wait_for(lambda: na.sm.newest_sealed[0] > applied, 10, "source sealed")
                # from the moment the page shows the source's newer epoch ...
                first = await shown(lambda p: p["state"] == "paused" and p["lag_epochs"] != "0",
                                    "the page shows the paused channel behind")
                page, api, prom = [first], [], []
                for _ in range(5):  # ... no read of any of the three shows 0
                    await asyncio.sleep(0.5)
                    page.append(await asyncio.to_thread(_page, driver))
                    api.append(await asyncio.to_thread(_api, con.url))
                    p = _prom(nb)
                    prom.append((p['gateway_channel_lag_epochs{channel="fromA"}'],
                                 p['gateway_channel_lag_seconds{channel="fromA"}']))
                assert _rows(nb) == 1  # nothing was applied while they were read
                assert all(p["state"] == "paused" and int(p["lag_epochs"]) > 0 for p in page)
                assert all(c["state"] == "paused" and int(c["lag_epochs"]) > 0 for c in api)
                assert all(e > 0 for e, _ in prom), prom
                for secs in ([float(p["lag_seconds"]) for p in page],
                             [c["lag_seconds"] for c in api], [s for _, s in prom]):
                    assert all(x < y for x, y in itertools.pairwise(secs)), secs
                assert float(page[0]["lag_seconds"]) > float(idle["lag_seconds"])
                async with AsyncGatewayClient(b.api) as cb:
                    await cb.channel_action("fromA", "resume")
                await _caught_up(b, nb, 6)
                back = await shown(lambda p: p["state"] == "running"
                                   and p["lag_epochs"] == "0", "the page shows it caught up")
                assert float(back["lag_seconds"]) < IDLE_BOUND_S, back
                driver.save_screenshot(str(tmp_path / "console-lag-resumed.png"))

    try:
        run(go(), 180)
    finally:
        driver.quit()
