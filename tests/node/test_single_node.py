"""One node in process: writes, reads, restart recovery, idempotency, invalid requests,
batches and streams, Subscribe with resume."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_delete, row_insert, row_update
from gateway.node import GatewayNode, NodeStartError
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, statement_pb2, value_pb2

from .conftest import leader_of, node_configs, run, running, wait_for


def test_write_read_update_delete_and_restart_recovery(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def first() -> tuple[int, int]:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                r1 = await c.write([row_insert("shop.items", {"id": 1}, {"name": "a", "qty": 5})])
                r2 = await c.write([row_update("shop.items", {"id": 1}, {"qty": 6}),
                                    row_insert("shop.items", {"id": 2}, {"name": "b", "qty": 1})])
                await c.write([row_delete("shop.items", {"id": 2})])
                assert (r1.gtid.server_id, r1.gtid.trans_id) == (1, 1)
                assert r2.gtid.trans_id == 2 and r2.log_index > r1.log_index
                assert r2.epoch >= r1.epoch > 0 and r2.commit_timestamp_ns > r1.commit_timestamp_ns
                assert await c.get("shop.items", 1) == {"id": 1, "name": "a", "qty": 6}
                assert await c.get("shop.items", 2) is None
                resp = await c.read("shop.items", 1, "lease")
                assert resp.row.author == 1 and resp.row.gtid.trans_id == 2
                assert resp.row.log_index == r2.log_index and resp.row.epoch == r2.epoch
            applied = node.sm.applied_index
        return applied, r2.commit_timestamp_ns

    applied, last_ts = run(first())

    async def second() -> None:
        # same data dir: recovers from the WAL and the store
        async with running(cfg) as (node,):
            await leader_of([node])
            assert node.sm.applied_index >= applied
            async with AsyncGatewayClient(cfg.api) as c:
                assert await c.get("shop.items", 1) == {"id": 1, "name": "a", "qty": 6}
                r = await c.write([row_insert("shop.items", {"id": 3},
                                              {"name": "c", "qty": 0})])
                assert r.gtid.trans_id == 4  # continues after the restart (3 was the delete)
                assert r.commit_timestamp_ns > last_ts

    run(second())


def test_replay_after_losing_the_unflushed_store(tmp_path):
    """The store is not fsynced: a restart replays the WAL from its durable applied index."""
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                for i in range(20):
                    await c.write([row_insert("t.kv", {"k": i}, {"v": str(i)})])
            # crash-like stop: abandon the store's memtable instead of flushing it
            node.sm.store.abandon()
            node.sm.close = lambda: None  # type: ignore[method-assign]
            node.sm.flush = lambda: None  # type: ignore[method-assign]
        async with running(cfg) as (node2,):
            await leader_of([node2])
            async with AsyncGatewayClient(cfg.api) as c:
                for i in range(20):
                    assert await c.get("t.kv", i, "stale") == {"k": i, "v": str(i)}

    run(go())


def test_idempotent_retry_applies_once(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                stmt = [row_insert("t.counter", {"id": 1}, {"n": 1})]
                a = await c.write(stmt, idempotency_key="k-1")
                await c.write([row_update("t.counter", {"id": 1}, {"n": 2})])
                b = await c.write(stmt, idempotency_key="k-1")  # a retry: must not reset n
                assert b.duplicate and not a.duplicate
                assert (b.gtid.trans_id, b.log_index) == (a.gtid.trans_id, a.log_index)
                assert await c.get("t.counter", 1) == {"id": 1, "n": 2}
                # two concurrent submissions of one key: one applies, one is a duplicate
                s2 = [row_insert("t.counter", {"id": 2}, {"n": 7})]
                x, y = await asyncio.gather(c.write(s2, idempotency_key="k-2"),
                                            c.write(s2, idempotency_key="k-2"))
                assert x.log_index == y.log_index and x.duplicate != y.duplicate

    run(go())


def test_retries_in_a_batch_or_a_stream_are_answered_without_proposing(tmp_path):
    """The leader probes a WriteBatch's or a StreamWrite request's keys at once: retries of
    applied writes among new ones get their first results, and only the new ones are
    proposed."""
    cfg = node_configs(tmp_path, 1)[0]

    def w(i: int, key: str) -> gateway_pb2.WriteRequest:
        return gateway_pb2.WriteRequest(statements=[row_insert("t.r", {"id": i}, {"v": i})],
                                        idempotency_key=key)

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            counters = node.driver.counters
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                first = (await stub.WriteBatch(gateway_pb2.WriteBatchRequest(
                    writes=[w(i, f"k{i}") for i in range(3)]), timeout=20)).results
                before = counters.writes_proposed
                again = (await stub.WriteBatch(gateway_pb2.WriteBatchRequest(
                    writes=[w(1, "k1"), w(3, "k3"), w(0, "k0")]), timeout=20)).results
                assert [(r.duplicate, r.log_index) for r in again] == [
                    (True, first[1].log_index), (False, again[1].log_index),
                    (True, first[0].log_index)]
                assert again[1].log_index > first[2].log_index
                assert counters.writes_proposed == before + 1

                async def reqs():
                    yield gateway_pb2.StreamWriteRequest(
                        seq=1, writes=[w(2, "k2"), w(4, "k4"), w(3, "k3")])

                acks = {a.seq: a.result async for r in stub.StreamWrite(reqs(), timeout=20)
                        for a in r.acks}
                assert [(acks[i].duplicate, acks[i].log_index) for i in (1, 3)] == [
                    (True, first[2].log_index), (True, again[1].log_index)]
                assert not acks[2].duplicate
                assert counters.writes_proposed == before + 2

    run(go())


def _bad(stmt: statement_pb2.Statement) -> gateway_pb2.WriteRequest:
    return gateway_pb2.WriteRequest(statements=[stmt])


def _null_key() -> gateway_pb2.WriteRequest:
    stmt = row_insert("t.items", {"id": 1})
    stmt.insert.records[0].key_values[0].null_value = value_pb2.NULL_VALUE
    return _bad(stmt)


@pytest.mark.parametrize(("make", "field", "words"), [
    (lambda: gateway_pb2.WriteRequest(), "statements", "at least one"),
    (lambda: _bad(statement_pb2.Statement()), "statements[0]", "no kind"),
    (lambda: _bad(row_insert("t.items", {})), "statements[0].insert.key_fields",
     "missing key"),
    (_null_key,
     "statements[0].insert.records[0].key_values[0]", "missing key"),
    (lambda: _bad(row_insert(".", {"id": 1})), "statements[0].insert.table.table_name",
     "missing table"),
    (lambda: _bad(row_insert("t.items", {"id": "x"})), "statements[0].insert.key_fields",
     "unknown table shape"),
    (lambda: _bad(row_insert("t.items", {"id": 1}, {"color": "red"})),
     "statements[0].insert.fields", "unknown table shape"),
    (lambda: _bad(row_insert("t.items", {"id": 1}, {"name": 5})),
     "statements[0].insert.fields[0].type", "wrong type"),
    # a value column repeating a key column (fields are the other columns written)
    (lambda: _bad(row_insert("t.items", {"id": 1}, {"name": "a", "id": 1})),
     "statements[0].insert.fields[1].name", "key column 'id' repeated"),
    (lambda: _bad(row_insert("t.fresh", {"id": 1}, {"id": 1, "name": "a"})),
     "statements[0].insert.fields[0].name", "key column 'id' repeated"),
    (lambda: gateway_pb2.WriteRequest(statements=[row_insert("t.items", {"id": 1})],
                                      idempotency_key="k" * 200), "idempotency_key", "128"),
])
def test_invalid_requests_name_the_field(tmp_path, make, field, words):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_insert("t.items", {"id": 0}, {"name": "first"})])
            before = node.sm.last_trans_id
            opts = [("grpc.max_send_message_length", 64 << 20)]
            async with grpc.aio.insecure_channel(cfg.api, options=opts) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    await stub.Write(make(), timeout=10)
            err = ei.value
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
            assert err.details().startswith(f"{field}:"), err.details()
            assert words in err.details()
            assert ("gateway-field", field) in tuple(err.trailing_metadata())
            await asyncio.sleep(0.05)
            assert node.sm.last_trans_id == before  # nothing proposed, nothing applied
            async with AsyncGatewayClient(cfg.api) as c:
                assert await c.get("t.items", 1) is None

    run(go())


def test_write_batch_is_all_or_nothing_and_stream_write(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                res = await c.write_batch([[row_insert("t.b", {"id": i}, {"v": i})]
                                           for i in range(50)])
                assert [r.gtid.trans_id for r in res] == list(range(1, 51))
                with pytest.raises(GatewayError) as ei:
                    await c.write_batch([[row_insert("t.b", {"id": 100}, {"v": 1})],
                                         [row_insert("t.b", {"id": 101}, {"v": "wrong"})]])
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert ei.value.field == "writes[1].statements[0].insert.fields[0].type"
                assert await c.get("t.b", 100) is None
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)

                async def reqs():
                    for i in range(200, 250):  # one write per request
                        one = gateway_pb2.WriteRequest(
                            statements=[row_insert("t.b", {"id": i}, {"v": i})])
                        yield gateway_pb2.StreamWriteRequest(seq=i, writes=[one])
                    # fifty writes in one request: seq 250..299
                    many = [gateway_pb2.WriteRequest(
                        statements=[row_insert("t.b", {"id": i}, {"v": i})])
                        for i in range(250, 300)]
                    yield gateway_pb2.StreamWriteRequest(seq=250, writes=many)
                    yield gateway_pb2.StreamWriteRequest(seq=999,
                                                         writes=[gateway_pb2.WriteRequest()])

                got = {a.seq: a async for r in stub.StreamWrite(reqs(), timeout=20) for a in r.acks}
            assert len(got) == 101
            assert got[999].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
            assert all(got[i].result.gtid.trans_id > 50 for i in range(200, 300))
            scan = await _scan(cfg.api, "t.b", 200, 210)
            assert [r.key_values[0].int_value for r in scan.rows] == list(range(200, 210))

    run(go())


async def _scan(api: str, table: str, lo: int, hi: int) -> gateway_pb2.ScanResponse:
    async with grpc.aio.insecure_channel(api) as ch:
        return await gateway_pb2_grpc.GatewayStub(ch).Scan(gateway_pb2.ScanRequest(
            table=table, start_key=[value_pb2.Value(int_value=lo)],
            end_key=[value_pb2.Value(int_value=hi)]), timeout=10)


def test_subscribe_streams_committed_transactions_and_resumes(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                written = [await c.write([row_insert("t.s", {"id": i}, {"v": i})])
                           for i in range(5)]
                dup = await c.write([row_insert("t.s", {"id": 0}, {"v": 0})],
                                    idempotency_key="same")
                await c.write([row_insert("t.s", {"id": 0}, {"v": 0})], idempotency_key="same")
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                events = []
                call = stub.Subscribe(gateway_pb2.SubscribeRequest(from_log_index=1))
                async for ev in call:
                    events.append(ev)
                    if len(events) == 3:
                        break
                call.cancel()
                assert [e.transaction.gtid.trans_id for e in events] == [1, 2, 3]
                # resume after the third: from its log index + 1
                call = stub.Subscribe(gateway_pb2.SubscribeRequest(
                    from_log_index=events[-1].log_index + 1))
                rest = []
                async for ev in call:
                    rest.append(ev)
                    if len(rest) == 3:
                        break
                call.cancel()
                assert [e.transaction.gtid.trans_id for e in rest] == [4, 5, dup.gtid.trans_id]
                assert rest[0].log_index == written[3].log_index
                # resume by GTID, and a live event arriving after subscribing
                req = gateway_pb2.SubscribeRequest()
                req.after_gtid.server_id, req.after_gtid.trans_id = 1, 5
                call = stub.Subscribe(req)
                first = await call.read()
                assert first.transaction.gtid.trans_id == dup.gtid.trans_id
                async with AsyncGatewayClient(cfg.api) as c:
                    live = await c.write([row_insert("t.s", {"id": 9}, {"v": 9})])
                nxt = await asyncio.wait_for(call.read(), 10)
                assert nxt.log_index == live.log_index  # the duplicate entry was skipped
                call.cancel()

    run(go())


def test_health_follows_leadership_and_status(tmp_path):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                h = health_pb2_grpc.HealthStub(ch)
                await wait_for(lambda: True)
                for _ in range(50):
                    r = await h.Check(health_pb2.HealthCheckRequest(service="gateway.v1.Gateway"))
                    if r.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                    await asyncio.sleep(0.05)
                assert r.status == health_pb2.HealthCheckResponse.SERVING
            async with AsyncGatewayClient(cfg.api) as c:
                st = await c.status()
            assert st.role == "leader" and st.leader_id == 1 and st.leader_api == cfg.api
            assert [m.node_id for m in st.members] == [1]

    run(go())


def test_write_stream_pipelines_writes_and_reports_each_failure(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                async with c.stream(window=64, max_per_request=16) as s:
                    futs = [await s.send([row_insert("t.s", {"id": i}, {"v": i})])
                            for i in range(300)]
                    bad = await s.send([row_insert("t.s", {"id": 1000}, {"v": "not an int"})])
                    more = [await s.send([row_insert("t.s", {"id": i}, {"v": i})])
                            for i in range(300, 320)]
                    results = await asyncio.gather(*futs, *more)
                    with pytest.raises(GatewayError) as ei:
                        await bad
                    assert s.in_flight == 0
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert "v" in str(ei.value)
                # Log order follows send order on one stream (one leader, one proposal queue).
                assert [r.log_index for r in results] == sorted(r.log_index for r in results)
                assert len({r.gtid.trans_id for r in results}) == 320
                assert await c.get("t.s", 319) == {"id": 319, "v": 319}
                assert await c.get("t.s", 1000) is None
                # A retry of a streamed write with its idempotency key is a duplicate.
                again = await c.write([row_insert("t.s", {"id": 0}, {"v": 0})],
                                      idempotency_key=futs[0].idempotency_key)
                assert again.duplicate and again.gtid == results[0].gtid
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)

                async def empty():
                    yield gateway_pb2.StreamWriteRequest(seq=1)

                with pytest.raises(grpc.aio.AioRpcError) as err:
                    async for _ in stub.StreamWrite(empty(), timeout=10):
                        pass
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "writes" in err.value.details()

    run(go())


def test_write_stream_fails_every_pending_write_when_the_node_goes_away(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                s = c.stream(window=8)
                ok = await s.send([row_insert("t.g", {"id": 1}, {"v": 1})])
                await ok
                await node.stop()
                futs = []
                with contextlib.suppress(GatewayError):
                    for i in range(2, 6):
                        futs.append(await s.send([row_insert("t.g", {"id": i}, {"v": i})]))
                for f in futs:
                    with pytest.raises(GatewayError) as ei:
                        await f
                    assert ei.value.code in (grpc.StatusCode.UNAVAILABLE,
                                             grpc.StatusCode.CANCELLED)
                with pytest.raises(GatewayError):
                    await s.send([row_insert("t.g", {"id": 9}, {"v": 9})])
                await s.close()

    run(go())


def test_running_stops_its_nodes_when_the_test_body_fails(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]
    started: list[GatewayNode] = []

    async def go() -> None:
        with pytest.raises(RuntimeError, match="the test failed"):
            async with running(cfg) as (node,):
                started.append(node)
                raise RuntimeError("the test failed")
        (node,) = started
        assert node._closed.is_set()  # stopped: API and peer ports closed, data dir unlocked
        async with running(cfg) as (again,):  # the same ports and data directory start again
            await leader_of([again])

    run(go())


def test_a_second_node_on_an_api_address_in_use_refuses_to_start(tmp_path):
    """gRPC binds with SO_REUSEPORT by default: a second server on the same address would
    share it, and clients would reach either node. The node turns that off, so the second one
    fails to start, naming the address."""
    first = node_configs(tmp_path / "one", 1)[0]
    other = node_configs(tmp_path / "two", 1)[0]
    second = dataclasses.replace(other, api=first.api)

    async def go() -> None:
        async with running(first) as (node,):
            await leader_of([node])
            late = GatewayNode(second)
            with pytest.raises(NodeStartError, match=rf"^api: cannot listen on {second.api}"):
                await late.start()
            await late.stop()
            async with AsyncGatewayClient(first.api) as c:  # the first node still serves
                await c.write([row_insert("t.one", {"id": 1}, {"v": 1})])
                assert await c.get("t.one", 1) == {"id": 1, "v": 1}

    run(go())
