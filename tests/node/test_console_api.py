"""The console's JSON API (``gateway console``, docs/console.md) against two in-process
clusters replicating both ways with a conflict recorded: topology and history from the
clusters' Status, conflicts per table and cause with filterable rows, and actions only with
an admin token, a CSRF token, a same-origin request and ``confirm: true``."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from gateway.client import AsyncGatewayClient, GatewayClient, row_insert, row_update
from gateway.console.local import LocalConsole

from .conftest import leader_of, run, running, wait_for
from .test_conflicts_between_clusters import _exceptions, _pair, _rows


def _get(url: str, host: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def _conflict(a, b, na, nb) -> None:
    """One update of shop.items id 1 on each side while both channels are paused: A (the
    PRIMARY) records B's as a conflict."""
    async def write(cfg, stmts):
        async with AsyncGatewayClient(cfg.api) as c:
            await c.write(stmts)

    await write(a, [row_insert("shop.items", {"id": 1}, {"v": "base"}),
                    row_insert("shop.items", {"id": 2}, {"v": "base"})])
    await wait_for(lambda: len(_rows(nb)) == 2, 20, "B has the rows")
    await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >=
                   max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])), 20,
                   "A knows B applied them")
    ca, cb = GatewayClient(a.api, timeout=20), GatewayClient(b.api, timeout=20)
    await asyncio.to_thread(lambda: ca.channel_action("fromB", "pause"))
    await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
    await wait_for(lambda: na.status().channels[0].state == "paused"
                   and nb.status().channels[0].state == "paused", 10, "paused")
    await write(a, [row_update("shop.items", {"id": 1}, {"v": "A1"}),
                    row_update("shop.items", {"id": 2}, {"v": "A2"})])
    await write(b, [row_update("shop.items", {"id": 1}, {"v": "B1"}),
                    row_update("shop.items", {"id": 2}, {"v": "B2"})])
    await asyncio.to_thread(lambda: ca.channel_action("fromB", "resume"))
    await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
    await wait_for(lambda: len(_exceptions(na)) == 2, 30, "the conflicts recorded")


def test_console_api_shows_both_clusters_and_their_conflicts_read_only(tmp_path):
    a, b = _pair(tmp_path, "NDB$EPOCH")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _conflict(a, b, na, nb)
            # one target: cluster 2 is found through cluster 1's channel source
            with LocalConsole([a.api], conflict_tables=["shop.items"], interval=0.2) as con:
                await wait_for(lambda: sorted(con.poller.snapshot().clusters) == [1, 2], 20,
                               "the console found both clusters")
                await wait_for(lambda: len(con.poller.snapshot().histories.get(
                    (1, "fromB"), [])) >= 3, 20, "samples of fromB")
                code, topo = await asyncio.to_thread(_get, con.url + "/api/v1/topology")
                assert code == 200
                assert [c["cluster_id"] for c in topo["clusters"]] == [1, 2]
                for c in topo["clusters"]:
                    assert [n["role"] for n in c["nodes"]] == ["leader"]
                    assert c["error"] == ""
                assert [(ch["cluster_id"], ch["name"], ch["direction"])
                        for ch in topo["channels"]] == [(1, "fromB", "2 -> 1"),
                                                         (2, "fromA", "1 -> 2")]
                st = na.status().channels[0]
                ch1 = topo["channels"][0]
                assert ch1["applied_epoch"] == str(st.applied_epoch)
                assert ch1["conflicts"]  # MySQL's counters, as Status has them

                code, hist = await asyncio.to_thread(
                    _get, con.url + "/api/v1/channels/1/fromB/history")
                assert code == 200 and len(hist["samples"]) >= 3
                ts = [s["t"] for s in hist["samples"]]
                assert ts == sorted(ts)
                assert hist["samples"][-1]["transactions_applied"] != ""
                code, _ = await asyncio.to_thread(
                    _get, con.url + "/api/v1/channels/1/nosuch/history")
                assert code == 404

                code, doc = await asyncio.to_thread(_get, con.url + "/api/v1/conflicts")
                assert code == 200
                by_cluster = {c["cluster_id"]: c for c in doc["clusters"]}
                (table,) = by_cluster[1]["tables"]
                want = {}
                for r in _exceptions(na):
                    cause = r["NDB$CFT_CAUSE"].string_value
                    want[cause] = want.get(cause, 0) + 1
                assert table["table"] == "shop.items" and table["total"] == 2
                assert table["causes"] == want and table["error"] == ""
                # the exceptions table replicates like any other: B shows what B holds
                assert by_cluster[2]["tables"][0]["total"] == len(_exceptions(nb))

                cause = next(iter(want))
                code, rows = await asyncio.to_thread(
                    _get, con.url + f"/api/v1/conflicts/1/shop.items?cause={cause}&key=id=2")
                assert code == 200 and rows["total"] == 2 and rows["matched"] == 1
                (row,) = rows["rows"]
                assert row["key"] == {"id": 2} and row["cause"] == cause
                assert row["old"]["v"] == "A2" and row["new"]["v"] == "B2"
                code, rows = await asyncio.to_thread(
                    _get, con.url + "/api/v1/conflicts/1/shop.items?limit=1")
                assert code == 200 and rows["matched"] == 2 and len(rows["rows"]) == 1
                code, err = await asyncio.to_thread(
                    _get, con.url + "/api/v1/conflicts/1/items?limit=1")
                assert code == 400 and "schema.table" in err["error"]

                code, sess = await asyncio.to_thread(_get, con.url + "/api/v1/session")
                assert sess == {"admin": False, "csrf": "", "interval": 0.2}
                code, err = await asyncio.to_thread(
                    _post, con.url + "/api/v1/channels/1/fromB/pause", {"confirm": True}, {})
                assert code == 403 and "--admin-token" in err["error"]
                code, err = await asyncio.to_thread(
                    _get, con.url + "/api/v1/topology", "evil.example:80")
                assert code == 403
            assert na.status().channels[0].state != "paused"

    run(go(), 120)


def test_console_actions_need_admin_csrf_same_origin_and_confirm(tmp_path):
    a, b = _pair(tmp_path, "NDB$EPOCH")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _conflict(a, b, na, nb)
            with LocalConsole([a.api, b.api], admin_token="unused-without-tokens",
                              conflict_tables=["shop.items"], interval=0.2) as con:
                await wait_for(lambda: sorted(con.poller.snapshot().clusters) == [1, 2], 20,
                               "both clusters")
                _, sess = await asyncio.to_thread(_get, con.url + "/api/v1/session")
                assert sess["admin"] is True and sess["csrf"]
                ok = {"X-CSRF-Token": sess["csrf"]}
                pause = con.url + "/api/v1/channels/1/fromB/pause"
                code, err = await asyncio.to_thread(_post, pause, {"confirm": True}, {})
                assert code == 403 and "CSRF" in err["error"]
                code, err = await asyncio.to_thread(
                    _post, pause, {"confirm": True}, {**ok, "Origin": "http://evil.example"})
                assert code == 403 and "Origin" in err["error"]
                code, err = await asyncio.to_thread(_post, pause, {}, ok)
                assert code == 400 and "confirm" in err["error"]
                assert na.status().channels[0].state != "paused"
                code, res = await asyncio.to_thread(_post, pause, {"confirm": True}, ok)
                assert code == 200 and res["ok"], res
                await wait_for(lambda: na.status().channels[0].state == "paused", 10, "paused")
                code, res = await asyncio.to_thread(
                    _post, con.url + "/api/v1/channels/1/fromB/resume", {"confirm": True}, ok)
                assert code == 200
                await wait_for(lambda: na.status().channels[0].state != "paused", 10,
                               "resumed")

                _, rows = await asyncio.to_thread(
                    _get, con.url + "/api/v1/conflicts/1/shop.items")
                first = rows["rows"][0]["id"]
                delete = con.url + "/api/v1/conflicts/1/shop.items/delete"
                code, err = await asyncio.to_thread(_post, delete, {"ids": [first]}, ok)
                assert code == 400 and len(_exceptions(na)) == 2
                code, err = await asyncio.to_thread(
                    _post, delete, {"ids": ["1/2/x"], "confirm": True}, ok)
                assert code == 400 and "SERVER/SOURCE/EPOCH/COUNT" in err["error"]
                code, res = await asyncio.to_thread(
                    _post, delete, {"ids": [first], "confirm": True}, ok)
                assert code == 200 and res["message"].startswith("deleted 1"), res
                assert len(_exceptions(na)) == 1
                _, doc = await asyncio.to_thread(_get, con.url + "/api/v1/conflicts")
                assert doc["clusters"][0]["tables"][0]["total"] == 1

                # replay the other one: B's rejected change written again on A, once
                _, rows = await asyncio.to_thread(
                    _get, con.url + "/api/v1/conflicts/1/shop.items")
                (left,) = rows["rows"]
                replay = con.url + "/api/v1/conflicts/1/shop.items/replay"
                code, err = await asyncio.to_thread(_post, replay, {"ids": [left["id"]]}, ok)
                assert code == 400
                code, res = await asyncio.to_thread(
                    _post, replay, {"ids": [left["id"]], "confirm": True}, ok)
                assert code == 200, res
                assert [o["outcome"] for o in res["outcomes"]] == ["applied"], res
                key = left["key"]["id"]
                await wait_for(lambda: _rows(na)[(key,)] == left["new"]["v"], 10,
                               "the replayed change applied on A")
                code, res = await asyncio.to_thread(
                    _post, replay, {"ids": [left["id"]], "confirm": True}, ok)
                assert code == 200 and res["outcomes"][0]["outcome"] != "applied", res

                # dead letters: the leader's, listed (none here) through the node RPC
                code, dl = await asyncio.to_thread(_get, con.url + "/api/v1/deadletters/1")
                assert code == 200 and dl["letters"] == [], dl
                code, err = await asyncio.to_thread(
                    _post, con.url + "/api/v1/deadletters/1/sqlite/replay", {"confirm": True},
                    ok)
                assert code == 400 and "ids" in err["error"]

    run(go(), 120)


_TOKENS = ('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["read", "write", "admin"]\n')


def test_console_lists_dead_letters_and_replays_and_discards_them_with_the_admin_token(
        tmp_path):
    """A SQLite target refuses two rows: the console (read token) lists both letters on the
    appliers view; with the admin token one is replayed once the target is fixed and the
    other discarded, through the node's DeadLetterAction."""
    import dataclasses
    import sqlite3
    from pathlib import Path

    from .conftest import node_configs

    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfg = dataclasses.replace(node_configs(tmp_path, 1, appliers={"sqlite": {}})[0],
                              tokens_file=str(tokens))
    db = Path(cfg.data_dir) / "sqlite" / "gateway.db"

    def held() -> set[int]:
        with sqlite3.connect(db) as c:
            try:
                return {r[0] for r in c.execute("SELECT id FROM items")}
            except sqlite3.OperationalError:
                return set()

    async def go():
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, token="a") as c:
                await c.write([row_insert("shop.items", {"id": 1}, {"v": "a"})])
                await wait_for(lambda: db.exists() and held() == {1}, 30, "row 1 applied")
                with sqlite3.connect(db) as con:
                    con.execute("CREATE TRIGGER refuse BEFORE INSERT ON items WHEN NEW.id "
                                "IN (98, 99) BEGIN SELECT RAISE(ABORT, 'refused by test'); END")
                for k in (98, 99, 2):
                    await c.write([row_insert("shop.items", {"id": k}, {"v": "x"})])
            await wait_for(lambda: node.status().appliers[0].dead_letters == 2
                           and 2 in held(), 60, "two dead letters")
            with LocalConsole([cfg.api], token="r", admin_token="a", interval=0.2) as con:
                await wait_for(lambda: (v := con.poller.snapshot().clusters.get(1)) is not None
                               and v.dead_letters is not None
                               and len(v.dead_letters.letters) == 2, 20, "letters polled")
                _, doc = await asyncio.to_thread(_get, con.url + "/api/v1/appliers")
                (cl,) = doc["clusters"]
                assert [(d["applier"], d["id"], d["state"], d["table"])
                        for d in cl["dead_letters"]] == [("sqlite", "1", "open", "shop.items"),
                                                         ("sqlite", "2", "open", "shop.items")]
                assert "refused by test" in cl["dead_letters"][0]["error"]
                assert "letter" not in cl["dead_letters"][0]
                assert cl["dead_letter_counts"] == [{"applier": "sqlite", "open": "2",
                                                     "total": "2"}]
                code, listed = await asyncio.to_thread(_get, con.url + "/api/v1/deadletters/1")
                assert code == 200 and [d["id"] for d in listed["letters"]] == ["1", "2"]

                _, sess = await asyncio.to_thread(_get, con.url + "/api/v1/session")
                ok = {"X-CSRF-Token": sess["csrf"]}
                with sqlite3.connect(db) as sq:
                    sq.execute("DROP TRIGGER refuse")
                code, res = await asyncio.to_thread(
                    _post, con.url + "/api/v1/deadletters/1/sqlite/replay",
                    {"ids": [1], "confirm": True}, ok)
                assert code == 200, res
                assert [o["outcome"] for o in res["outcomes"]] == ["replayed"]
                assert 98 in held() and 99 not in held()
                code, res = await asyncio.to_thread(
                    _post, con.url + "/api/v1/deadletters/1/sqlite/discard",
                    {"ids": ["2"], "confirm": True, "note": "not wanted"}, ok)
                assert code == 200 and [o["outcome"] for o in res["outcomes"]] == ["discarded"]
                assert 99 not in held()
                await wait_for(lambda: con.poller.snapshot().clusters[1].dead_letters is not None
                               and not con.poller.snapshot().clusters[1].dead_letters.letters,
                               20, "no open letters left")

    run(go(), 120)
