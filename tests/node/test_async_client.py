"""``AsyncGatewayClient`` has what ``GatewayClient`` has (the two faces kept symmetric, as
httpx keeps Client and AsyncClient): the same methods with the same parameters, the requests
built by one shared code path, and each method the async client gained checked against a
live node."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from gateway.client import (
    AsyncChangeEvents,
    AsyncGatewayClient,
    GatewayClient,
    GatewayError,
    row_insert,
)

from .conftest import leader_of, node_configs, run, running, wait_for

#: Methods only one face has, and why.
ASYNC_ONLY = {"stream"}  # WriteStream keeps many writes in flight on the event loop


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_async_client_has_every_method_of_the_sync_client_with_the_same_parameters():
    assert _public(GatewayClient) == _public(AsyncGatewayClient) - ASYNC_ONLY
    for name in sorted(_public(GatewayClient) - {"close"}):
        sync = inspect.signature(getattr(GatewayClient, name))
        asyn = inspect.signature(getattr(AsyncGatewayClient, name))
        assert sync.parameters == asyn.parameters, name
    # every call of the async client is awaitable, except the streams it opens and the
    # pages it reads (``async for``)
    for name in _public(AsyncGatewayClient) - {"stream", "subscribe", "scan_all"}:
        assert inspect.iscoroutinefunction(getattr(AsyncGatewayClient, name)), name
    assert inspect.isasyncgenfunction(AsyncGatewayClient.scan_all)


def test_both_faces_build_the_same_requests():
    """The request builders live once, in the common base: the faces cannot drift."""
    for name in ("_read_request", "_scan_request", "_subscribe_request", "_conflicts_request",
                 "_add_channel_request", "_channel_action_request", "_alarm_request",
                 "_write_bytes", "_batch_bytes", "_batch_results"):
        assert name not in vars(GatewayClient) and name not in vars(AsyncGatewayClient), name
        assert inspect.getattr_static(GatewayClient, name) \
            is inspect.getattr_static(AsyncGatewayClient, name), name


def test_async_scan_and_subscribe_against_a_live_node(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                written = [await c.write([row_insert("t.s", {"id": i}, {"v": i * 10})])
                           for i in range(5)]
                page = await c.scan("t.s", 1, 4)
                assert [r.key_values[0].int_value for r in page.rows] == [1, 2, 3]
                assert [r.values[0].int_value for r in page.rows] == [10, 20, 30]
                limited = await c.scan("t.s", limit=2, consistency="stale")
                assert [r.key_values[0].int_value for r in limited.rows] == [0, 1]
                # the sync face answers the same request with the same rows
                same = await asyncio.to_thread(
                    lambda: GatewayClient(cfg.api).scan("t.s", 1, 4))
                assert list(same.rows) == list(page.rows)

                events = c.subscribe(from_log_index=1)
                assert isinstance(events, AsyncChangeEvents)
                got = []
                async for ev in events:
                    got.append(ev.transaction.gtid.trans_id)
                    if len(got) == 3:
                        break
                events.cancel()
                assert got == [1, 2, 3]
                after = c.subscribe(after_gtid=(1, 4))
                first = await after.__anext__()
                assert first.log_index == written[4].log_index
                after.cancel()
                # a failed stream raises GatewayError, as every other call does
                idle = c.subscribe(from_log_index=written[-1].log_index + 1, timeout=0.5)
                with pytest.raises(GatewayError) as err:
                    async for _ in idle:
                        pass
                assert err.value.code.name == "DEADLINE_EXCEEDED"

    run(go())


def test_async_channels_and_conflicts_against_a_live_node(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])

            def rules() -> dict[str, str]:
                return {r.table: f"{r.function}({','.join(r.args)})"
                        for r in node.status().conflict_rules}

            def channel() -> dict[str, object]:
                return {ch.name: ch.paused for ch in node.status().channels}

            async with AsyncGatewayClient(cfg.api) as c:
                await c.set_conflict_rule("crm.*", "NDB$MAX(ts)")
                await wait_for(lambda: rules() == {"crm.*": "NDB$MAX(ts)"}, 10, "the rule")
                await c.set_conflict_role("PRIMARY")
                await wait_for(lambda: node.status().conflict_role == "PRIMARY", 10, "role")
                await c.unset_conflict_rule("crm.*")
                await wait_for(lambda: rules() == {}, 10, "the rule removed")
                with pytest.raises(GatewayError, match="NOPE"):
                    await c.set_conflict_rule("crm.*", "MY$NOPE")

                await c.add_channel("fromB", ["127.0.0.1:1"], source_id=2)
                await wait_for(lambda: channel() == {"fromB": False}, 10, "the channel")
                await c.channel_action("fromB", "pause")
                await wait_for(lambda: channel() == {"fromB": True}, 10, "paused")
                await c.channel_action("fromB", "remove")
                await wait_for(lambda: channel() == {}, 10, "removed")
                assert (await c.status()).conflict_role == "PRIMARY"

    run(go())
