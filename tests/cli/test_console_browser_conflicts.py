"""The console's conflicts view in headless Chromium for 1,000 conflicts on one table and 10
on another (made as tests/node/test_conflict_replay.py makes them, two in-process clusters):
the page shows 1,000 and 10 per table and cause, equal to ``/api/v1/conflicts`` and to
``gateway conflicts list``; a table opens its rows, the page counting them all and showing
the first page. Skipped as tests/cli/test_console_browser.py is."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from click.testing import CliRunner

from gateway.cli import main
from gateway.console.local import LocalConsole
from tests.node.conftest import leader_of, run, running
from tests.node.test_conflict_replay import make_conflicts
from tests.node.test_conflicts_between_clusters import _pair

from .test_console_browser import _browser_or_skip

MANY, FEW = 1000, 10

#: every per-table-and-cause row of the conflicts view -> {cluster/table/cause: count}
_READ = """
const out = {};
for (const r of document.querySelectorAll("tr[data-table][data-cause]"))
  out[`${r.dataset.cluster}/${r.dataset.table}/${r.dataset.cause}`] =
    r.querySelector("[data-field=count]").textContent;
return out;
"""


def _api(url: str) -> dict:
    with urllib.request.urlopen(url + "/api/v1/conflicts", timeout=30) as r:
        return json.loads(r.read())


def test_the_conflicts_view_shows_a_thousand_and_ten_per_table_and_cause(tmp_path):
    driver = _browser_or_skip()
    a, b = _pair(tmp_path, "NDB$EPOCH")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await make_conflicts(a, b, na, nb, MANY, FEW)
            with LocalConsole([a.api], interval=0.5) as con:
                await asyncio.to_thread(driver.get, con.url + "/#conflicts")
                want = {"1/shop.items/DATA_IN_CONFLICT": str(MANY),
                        "1/shop.other/DATA_IN_CONFLICT": str(FEW)}
                seen: list[dict] = []
                api: dict[str, str] = {}
                # the console learns of cluster 2 (the SECONDARY) through cluster 1's channel,
                # so its rows may come a poll later: wait for the whole page to equal the API
                for _ in range(300):
                    seen.append(await asyncio.to_thread(driver.execute_script, _READ))
                    if {k: v for k, v in seen[-1].items() if k.startswith("1/")} == want:
                        doc = await asyncio.to_thread(_api, con.url)
                        api = {f"{c['cluster_id']}/{t['table']}/{cause}": str(n)
                               for c in doc["clusters"] for t in c["tables"]
                               for cause, n in t["causes"].items()}
                        if seen[-1] == api and any(k.startswith("2/") for k in api):
                            break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError(f"the page showed {seen[-1]}, the API {api}")
                driver.save_screenshot(str(tmp_path / "console-conflicts-1000.png"))
                out = await asyncio.to_thread(CliRunner().invoke, main, [
                    "conflicts", "list", "--target", a.api, "--limit", "1"])
                assert out.exit_code == 0, out.output
                cli = {f"1/{t}/{cause}": n for t, cause, n in (
                    line.split("\t") for line in out.output.splitlines()[:2])}
                assert cli == want
                assert out.output.splitlines()[2] == f"{MANY + FEW} conflict(s) in 2 table(s)"

                # open shop.items: every row counted, the first page of 100 shown
                await asyncio.to_thread(driver.execute_script, """
                  for (const a of document.querySelectorAll("tr[data-cluster='1'] a"))
                    if (a.textContent === "shop.items") { a.click(); return; }""")
                got = ""
                for _ in range(300):
                    got = await asyncio.to_thread(driver.execute_script, """
                      const m = document.querySelector("#conflict-rows [data-field=matched]");
                      return m ? [m.textContent,
                        document.querySelectorAll("#conflict-rows tr[data-id]").length] : "";
                    """)
                    if got:
                        break
                    await asyncio.sleep(0.1)
                assert got == [f"{MANY} of {MANY} rows match", 100], got

    try:
        run(go(), 300)
    finally:
        driver.quit()
