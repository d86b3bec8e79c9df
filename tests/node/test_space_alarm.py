"""The NOSPACE alarm (issue 52, item 3): raised before a node's log disk is full, replicated
so that every node refuses writes with RESOURCE_EXHAUSTED naming the node and path, reads
and Status go on, cleared when space returns or by an operator (admin permission)."""

from __future__ import annotations

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_insert
from gateway.node import GatewayNode

from .conftest import leader_of, node_configs, run, running, wait_for

MIN_FREE = 64 << 20


def _full(node: GatewayNode, free: int = 1 << 20) -> None:
    """Make ``node``'s monitor see a disk with ``free`` bytes left (no disk is filled)."""
    node.space.measure = lambda path: free


def _roomy(node: GatewayNode) -> None:
    node.space.measure = lambda path: 1 << 40


async def _write_code(api: str, key: int) -> tuple[grpc.StatusCode | None, str]:
    async with AsyncGatewayClient(api) as c:
        try:
            await c.write([row_insert("shop.items", {"id": key}, {"v": "x"})])
        except GatewayError as exc:
            return exc.code, exc.details
    return None, ""


def test_a_follower_short_of_space_stops_writes_on_every_node_and_reads_go_on(tmp_path):
    cfgs = node_configs(tmp_path, 3, space_check_ms=20)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            assert await _write_code(leader.config.api, 1) == (None, "")
            low = next(n for n in nodes if n is not leader)
            low_id = low.config.node_id
            _full(low)
            await wait_for(lambda: all(low_id in n.sm.alarms for n in nodes), what="alarm")
            for n in nodes:  # through the leader, and forwarded or refused by followers
                code, details = await _write_code(n.config.api, 10 + n.config.node_id)
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
                assert f"NOSPACE alarm of node {low_id}" in details
                assert "raft/wal" in details and str(tmp_path) not in details
                async with AsyncGatewayClient(n.config.api) as c, c.stream(window=4) as s:
                    fut = await s.send([row_insert("shop.items", {"id": 40}, {"v": "s"})])
                    with pytest.raises(GatewayError) as ei:
                        await fut
                    assert ei.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            async with AsyncGatewayClient(cfgs[0].api) as c:
                assert await c.get("shop.items", 1) == {"id": 1, "v": "x"}
                st = await c.status()
                assert [(a.node_id, a.path) for a in st.alarms] == [(low_id, "raft/wal")]
                assert st.alarms[0].free_bytes == 1 << 20
                assert st.alarms[0].min_free_bytes == MIN_FREE
                with pytest.raises(GatewayError) as ei:  # a batch is refused whole
                    await c.write_batch([[row_insert("shop.items", {"id": 50}, {"v": "y"})]])
                assert ei.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert leader.sm.get_row("shop", "items", [_int(50)]) is None
            _roomy(low)  # space returns: the node that raised it clears it
            await wait_for(lambda: not any(n.sm.alarms for n in nodes), what="cleared")
            await wait_for(lambda: low.space.refusal() is None, what="local cleared")
            for n in nodes:
                assert await _write_code(n.config.api, 20 + n.config.node_id) == (None, "")

    run(go(), timeout=90)


def test_the_alarm_is_raised_locally_at_once_and_survives_a_restart(tmp_path):
    """A node short of space refuses its writes itself before the alarm is applied; the
    applied alarm is stored, so a restart finds it, and clears it once space is back."""
    cfg = node_configs(tmp_path, 1, space_check_ms=20)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            _full(node)
            node.space.check()
            assert node.space.refusal() is not None  # before any entry is applied
            await wait_for(lambda: 1 in node.sm.alarms, what="alarm applied")
            code, details = await _write_code(cfg.api, 1)
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "node 1" in details
        async with running(cfg) as (node,):
            assert 1 in node.sm.alarms  # replicated state, loaded from the store
            await leader_of([node])
            # the real disk has room: the node clears its alarm through the log by itself
            await wait_for(lambda: not node.sm.alarms, what="cleared: this disk is roomy")
            assert await _write_code(cfg.api, 2) == (None, "")

    run(go(), timeout=60)


def test_an_operator_disarms_the_alarm_of_a_node_that_is_down(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n'
                      '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["admin"]\n')
    cfgs = node_configs(tmp_path, 3, space_check_ms=20, tokens_file=str(tokens))

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            low = next(n for n in nodes if n is not leader)
            low_id = low.config.node_id
            _full(low)
            await wait_for(lambda: all(low_id in n.sm.alarms for n in nodes), what="alarm")
            await low.stop()  # gone: it can no longer clear its own alarm
            api = leader.config.api
            for token, code in (("", grpc.StatusCode.UNAUTHENTICATED),
                                ("w", grpc.StatusCode.PERMISSION_DENIED)):
                async with AsyncGatewayClient(api, token=token) as c:
                    with pytest.raises(GatewayError) as ei:
                        await c.disarm_alarm(low_id)
                    assert ei.value.code == code
            assert low_id in leader.sm.alarms
            async with AsyncGatewayClient(api, token="a") as c:
                with pytest.raises(GatewayError) as ei:
                    await c.disarm_alarm(99)
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert "no alarm" in ei.value.details
                resp = await c.disarm_alarm(low_id)
                assert f"node {low_id}" in resp.message
            live = [n for n in nodes if n is not low]
            await wait_for(lambda: all(not n.sm.alarms for n in live), what="disarmed")
            async with AsyncGatewayClient(api, token="w") as c:
                await c.write([row_insert("shop.items", {"id": 7}, {"v": "z"})])

    run(go(), timeout=90)


def _int(v: int):
    from gateway.v1 import value_pb2

    return value_pb2.Value(int_value=v)
