"""The console page in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``
through Selenium) for three clusters replicating in a ring both ways: clusters 1 (three
nodes), 2 and 3 (one node each); the harness's ring gives the channels 3->1, 1->2, 2->3 and
the test adds 2->1, 3->2, 1->3, so six channels, one each way between every two clusters.
The console is given one address, a follower's of cluster 1, and finds the leader and the
other clusters through the channels. With writes
stopped and the figures settled, every cluster, node and channel is on the page, and each
figure equals the JSON API's and ``gateway status --format json``'s on that cluster's
leader. A screenshot of each view is saved under the test's tmp dir (and into
``GATEWAY_SCREENSHOTS`` when set). Read-only, the page has no action buttons; a console
with an admin token shows them, and a pause asks for confirmation, then is done.

Skipped only when Chromium or its driver is missing and ``GATEWAY_REQUIRE_CHROMIUM`` is not
set (scripts/test.sh installs them and sets it)."""

from __future__ import annotations

import datetime
import json
import os
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import row_insert
from gateway.console.local import LocalConsole
from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster, Topology, channel_name

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
VIEWS = ("topology", "channels", "appliers", "conflicts")


def _browser_or_skip():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        if os.environ.get("GATEWAY_REQUIRE_CHROMIUM"):
            pytest.fail(f"GATEWAY_REQUIRE_CHROMIUM is set but {', '.join(missing)} is missing")
        pytest.skip(f"headless Chromium test: {', '.join(missing)} missing (apt-get install "
                    f"chromium chromium-driver; pip install selenium)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1100"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _api(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _cli_status(address: str) -> dict:
    res = CliRunner().invoke(main, ["status", "--format", "json", "--target", address])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


_READ_TOPOLOGY = """
const out = {clusters: {}, channels: {}};
for (const card of document.querySelectorAll("div.card[data-cluster]")) {
  const nodes = {};
  for (const r of card.querySelectorAll("tr[data-node]"))
    nodes[r.dataset.node] = r.querySelector("[data-field=role]").textContent;
  out.clusters[card.dataset.cluster] = {
    leader_id: card.querySelector("[data-field=leader_id]").textContent, nodes};
}
for (const r of document.querySelectorAll("#channels-table tr[data-channel]")) {
  const cell = {};
  for (const f of arguments[0]) cell[f] = r.querySelector(`[data-field=${f}]`).textContent;
  out.channels[r.dataset.cluster + "/" + r.dataset.channel] = cell;
}
return out;
"""

#: rows matching arguments[0] -> {cluster/<data-arguments[1]>: text of field arguments[2]}
_READ_ROWS = """
const out = {};
for (const r of document.querySelectorAll(arguments[0]))
  out[r.dataset.cluster + "/" + r.dataset[arguments[1]]] =
    r.querySelector(`[data-field=${arguments[2]}]`).textContent;
return out;
"""

#: The channel figures compared between the page, the API and the CLI. ``lag_seconds`` of
#: a caught-up channel is the time since its source was last heard from (docs/replication.md,
#: "Channel lag"): it moves between two reads, so the page's equals the API's (the same
#: poll) and the CLI's is compared on ``since_last_heard`` (both at the idle level).
FIELDS = ("state", "applied_epoch", "source_epoch", "lag_epochs", "transactions_applied",
          "replicated_time")


def _utc(ns: int) -> str:
    """``ns`` as the page shows it: JavaScript's toISOString of the whole milliseconds."""
    ms = int(ns) // 1_000_000
    t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def _figures(ch: dict) -> dict:
    out = {f: str(ch[f]) for f in FIELDS if f != "replicated_time"}
    out["replicated_time"] = _utc(ch["replicated_time_ns"])
    out["since_last_heard"] = "source silent: estimate" if ch["since_last_heard"] else ""
    return out


@pytest.fixture
def ring(tmp_path):
    with MultiCluster(tmp_path / "ring", Topology("ring", (3, 1, 1))) as mc:
        mc.start()
        for replica, source in ((1, 2), (2, 3), (3, 1)):  # the other way round the ring
            mc.admin(replica, "add_channel", channel_name(source), mc.apis(source))
        for cid in (1, 2, 3):
            with mc.client(cid) as c:
                for k in range(5):
                    c.write([row_insert("shop.items", {"id": cid * 100 + k}, {"v": f"c{cid}"})])

        def settled():
            sts = [mc.status(cid) for cid in (1, 2, 3)]
            if any(st is None or st.role != "leader" or len(st.channels) != 2 for st in sts):
                return None
            if not all(ch.state == "running" and ch.lag_epochs == 0 and ch.replicated_time_ns
                       for st in sts for ch in st.channels):
                return None
            for cid in (1, 2, 3):
                with mc.client(cid) as c:
                    if len(c.scan("shop.items", limit=100).rows) != 15:
                        return None
            return True

        wait_until("six running channels, each caught up", settled, 120, 0.5)
        yield mc


def test_the_page_shows_every_cluster_and_channel_with_the_apis_and_clis_figures(
        ring, tmp_path):
    driver = _browser_or_skip()
    shots = [tmp_path / "screenshots"]
    if os.environ.get("GATEWAY_SCREENSHOTS"):
        shots.append(Path(os.environ["GATEWAY_SCREENSHOTS"]))
    for d in shots:
        d.mkdir(parents=True, exist_ok=True)
    # one address, a follower's: the console follows it to the leader, then the channels
    follower = next(a for i, a in enumerate(ring.apis(1), 1)
                    if (st := ring.status(1, i)) is not None and st.role == "follower")
    con = LocalConsole([follower], conflict_tables=["shop.items"], interval=0.5)
    try:
        con.start()
        wait_until("the console found the three clusters' leaders",
                   lambda: sorted(c for c, v in con.poller.snapshot().clusters.items()
                                  if v.status is not None and v.status.role == "leader")
                   == [1, 2, 3], 60, 0.2)

        # The same moment: the console's newest poll matches what the CLI prints now (the
        # figures are settled, so they stay so); then the poller stops, the page reads it.
        leaders = {}

        def same() -> bool:
            con.poller.poll_once()
            topo = _api(con.url + "/api/v1/topology")
            for c in topo["clusters"]:
                leaders[c["cluster_id"]] = c["leader_api"]
            cli = {cid: _cli_status(addr) for cid, addr in leaders.items()}
            got = {(ch["cluster_id"], ch["name"]): _figures(ch) for ch in topo["channels"]}
            want = {(cid, ch["name"]): _figures(ch) for cid, st in cli.items()
                    for ch in st["channels"]}
            return len(got) == 6 and got == want

        con.poller.stop()
        wait_until("the console's figures equal gateway status's", same, 60, 0.5)
        topo = _api(con.url + "/api/v1/topology")
        cli = {cid: _cli_status(addr) for cid, addr in leaders.items()}

        driver.get(con.url + "/#topology")
        wait_until("the topology view rendered", lambda: driver.find_element(
            "css selector", "body").get_attribute("data-loaded") == "topology", 30, 0.1)
        for d in shots:
            driver.save_screenshot(str(d / "console-topology.png"))
        # the page re-renders every poll interval: each view is read in one script run
        seen = driver.execute_script(
            _READ_TOPOLOGY, [*FIELDS, "since_last_heard", "lag_seconds", "direction"])
        assert sorted(seen["clusters"]) == ["1", "2", "3"]
        for c in topo["clusters"]:
            card = seen["clusters"][str(c["cluster_id"])]
            assert card["leader_id"] == c["leader_id"] == str(cli[c["cluster_id"]]["leader_id"])
            assert card["nodes"] == {n["node_id"]: n["role"] for n in c["nodes"]}
            st = cli[c["cluster_id"]]
            assert card["nodes"] == {str(m["node_id"]): "leader"
                                     if m["node_id"] == st["leader_id"] else "follower"
                                     for m in st["members"]}
        assert len(topo["clusters"][0]["nodes"]) == 3

        page = {(int(k.split("/")[0]), k.split("/", 1)[1]): v
                for k, v in seen["channels"].items()}
        assert sorted(page) == [(1, "from2"), (1, "from3"), (2, "from1"), (2, "from3"),
                                (3, "from1"), (3, "from2")]
        for (cid, name), cell in page.items():
            assert cell["direction"] == f"{name[4:]} -> {cid}"
        api = {(ch["cluster_id"], ch["name"]): ch for ch in topo["channels"]}
        want = {(cid, ch["name"]): _figures(ch) for cid, st in cli.items()
                for ch in st["channels"]}
        for key, cell in page.items():
            shown = {f: cell[f] for f in (*FIELDS, "since_last_heard")}
            assert shown == _figures(api[key]) == want[key], key
            assert cell["lag_seconds"] == f"{api[key]['lag_seconds']:.3f}", key

        driver.get(con.url + "/#channels")
        wait_until("the channels view rendered", lambda: driver.find_element(
            "css selector", "body").get_attribute("data-loaded") == "channels", 30, 0.1)
        for d in shots:
            driver.save_screenshot(str(d / "console-channels.png"))
        hist = _api(con.url + "/api/v1/channels/1/from2/history")
        samples, lines = driver.execute_script(
            "return [document.querySelector('[data-field=samples]').textContent,"
            " document.querySelectorAll('svg.chart polyline').length]")
        assert samples.startswith(f"{len(hist['samples'])} samples") and lines == 2

        driver.get(con.url + "/#appliers")
        wait_until("the appliers view rendered", lambda: driver.find_element(
            "css selector", "body").get_attribute("data-loaded") == "appliers", 30, 0.1)
        for d in shots:
            driver.save_screenshot(str(d / "console-appliers.png"))
        shown = driver.execute_script(_READ_ROWS, "tr[data-applier]", "applier",
                                      "dead_letters")
        assert shown == {f"{cid}/{a['name']}": str(a["dead_letters"])
                         for cid, st in cli.items() for a in st["appliers"]}
        # each applier's schema position: its tables' versions as of its position
        shown = driver.execute_script(_READ_ROWS, "tr[data-applier]", "applier", "schema")
        assert shown == {f"{cid}/{a['name']}": ", ".join(
            f"{t['table']} v{t['version']}" + (" (dropped)" if t.get("dropped") else "")
            for t in a.get("schema", [])) for cid, st in cli.items() for a in st["appliers"]}
        assert not driver.find_elements("css selector", "button[data-action]")  # read-only

        driver.get(con.url + "/#conflicts")
        wait_until("the conflicts view rendered", lambda: driver.find_element(
            "css selector", "body").get_attribute("data-loaded") == "conflicts", 30, 0.1)
        for d in shots:
            driver.save_screenshot(str(d / "console-conflicts.png"))
        doc = _api(con.url + "/api/v1/conflicts")
        shown = driver.execute_script(_READ_ROWS, "#view-conflicts tr[data-table]", "table",
                                      "count")
        assert shown == {f"{c['cluster_id']}/shop.items": str(c["tables"][0]["total"])
                         for c in doc["clusters"]}
        for d in shots:
            assert {f"console-{v}.png" for v in VIEWS} <= {p.name for p in d.glob("*.png")}
        # with an admin token the page offers the actions; a pause asks, then happens
        with LocalConsole([follower], admin_token="admin", interval=0.5) as admin:
            wait_until("the admin console found the clusters", lambda: len(
                admin.poller.snapshot().clusters) == 3, 60, 0.2)
            driver.get(admin.url + "/#topology")
            button = "tr[data-cluster='1'][data-channel='from2'] button[data-action=pause]"
            wait_until("the pause button", lambda: driver.execute_script(
                f"return document.querySelector(\"{button}\") !== null"), 30, 0.1)
            driver.execute_script(f"document.querySelector(\"{button}\").click()")
            confirm = driver.switch_to.alert
            assert "pause channel from2 of cluster 1?" in confirm.text
            confirm.accept()
            wait_until("the result shown", lambda: _alert_text(driver), 30, 0.1)
            wait_until("gateway status shows from2 paused", lambda: any(
                ch["name"] == "from2" and ch["state"] == "paused"
                for ch in _cli_status(leaders[1])["channels"]), 30, 0.2)
            for d in shots:
                driver.save_screenshot(str(d / "console-topology-admin.png"))
    finally:
        driver.quit()
        con.close()


def _alert_text(driver) -> str | None:
    """Accept an open alert and return its text (None when none is open)."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
        text = alert.text
        alert.accept()
        return text
    except NoAlertPresentException:
        return None
