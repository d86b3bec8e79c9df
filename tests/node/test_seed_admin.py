"""The operator's seed commands, in process: ``channel add --seed`` refuses a cluster that
holds rows unless told to merge, and ``channel resync`` reports first, then brings back a
replica whose position its source compacted away, keeping what was written locally."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayError, row_delete, row_insert, row_update
from gateway.node.base.config import RetentionConfig

from .conftest import leader_of, node_configs, run, running, wait_for


def _rows(node) -> dict:
    return {r.key_values[0].int_value: (r.values[0].string_value, r.author, r.gtid.server_id,
                                        r.gtid.trans_id, r.commit_timestamp_ns)
            for r in node.sm.scan_rows("shop", "items", [], [])}


async def _write(cfg, keys, text: str) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write([row_insert("shop.items", {"id": k}, {"v": f"{text}{k}"}) for k in keys])


def test_channel_add_seed_refuses_a_cluster_holding_rows_unless_merge(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, range(5), "a")
            await _write(b, [100], "b")
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "channel", "add", "fromA", "--from", a.api, "--seed", "--target", b.api]))
            assert res.exit_code == 2, res.output
            assert "this cluster holds rows: a seed of channel 'fromA' would overwrite them " \
                "(add --merge" in res.output and "Traceback" not in res.output
            async with AsyncGatewayClient(b.api) as c:
                with pytest.raises(GatewayError, match="this cluster holds rows"):
                    await c.add_channel("fromA", [a.api], seed=True)
                assert "fromA" not in nb.sm.channels and "fromA" not in nb.sm.seeds
                got = await c.add_channel("fromA", [a.api], seed=True, merge=True)
            assert "seeds this cluster from a snapshot" in got.message
            await wait_for(lambda: "fromA" not in nb.sm.seeds and len(_rows(nb)) == 6, 20,
                           "the merged seed")
            rows = _rows(nb)
            assert rows[100][1] == 2  # the row written here is kept
            assert {k: v for k, v in rows.items() if k != 100} == _rows(na)

    run(go(), 60)


def test_resync_reports_then_brings_back_a_replica_behind_its_sources_log(tmp_path):
    a = dataclasses.replace(node_configs(tmp_path / "a", 1, cluster_id=1)[0],
                            snapshot_entries=10, snapshot_log_percent=0,
                            retention=RetentionConfig(max_entries=10))
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, range(3), "a")
            async with AsyncGatewayClient(b.api) as c:
                await c.add_channel("fromA", [a.api])
                await wait_for(lambda: len(_rows(nb)) == 3 and (2, "fromA") in na.sm.slots,
                               20, "replicated, B's slot at A")
                await c.channel_action("fromA", "pause")
                await wait_for(lambda: nb.channels.status()[0].state == "paused", 10,
                               "the runner stopped")
                # A moves on (a new value of row 0, row 1 deleted, 40 new rows) and compacts
                # its log past B's position
                async with AsyncGatewayClient(a.api) as ca:
                    await ca.write([row_update("shop.items", {"id": 0}, {"v": "new"})])
                    await ca.write([row_delete("shop.items", {"id": 1})])
                for i in range(40):
                    await _write(a, [10 + i], "a")
                await wait_for(lambda: na.driver.last_snapshot_index > 30, 20, "A compacts")
                await _write(b, [500], "b")  # written here while behind: must survive
                await c.channel_action("fromA", "resume")
                await wait_for(lambda: "compacted" in _status(nb), 20, "B reports the gap")
                await wait_for(lambda: na.sm.slots[(2, "fromA")].lost, 10,
                               "B's slot lost: past A's retention bound")
                res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                    "channel", "resync", "fromA", "--target", b.api]))
                assert res.exit_code == 0, res.output
                dry = res.output
                assert "dry run" in dry and "--yes" in dry
                assert "1 row(s) written here in epochs the source has not applied" in dry
                assert "1 row(s) differ, 40 missing here, 1 deleted there and held here, 1 " \
                    "the same" in dry
                assert "fromA" not in nb.sm.seeds  # nothing done
                done = await c.channel_action("fromA", "resync", confirm=True)
                assert "resync started" in done.message
            await wait_for(lambda: "fromA" not in nb.sm.seeds and len(_rows(nb)) == 43, 30,
                           "the resync")
            await _write(a, [99], "after")
            await wait_for(lambda: 99 in _rows(nb), 20, "streaming after the resync")
            rows = _rows(nb)
            assert rows.pop(500)[1] == 2
            assert rows == _rows(na)
            # the seed reset B's slot at A: no longer lost, it holds A's log for B again
            await wait_for(lambda: not na.sm.slots[(2, "fromA")].lost, 10, "slot reset")
            st = nb.channels.status()[0]
            assert st.state == "running" and not st.seed

    run(go(), 90)


def _status(node) -> str:
    st = node.channels.status()
    return st[0].last_error if st else ""




def test_other_channels_wait_for_a_seed_and_go_on_when_its_channel_is_removed(tmp_path):
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    c = node_configs(tmp_path / "c", 1, cluster_id=3)[0]
    dead = node_configs(tmp_path / "dead", 1, cluster_id=9)[0]  # never started

    async def go():
        async with running(b, c) as (nb, nc):
            await leader_of([nb])
            await leader_of([nc])
            await _write(c, [1], "c")
            async with AsyncGatewayClient(b.api) as cl:
                await cl.add_channel("fromC", [c.api])
                await wait_for(lambda: 1 in _rows(nb), 20, "C's row")
                # a seed from a source that never answers: it stays pending
                await cl.add_channel("fromX", [dead.api], source_id=9, seed=True, merge=True)
                await wait_for(lambda: "waiting for the seed of channel fromX" in next(
                    s.last_error for s in nb.channels.status() if s.name == "fromC"), 20,
                    "fromC waits")
                await _write(c, [2], "c")
                await asyncio.sleep(1.0)
                assert 2 not in _rows(nb)  # not applied while the seed is pending
                await cl.channel_action("fromX", "remove")
                assert "fromX" not in nb.sm.seeds
            await wait_for(lambda: 2 in _rows(nb), 20, "fromC goes on")

    run(go(), 60)
