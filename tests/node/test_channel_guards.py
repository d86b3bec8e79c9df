"""Channel guards between clusters, in process (docs/conflicts.md, "Guards"): a channel to
this cluster itself is refused and one to an unreachable source says so; two PRIMARY
clusters stop their channels naming the peer that also claims the role (at the start, and
when a role changes while they run); a pair without a PRIMARY warns; a schema clash is
quarantined, listed and counted while the rest replicates."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, row_insert
from gateway.conflict import ConflictRule
from gateway.node.base.config import ChannelConfig

from .conftest import free_ports, leader_of, node_configs, run, running, wait_for


def _keys(node, table: str) -> set:
    schema, name = table.split(".")
    return {r.key_values[0].int_value or r.key_values[0].string_value
            for r in node.sm.scan_rows(schema, name, [], [])}


async def _write(cfg, *stmts) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write(list(stmts))


def _pair(tmp_path, role_a: str, role_b: str, rules: bool = True):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    rule = (ConflictRule("shop.*", "NDB$EPOCH"),) if rules else ()
    a = dataclasses.replace(a, channels=(ChannelConfig("fromB", (b.api,)),),
                            conflict_role=role_a, conflicts=rule)
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),),
                            conflict_role=role_b, conflicts=rule)
    return a, b


def _error(node) -> str:
    chans = node.status().channels  # empty until the configured channel is recorded
    return chans[0].last_error if chans else ""


def test_channel_add_refuses_this_cluster_and_says_an_unreachable_source_is_not_yet(tmp_path):
    (cfg,) = node_configs(tmp_path, 1, cluster_id=1)
    (closed,) = free_ports(1)

    async def go():
        async with running(cfg) as (node,):
            await leader_of([node])
            c = GatewayClient(cfg.api, timeout=20)
            with pytest.raises(GatewayError) as err:
                await asyncio.to_thread(lambda: c.add_channel("self", [cfg.api]))
            assert err.value.code.name == "INVALID_ARGUMENT"
            assert "is a node of this cluster (1)" in err.value.details
            assert "self" not in node.sm.channels
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "channel", "add", "again", "--from", cfg.api, "--target", cfg.api]))
            assert res.exit_code == 2 and "node of this cluster" in res.output, res.output
            got = await asyncio.to_thread(
                lambda: c.add_channel("later", [f"127.0.0.1:{closed}"]))
            assert "not reachable yet" in got.message and f"127.0.0.1:{closed}" in got.message
            assert "later" in node.sm.channels  # added: it retries until the source is up
            c.close()

    run(go(), 60)


def test_two_primaries_stop_their_channels_naming_the_peer_that_claims_the_role(tmp_path):
    a, b = _pair(tmp_path, "PRIMARY", "SECONDARY")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, row_insert("shop.items", {"id": 1}, {"v": "a"}))
            await wait_for(lambda: _keys(nb, "shop.items") == {1}, 20, "B replicates")
            cb = GatewayClient(b.api, timeout=20)
            # B claims PRIMARY too while the channels run: both stop, each naming the other
            await asyncio.to_thread(lambda: cb.set_conflict_role("PRIMARY"))
            await wait_for(lambda: "cluster 2" in _error(na) and "cluster 1" in _error(nb),
                           30, "both channels stopped")
            for node in (na, nb):
                assert node.status().channels[0].state == "error"
                assert "also claims the PRIMARY role" in _error(node)
            await _write(a, row_insert("shop.items", {"id": 2}, {"v": "a"}))
            await asyncio.sleep(1.0)
            assert _keys(nb, "shop.items") == {1}  # stopped: nothing more applied
            await asyncio.to_thread(lambda: cb.set_conflict_role("SECONDARY"))
            await wait_for(lambda: _keys(nb, "shop.items") == {1, 2}, 30, "B replicates again")
            await wait_for(lambda: not _error(na) and not _error(nb), 30, "errors cleared")
            cb.close()

    run(go(), 120)


def test_two_primaries_from_the_start_never_replicate(tmp_path):
    a, b = _pair(tmp_path, "PRIMARY", "PRIMARY")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, row_insert("shop.items", {"id": 1}, {"v": "a"}))
            await wait_for(lambda: "cluster 2" in _error(na) and "cluster 1" in _error(nb),
                           20, "both channels refuse")
            assert _keys(nb, "shop.items") == set()

    run(go(), 60)


def test_a_pair_without_a_primary_warns_in_its_status(tmp_path):
    a, b = _pair(tmp_path, "SECONDARY", "SECONDARY")

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, row_insert("shop.items", {"id": 1}, {"v": "a"}))
            await wait_for(lambda: _keys(nb, "shop.items") == {1}, 20, "B replicates")
            await wait_for(lambda: _error(nb).startswith("warning: neither this cluster "
                                                         "(SECONDARY) nor cluster 1"), 20,
                           "B warns")
            assert nb.status().channels[0].state == "running"
            assert "swap" in _error(nb)
            await wait_for(lambda: "nor cluster 2" in _error(na), 20, "A warns")

    run(go(), 60)


def test_a_schema_clash_is_quarantined_listed_and_the_rest_replicates(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            # shop.items is first written with a VARCHAR key in B, an INTEGER key in A
            await _write(b, row_insert("shop.items", {"id": "k"}, {"v": "b"}))
            await _write(a, row_insert("shop.items", {"id": 1}, {"v": "a"}))
            await _write(a, row_insert("shop.other", {"id": 1}, {"v": "a"}))
            await wait_for(lambda: _keys(nb, "shop.other") == {1}, 20, "the rest replicates")
            await _write(a, row_insert("shop.other", {"id": 2}, {"v": "a"}))
            await wait_for(lambda: _keys(nb, "shop.other") == {1, 2}, 20, "and goes on")
            assert _keys(nb, "shop.items") == {"k"}
            st = nb.status().channels[0]
            assert st.state == "running" and st.conflicts["quarantined_trans_count"] == 1
            assert "1 transaction(s) quarantined" in st.last_error
            assert st.transactions_applied == 2  # 3 read, 1 of them quarantined
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "channel", "quarantine", "fromA", "--target", b.api]))
            assert res.exit_code == 0, res.output
            lines = res.output.splitlines()
            assert lines[0] == "channel fromA: 1 quarantined transaction(s)"
            gtid, where, cause = lines[1].split("\t")
            assert gtid == "1:1" and where.startswith("cluster 1 epoch ")
            assert "shop.items" in cause
            assert '"table_name": "items"' in lines[2]

    run(go(), 60)
