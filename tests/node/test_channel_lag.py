"""A channel's lag from its source's progress (docs/replication.md, "Channel lag"): it never
reads 0 while source transactions wait, grows while the channel hears nothing, falls back to
the idle level once caught up; replicated time is durable; a follower shows the leader's."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

from prometheus_client import CollectorRegistry, generate_latest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.api.channel_stream import PROGRESS_S
from gateway.node.api.metrics import NodeCollector
from gateway.node.base.config import ChannelConfig
from gateway.node.replication.channel_lag import STALE_S

from .conftest import leader_of, node_configs, run, running, started, wait_for

#: The idle level: a caught-up channel's lag is the age of the source's last progress
#: message, which comes every PROGRESS_S; STALE_S (three of them) is where it stops being
#: called live.
IDLE_BOUND_S = STALE_S
assert IDLE_BOUND_S >= 3 * PROGRESS_S


def _pair(tmp_path, replica_nodes: int = 1):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    bs = node_configs(tmp_path / "b", replica_nodes, cluster_id=2)
    bs = [dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),)) for b in bs]
    return a, bs


async def _write(cfg, key: int) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        await c.write([row_insert("shop.items", {"id": key}, {"v": f"v{key}"})])


async def _status(cfg):
    async with AsyncGatewayClient(cfg.api) as c:
        st = await c.status(timeout=10)
    return st.channels[0]


def _prom(node) -> dict[str, float]:
    reg = CollectorRegistry()
    reg.register(NodeCollector(node))
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        if line.startswith("gateway_channel"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _rows(node) -> int:
    return sum(1 for _ in node.sm.scan_rows("shop", "items", [], []))


async def _caught_up(b, nb, rows: int) -> None:
    await wait_for(lambda: _rows(nb) == rows, 30, "replicated")
    ok = []

    async def check() -> None:
        ch = await _status(b)
        ok.append(ch.lag_epochs == 0 and not ch.since_last_heard
                  and ch.lag_seconds < IDLE_BOUND_S and ch.state == "running")

    async def wait() -> None:
        while True:
            await check()
            if ok[-1]:
                return
            await asyncio.sleep(0.1)

    await asyncio.wait_for(wait(), 30)


def test_a_paused_channel_s_lag_rises_under_source_writes_and_falls_back_after_resume(
        tmp_path):
    a, (b,) = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, 0)
            await _caught_up(b, nb, 1)
            async with AsyncGatewayClient(b.api) as cb:
                await cb.channel_action("fromA", "pause")
            await wait_for(lambda: nb.status().channels[0].state == "paused", 10, "paused")
            applied = nb.status().channels[0].applied_epoch
            for k in range(1, 6):
                await _write(a, k)
            # the source sealed an epoch the replica does not hold...
            await wait_for(lambda: na.sm.newest_sealed[0] > applied, 10, "source sealed")
            # ...and the paused channel hears of it (it polls the source's Status)
            await wait_for(lambda: nb.status().channels[0].lag_epochs > 0, 10,
                           "the paused channel heard the source")
            samples = []
            for _ in range(4):
                ch = await _status(b)
                samples.append((ch.lag_epochs, ch.lag_seconds, "api"))
                prom = _prom(nb)
                samples.append((prom['gateway_channel_lag_epochs{channel="fromA"}'],
                                prom['gateway_channel_lag_seconds{channel="fromA"}'], "prom"))
                await asyncio.sleep(0.3)
            assert all(e > 0 for e, _, _ in samples), samples  # never 0 while rows wait
            secs = [s for _, s, _ in samples]
            assert all(x < y for x, y in itertools.pairwise(secs)), samples
            assert _rows(nb) == 1  # nothing applied while paused
            async with AsyncGatewayClient(b.api) as cb:
                await cb.channel_action("fromA", "resume")
            await _caught_up(b, nb, 6)

    run(go(), 120)


def test_an_idle_source_s_lag_stays_at_the_idle_level(tmp_path):
    a, (b,) = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, 0)
            await _caught_up(b, nb, 1)
            # over several progress intervals of an idle source
            for _ in range(int(4 * PROGRESS_S / 0.25)):
                ch = await _status(b)
                assert ch.state == "running" and ch.lag_epochs == 0, ch
                assert not ch.since_last_heard and ch.lag_seconds < IDLE_BOUND_S, ch
                assert ch.source_epoch == ch.applied_epoch > 0
                await asyncio.sleep(0.25)

    run(go(), 90)


def test_a_stopped_source_makes_the_lag_grow_marked_since_last_heard(tmp_path):
    a, (b,) = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            await _write(a, 0)
            await _caught_up(b, nb, 1)
            await na.stop()
            await wait_for(lambda: nb.status().channels[0].since_last_heard, 30,
                           "the lost source marked")
            samples = []
            for _ in range(4):
                samples.append(await _status(b))
                await asyncio.sleep(0.3)
            heard = {s.last_heard_ns for s in samples}
            assert len(heard) == 1 and heard.pop() > 0
            secs = [s.lag_seconds for s in samples]
            assert all(x < y for x, y in itertools.pairwise(secs)), secs
            assert all(s.since_last_heard and s.state != "running" for s in samples)
            prom = _prom(nb)
            assert prom['gateway_channel_lag_since_last_heard{channel="fromA"}'] == 1
            assert prom['gateway_channel_last_heard_age_seconds{channel="fromA"}'] > 0

    run(go(), 90)


def test_a_follower_shows_the_leader_s_channel_figures_and_replicated_time(tmp_path):
    a, bs = _pair(tmp_path, replica_nodes=3)

    async def go():
        async with running(a, *bs) as nodes:
            na, nbs = nodes[0], nodes[1:]
            await leader_of([na])
            lead = await leader_of(nbs)
            for k in range(3):
                await _write(a, k)
            await wait_for(lambda: all(_rows(n) == 3 for n in nbs), 30, "replicated")
            follower = next(n for n in nbs if n is not lead)
            fcfg = bs[nbs.index(follower)]
            # on its own, a follower does not know the live figures: it says where they are
            own = follower.status().channels[0]
            assert own.state == f"on the leader {lead.config.node_id}"
            # its API asks the leader
            await wait_for(lambda: lead.status().channels[0].source_epoch
                           == lead.status().channels[0].applied_epoch > 0, 20, "caught up")
            ch = await _status(fcfg)
            assert ch.state == "running" and ch.leader_id == lead.config.node_id
            assert ch.source_epoch == lead.status().channels[0].source_epoch > 0
            assert ch.last_heard_ns > 0 and ch.lag_epochs == 0
            # replicated time: the seal time the replica's log recorded, on every node
            await wait_for(lambda: len({n.status().channels[0].replicated_time_ns
                                        for n in nbs}) == 1, 20, "same on every node")
            assert ch.replicated_time_ns == lead.status().channels[0].replicated_time_ns > 0

    run(go(), 120)


def test_replicated_time_survives_a_replica_restart(tmp_path):
    a, (b,) = _pair(tmp_path)

    async def go():
        async with running(a, b) as nodes:
            na, nb = nodes
            await leader_of([na])
            await leader_of([nb])
            for k in range(2):
                await _write(a, k)
            await _caught_up(b, nb, 2)
            before = nb.status().channels[0]
            # the seal time of the epoch the replica holds, as the source sealed it
            assert before.replicated_time_ns == na.sm.newest_sealed[1] > 0
            assert before.applied_epoch == na.sm.newest_sealed[0]
            await na.stop()  # nothing new can arrive
            await nb.stop()
            nb2 = await started(b)
            nodes.append(nb2)
            after = nb2.status().channels[0]
            assert after.replicated_time_ns == before.replicated_time_ns
            assert _prom(nb2)['gateway_channel_replicated_time_seconds{channel="fromA"}'] \
                == before.replicated_time_ns / 1e9

    run(go(), 90)
