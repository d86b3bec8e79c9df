"""Replication channels between clusters, in process: pairs, rings, admin, status."""

from __future__ import annotations

import asyncio
import dataclasses

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.base.config import ChannelConfig

from .conftest import leader_of, node_configs, run, running, started, wait_for


def _cluster(tmp_path, name: str, cluster_id: int, n: int = 1):
    return node_configs(tmp_path / name, n, cluster_id=cluster_id)


def _from(cfgs, *sources, name=None):
    return tuple(ChannelConfig(name or f"from{src[0].cluster_id}",
                               tuple(c.api for c in src)) for src in sources)


def _rows(node, table="shop.items"):
    schema, t = table.split(".")
    return {tuple(v.int_value for v in r.key_values): (r.author, r.gtid.server_id,
                                                        r.gtid.trans_id, r.values[0].string_value)
            for r in node.sm.scan_rows(schema, t, [], [])}


async def _write(cfg, key: int, text: str) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write([row_insert("shop.items", {"id": key}, {"v": text})])


def test_a_pair_replicates_both_ways_with_origin_gtid_author_and_reflection(tmp_path):
    a, b = _cluster(tmp_path, "a", 1)[0], _cluster(tmp_path, "b", 2)[0]
    a = dataclasses.replace(a, channels=(ChannelConfig("fromB", (b.api,)),))
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(5):
                await _write(a, i, f"a{i}")
                await _write(b, 100 + i, f"b{i}")
            await wait_for(lambda: len(_rows(na)) == 10 and len(_rows(nb)) == 10, 20,
                           "both clusters hold all rows")
            ra, rb = _rows(na), _rows(nb)
            assert ra == rb
            assert {k: v[0] for k, v in ra.items()} == {
                **{(i,): 1 for i in range(5)}, **{(100 + i,): 2 for i in range(5)}}
            # origin GTIDs kept; each cluster's own counter untouched by replicated ones
            assert sorted(v[2] for k, v in ra.items() if v[1] == 2) == [1, 2, 3, 4, 5]
            assert na.sm.last_trans_id == 5 and nb.sm.last_trans_id == 5
            # reflection: each cluster learns how far the other applied its epochs
            last_a = max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])
                         if r.author == 1)
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >= last_a, 10,
                           "A's max replicated epoch for B")
            # A's store keeps tombstones of deletes B has not applied yet (docs/lsm.md)
            assert na.sm.store.tombstone_floor() == (na.sm.replication.max_replicated_epoch(2),
                                                      {2: 1 << 64})
            st = na.status()
            assert [p.cluster_id for p in st.peers] == [2]
            assert st.peers[0].max_replicated_epoch >= last_a
            assert st.channels[0].name == "fromB" and st.channels[0].state == "running"
            assert st.channels[0].source_id == 2 and st.channels[0].applied_epoch > 0

    run(go(), 60)


def _client(cfg):
    from gateway.client import GatewayClient

    return GatewayClient(cfg.api, timeout=20)


def test_a_ring_of_three_and_failover_around_a_lost_cluster(tmp_path):
    a, b, c = (_cluster(tmp_path, n, i)[0] for n, i in (("a", 1), ("b", 2), ("c", 3)))
    # A -> B -> C -> A, defined through the admin API
    async def go():
        async with running(a, b, c) as nodes:
            na, nb, nc = nodes
            for n in nodes:
                await leader_of([n])
            for dst, src, name in ((b, a, "fromA"), (c, b, "fromB"), (a, c, "fromC")):
                await asyncio.to_thread(lambda d=dst, s=src, nm=name:
                                        _client(d).add_channel(nm, [s.api]))
            for i in range(4):
                for k, cfg in enumerate((a, b, c)):
                    await _write(cfg, 10 * k + i, f"{k}:{i}")
            await wait_for(lambda: all(len(_rows(n)) == 12 for n in nodes), 20,
                           "every cluster holds every row")
            assert _rows(na) == _rows(nb) == _rows(nc)
            # reflection around the ring: A knows B and C applied its last epoch
            last_a = max(r.epoch for r in na.sm.scan_rows("shop", "items", [], [])
                         if r.author == 1)
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) >= last_a
                           and na.sm.replication.max_replicated_epoch(3) >= last_a, 10,
                           "reflection at A")
            # B is lost: C is pointed at A and resumes from what it holds of A through B
            await nb.stop()
            held = nc.sm.replication.held(1)
            assert held >= last_a
            await asyncio.to_thread(lambda: _client(c).channel_action("fromB", "remove"))
            await asyncio.to_thread(lambda: _client(c).add_channel("fromA", [a.api]))
            for i in range(4, 7):
                await _write(a, i, f"0:{i}")
            await wait_for(lambda: len(_rows(nc)) == 15, 20, "C holds A's new rows")
            assert _rows(nc) == _rows(na)
            st = nc.status()
            assert [ch.name for ch in st.channels] == ["fromA"]
            assert st.channels[0].state == "running"
            # nothing applied twice: every origin sequence of C is its origin's own, in order
            seen = [(r.gtid.server_id, r.gtid.trans_id)
                    for r in nc.sm.scan_rows("shop", "items", [], [])]
            assert len(seen) == len(set(seen))

    run(go(), 90)


def test_pause_resume_and_bad_sources_show_on_the_channel_status(tmp_path):
    a, b = _cluster(tmp_path, "a", 1)[0], _cluster(tmp_path, "b", 2)[0]

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            cb = _client(b)
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api], source_id=7))
            await wait_for(lambda: "cluster 1" in nb.status().channels[0].last_error, 10,
                           "a wrong cluster id reported")
            st = nb.status().channels[0]
            assert st.state == "error" and "source is cluster 7" in st.last_error
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api], replace=True))
            await _write(a, 1, "x")
            await wait_for(lambda: len(_rows(nb)) == 1, 10, "replicated")
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "pause"))
            await wait_for(lambda: nb.status().channels[0].state == "paused", 5, "paused")
            await _write(a, 2, "y")
            await asyncio.sleep(0.5)
            assert len(_rows(nb)) == 1
            await asyncio.to_thread(lambda: cb.channel_action("fromA", "resume"))
            await wait_for(lambda: len(_rows(nb)) == 2, 10, "caught up after resume")
            from gateway.client import GatewayError

            try:
                await asyncio.to_thread(lambda: cb.channel_action("nope", "pause"))
            except GatewayError as exc:
                assert "no channel 'nope'" in exc.details
            else:
                raise AssertionError("unknown channel accepted")
            try:
                await asyncio.to_thread(lambda: cb.add_channel("bad name", ["x"]))
            except GatewayError as exc:
                assert exc.code.name == "INVALID_ARGUMENT"
            else:
                raise AssertionError("bad channel accepted")
            # an unreachable source: an error on the status, nothing crashes
            await asyncio.to_thread(lambda: cb.add_channel("ghost", ["127.0.0.1:1"]))
            await wait_for(lambda: any(ch.name == "ghost" and ch.state == "error"
                                       and ch.last_error for ch in nb.status().channels), 10,
                           "unreachable source reported")

    run(go(), 60)


def test_subscribe_serves_replicated_transactions_markers_and_apply_status(tmp_path):
    a, b = _cluster(tmp_path, "a", 1)[0], _cluster(tmp_path, "b", 2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(3):
                await _write(a, i, "a")
            await _write(b, 50, "b")
            await wait_for(lambda: len(_rows(nb)) == 4, 10, "replicated")
            await asyncio.sleep(0.3)

            def collect(**kw):
                out = []
                with _client(b) as c:
                    stream = c.subscribe(timeout=1.0, **kw)
                    try:
                        for ev in stream:
                            out.append(ev)
                    except Exception:  # the deadline ends the stream
                        pass
                return out

            evs = await asyncio.to_thread(collect, log_records=True)
            origins = [ev.transaction.gtid.server_id for ev in evs if ev.HasField("transaction")]
            assert sorted(origins) == [1, 1, 1, 2]
            assert any(ev.HasField("apply_status") and ev.apply_status.server_id == 1
                       and ev.apply_status.applied_by == 2 for ev in evs)
            assert any(ev.HasField("epoch_marker") for ev in evs)
            plain = await asyncio.to_thread(collect)
            assert all(ev.HasField("transaction") for ev in plain) and len(plain) == 4
            only_b = await asyncio.to_thread(collect, ignore_origins=[1])
            assert [ev.transaction.gtid.server_id for ev in only_b] == [2]
            after = await asyncio.to_thread(collect, after_gtid=(1, 2))
            assert [(ev.transaction.gtid.server_id, ev.transaction.gtid.trans_id)
                    for ev in after if ev.transaction.gtid.server_id == 1] == [(1, 3)]
            held = nb.sm.replication.held(1)
            tail = await asyncio.to_thread(collect, after_epoch=(1, held))
            assert not [ev for ev in tail if ev.transaction.gtid.server_id == 1]

    run(go(), 60)


def test_appliers_of_the_replica_see_replicated_rows_with_their_origin_author(tmp_path):
    import sqlite3

    a = _cluster(tmp_path, "a", 1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2, appliers={"sqlite": {}})[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(3):
                await _write(a, i, f"a{i}")
            path = f"{b.data_dir}/sqlite/gateway.db"

            def count() -> int:
                try:
                    with sqlite3.connect(path) as db:
                        return db.execute("select count(*) from items").fetchone()[0]
                except sqlite3.Error:
                    return 0

            await wait_for(lambda: count() == 3, 20, "the SQLite applier of B has A's rows")

    run(go(), 60)


def test_a_source_with_tls_and_tokens_needs_the_channels_read_token_and_ca(tmp_path):
    """The channel presents its token and checks the source's certificate against its CA; a
    wrong token or a missing CA is an error on the channel's status, retried, and the
    corrected channel replicates."""
    from gateway.node.api.security import make_test_ca
    from gateway.node.base.config import TlsConfig

    ca = make_test_ca(str(tmp_path / "ca"))
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
                      '[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n')
    tls = TlsConfig(api_cert=ca["node"], api_key=ca["node_key"], peer_cert=ca["node"],
                    peer_key=ca["node_key"], peer_ca=ca["ca"])
    a = node_configs(tmp_path / "a", 1, cluster_id=1, tls=tls, tokens_file=str(tokens))[0]
    b = _cluster(tmp_path, "b", 2)[0]
    with open(ca["ca"]) as f:
        pem = f.read()

    def channel(nb):
        return next((ch for ch in nb.status().channels if ch.name == "fromA"), None)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            async with AsyncGatewayClient(a.api, token="w",
                                          root_certificates=pem.encode()) as c:
                await c.write([row_insert("shop.items", {"id": 1}, {"v": "tls"})])
            cb = _client(b)
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api], token="nope",
                                                           ca_pem=pem))
            await wait_for(lambda: (ch := channel(nb)) is not None and ch.state == "error"
                           and "UNAUTHENTICATED" in ch.last_error, 15, "a wrong token reported")
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api], token="r",
                                                           replace=True))
            await wait_for(lambda: (ch := channel(nb)) is not None and ch.state == "error"
                           and ch.last_error and "UNAUTHENTICATED" not in ch.last_error, 15,
                           "plaintext against a TLS source reported")
            assert _rows(nb) == {}
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api], token="r",
                                                           ca_pem=pem, replace=True))
            await wait_for(lambda: len(_rows(nb)) == 1, 15, "replicated over TLS")
            assert channel(nb).state == "running" and channel(nb).last_error == ""

    run(go(), 90)


async def _written_in_an_open_epoch(a, na, nb, rows: int) -> None:
    """Once both single-node clusters lead, write ``rows`` rows to A (node ``na``, config
    ``a``); B (``nb``) holds none of them: A's epoch is still open."""
    await leader_of([na])
    await leader_of([nb])
    for i in range(1, rows + 1):
        await _write(a, i, f"a{i}")
    await asyncio.sleep(0.5)
    assert _rows(nb) == {}  # the epoch is open: the channel holds it back


async def _stop_without_sealing(node) -> None:
    """Stop ``node`` as if killed before it sealed its open epoch (its marker never written)."""
    async def dies_before_sealing(timeout: float) -> bool:
        return False

    node.driver.seal_for_stop = dies_before_sealing
    await node.stop()


def _single_node_pair(tmp_path):
    """Single-node clusters A (epochs of 10 minutes: none ends on its own) and B, B's channel
    reading A."""
    a = dataclasses.replace(_cluster(tmp_path, "a", 1)[0], epoch_ms=600_000)
    b = _cluster(tmp_path, "b", 2)[0]
    return a, dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))


def test_a_source_leader_that_dies_before_sealing_its_epoch_loses_nothing_downstream(
        tmp_path):
    """The source's leader commits transactions and dies before its epoch ends; the new
    leader writes nothing. The replica still gets them: the new leader seals the epoch its
    predecessor left open (a channel applies sealed epochs only)."""
    a = node_configs(tmp_path / "a", 3, cluster_id=1, epoch_ms=600_000)
    b = _cluster(tmp_path, "b", 2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", tuple(c.api for c in a)),))

    async def go():
        async with running(*a, b) as nodes:
            *na, nb = nodes
            lead = await leader_of(na)
            await leader_of([nb])
            cfg = a[na.index(lead)]
            for i in range(3):
                await _write(cfg, i, f"a{i}")
            await wait_for(lambda: all(len(_rows(n)) == 3 for n in na), 15, "A replicated")
            await asyncio.sleep(1.0)
            assert _rows(nb) == {}  # the epoch is open: the channel holds it back
            await _stop_without_sealing(lead)
            rest = [n for n in na if n is not lead]
            await leader_of(rest)
            await wait_for(lambda: len(_rows(nb)) == 3, 20, "B holds the dead leader's rows")
            assert _rows(nb) == _rows(rest[0])

    run(go(), 60)


def test_a_single_node_source_killed_and_restarted_within_its_epoch_loses_nothing_downstream(
        tmp_path):
    """The usual pair of single nodes: the source dies right after a write, before its epoch
    ends (no marker), and starts again (a new term, which seals the epoch). The replica gets
    the row without another write."""
    a, b = _single_node_pair(tmp_path)

    async def go():
        async with running(a, b) as nodes:
            na, nb = nodes
            await _written_in_an_open_epoch(a, na, nb, 1)
            await _stop_without_sealing(na)
            na = await started(a)
            nodes.append(na)
            await leader_of([na])
            await wait_for(lambda: len(_rows(nb)) == 1, 20, "B holds the row")
            assert _rows(nb) == _rows(na)

    run(go(), 60)


def test_a_single_node_source_stopped_for_good_within_its_epoch_loses_nothing_downstream(
        tmp_path):
    """The source stops gracefully right after a write, before its epoch ends, and does not
    come back: it seals its open epoch before it goes, and the replica gets the row."""
    a, b = _single_node_pair(tmp_path)

    async def go():
        async with running(a, b) as nodes:
            na, nb = nodes
            await _written_in_an_open_epoch(a, na, nb, 2)
            held = _rows(na)
            await na.stop()
            await wait_for(lambda: len(_rows(nb)) == 2, 20, "B holds the rows")
            assert _rows(nb) == held

    run(go(), 60)


def test_a_source_compacted_past_the_channels_position_is_an_error_not_a_gap(tmp_path):
    """A new replica of a source whose log no longer starts at its beginning cannot get the
    whole history through the channel: the source refuses the position, and the channel
    shows why (compacted) instead of replicating from the middle."""
    a = node_configs(tmp_path / "a", 1, cluster_id=1, snapshot_entries=10)[0]
    b = _cluster(tmp_path, "b", 2)[0]

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(40):
                await _write(a, i, f"a{i}")
            await na.driver.snapshot_now()
            await wait_for(lambda: na.driver.storage.first_index() > 2, 15, "A compacted")
            cb = _client(b)
            await asyncio.to_thread(lambda: cb.add_channel("fromA", [a.api]))
            await wait_for(lambda: any("compacted" in ch.last_error
                                       for ch in nb.status().channels), 15,
                           "the compacted position reported")
            ch = nb.status().channels[0]
            assert ch.state == "behind"
            assert "behind the source's log: resync" in ch.last_error
            assert "gateway channel resync fromA" in ch.last_error
            assert _rows(nb) == {}
            # the same for a subscriber asking for another origin's epochs from the start
            from gateway.client import GatewayError

            def subscribe_from_the_start() -> GatewayError | None:
                with _client(a) as ca:
                    try:
                        for _ in ca.subscribe(after_epoch=(99, 0)):
                            break
                    except GatewayError as exc:
                        return exc
                return None

            exc = await asyncio.to_thread(subscribe_from_the_start)
            assert exc is not None and exc.code.name == "INVALID_ARGUMENT"
            assert "compacted" in exc.details and "from_log_index" in exc.details

    run(go(), 60)


def test_channel_and_peer_metrics(tmp_path):
    """Prometheus shows each channel (up, applied epoch, lag, transactions) and each peer's
    max replicated epoch, as the Status RPC does."""
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.node.api.metrics import NodeCollector

    a, b = _cluster(tmp_path, "a", 1)[0], _cluster(tmp_path, "b", 2)[0]
    a = dataclasses.replace(a, channels=(ChannelConfig("fromB", (b.api,)),))
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    def scrape(node) -> dict[str, float]:
        reg = CollectorRegistry()
        reg.register(NodeCollector(node))
        out = {}
        for line in generate_latest(reg).decode().splitlines():
            if line.startswith(("gateway_channel", "gateway_max_replicated")):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            for i in range(3):
                await _write(a, i, f"a{i}")
            await wait_for(lambda: len(_rows(nb)) == 3, 20, "replicated")
            await wait_for(lambda: na.sm.replication.max_replicated_epoch(2) > 0, 10,
                           "reflected")
            mb, ma = scrape(nb), scrape(na)
            assert mb['gateway_channel_up{channel="fromA"}'] == 1
            assert mb['gateway_channel_applied_epoch{channel="fromA"}'] == \
                nb.status().channels[0].applied_epoch > 0
            assert mb['gateway_channel_transactions_total{channel="fromA"}'] == 3
            assert mb['gateway_channel_lag_epochs{channel="fromA"}'] == 0
            assert ma['gateway_max_replicated_epoch{peer="2"}'] == \
                na.sm.replication.max_replicated_epoch(2)

    run(go(), 60)
