"""``coalesce_reads`` / ``coalesce_writes`` of both Python clients (gateway.client.coalesce)
against a live node: the calls waiting at one moment reach the node as ``ReadBatch`` /
``WriteBatch`` calls, and each caller gets what the lone call gives it -- its row, its
result, its own refusal."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gateway.client import (
    AsyncGatewayClient,
    Condition,
    GatewayClient,
    GatewayError,
    PreconditionFailed,
    row_insert,
)

from .conftest import leader_of, node_configs, run, running


class _Counted:
    """A stub whose method lookups are counted by name."""

    def __init__(self, stub: Any, seen: Counter[str]) -> None:
        self._stub, self._seen = stub, seen

    def __getattr__(self, name: str) -> Any:
        self._seen[name] += 1
        return getattr(self._stub, name)


def _count_calls(client: Any) -> Counter[str]:
    seen: Counter[str] = Counter()
    stub = client._stub
    client._stub = lambda raw=False: _Counted(stub(raw), seen)
    return seen


def _rows(n: int) -> list[Any]:
    return [[row_insert("co.t", {"id": i}, {"v": f"v{i}"})] for i in range(n)]


def test_async_coalesced_reads_and_writes_answer_each_caller_as_the_lone_call(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, coalesce_reads=16,
                                          coalesce_writes=16) as c:
                seen = _count_calls(c)
                results = await asyncio.gather(*(c.write(w) for w in _rows(40)))
                assert len({r.log_index for r in results}) <= 40
                assert len({(r.gtid.server_id, r.gtid.trans_id) for r in results}) == 40
                assert seen["WriteBatch"] >= 1 and seen["Write"] == 0
                assert seen["WriteBatch"] < 40

                # a write whose condition fails is refused alone, as a lone write is
                taken = Condition.absent("co.t", 3)
                got = await asyncio.gather(
                    c.write([row_insert("co.t", {"id": 3}, {"v": "again"})],
                            conditions=[taken]),
                    *(c.write(w) for w in _rows(50)[45:]), return_exceptions=True)
                assert isinstance(got[0], PreconditionFailed)
                assert got[0].condition_index == 0 and got[0].table == "co.t"
                assert all(not isinstance(g, BaseException) for g in got[1:])

                seen.clear()
                keys = list(range(60))  # 0-39 and 45-49 written
                rows = await asyncio.gather(*(c.get("co.t", k) for k in keys))
                for k, row in zip(keys, rows, strict=True):
                    present = k < 40 or 45 <= k < 50
                    assert (row == {"id": k, "v": f"v{k}"}) if present else row is None, k
                assert seen["ReadBatch"] >= 1 and seen["Read"] == 0 and seen["ReadBatch"] < 60
                stale = await asyncio.gather(*(c.read("co.t", k, "stale") for k in (1, 2)))
                assert all(r.found for r in stale)

                # a bad key fails only its own read, with the lone read's error
                plain = AsyncGatewayClient(cfg.api)
                with pytest.raises(GatewayError) as lone:
                    await plain.read("co.t", "not-an-int")
                await plain.close()
                got = await asyncio.gather(c.read("co.t", "not-an-int"),
                                           *(c.read("co.t", k) for k in range(5)),
                                           return_exceptions=True)
                assert isinstance(got[0], GatewayError)
                assert (got[0].code, got[0].field) == (lone.value.code, lone.value.field)
                assert all(not isinstance(g, BaseException) and g.found for g in got[1:])

    run(go())


def test_sync_coalesced_reads_and_writes_from_threads_answer_each_caller(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    def work() -> None:
        with GatewayClient(cfg.api, coalesce_reads=8, coalesce_writes=8) as c, \
                ThreadPoolExecutor(24) as pool:
            seen = _count_calls(c)
            results = list(pool.map(c.write, _rows(48)))
            assert len({(r.gtid.server_id, r.gtid.trans_id) for r in results}) == 48
            assert seen["Write"] == 0 and 1 <= seen["WriteBatch"] < 48
            taken = Condition.absent("co.t", 7)
            with pytest.raises(PreconditionFailed) as refused:
                c.write([row_insert("co.t", {"id": 7}, {"v": "again"})], conditions=[taken])
            assert refused.value.condition_index == 0
            seen.clear()
            rows = list(pool.map(lambda k: c.get("co.t", k), range(60)))
            assert rows == [{"id": k, "v": f"v{k}"} if k < 48 else None for k in range(60)]
            assert seen["Read"] == 0 and 1 <= seen["ReadBatch"] < 60
            with pytest.raises(GatewayError) as bad:
                c.read("co.t", "not-an-int", timeout=10)
            assert bad.value.code.name == "INVALID_ARGUMENT"

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            await asyncio.to_thread(work)

    run(go())


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("gateway-coalesce")]


def test_a_coalesced_call_ends_at_its_own_timeout_and_close_ends_the_workers():
    # nothing listens on the target: the batch's retries outlast the call's own timeout
    c = GatewayClient("127.0.0.1:9", coalesce_reads=4, attempt_timeout=0.2, timeout=3)
    with pytest.raises(GatewayError) as late:
        c.read("co.t", 1, timeout=0.5)
    assert late.value.code.name == "DEADLINE_EXCEEDED"
    assert _workers()
    c.close()
    for t in _workers():
        t.join(10)  # a worker ends once its batch call gives up (the client's timeout)
    assert not _workers()

    async def go() -> None:
        a = AsyncGatewayClient("127.0.0.1:9", coalesce_writes=4, attempt_timeout=0.2)
        with pytest.raises(GatewayError) as err:
            await a.write(_rows(1)[0], timeout=0.5)
        assert err.value.code.name == "DEADLINE_EXCEEDED"
        await a.close()

    run(go())


@pytest.mark.parametrize("kw", [{"coalesce_reads": -1}, {"coalesce_writes": 10001}])
def test_a_batch_size_out_of_range_is_refused(kw):
    with pytest.raises(ValueError, match="1 to 10000"):
        GatewayClient("127.0.0.1:9", **kw)
