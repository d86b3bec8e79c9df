"""Paged scans: ``ScanRequest.start_after`` starts a page after its key, and the clients'
``scan_all`` reads every page of a table in key order -- also when the response's size lets
only one row through per page, where a page started at the previous page's last key (the
inclusive start) would read that row again for ever."""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest

from gateway.cli.sql import parse_select
from gateway.cli.sql_select import run_select
from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, _Base, row_insert
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, value_pb2

from .conftest import node_configs, run, running


def _key(row: gateway_pb2.Row) -> tuple:
    return tuple(v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                 for v in row.key_values)


async def _write_grid(c: AsyncGatewayClient, n_a: int, n_b: int) -> None:
    """Rows of ``t.grid`` with key ``(a, b)``: ``a`` in ``range(n_a)``, ``b`` the strings
    ``"b0000"``.. (written in reverse: the store orders them, not the writes)."""
    for a in reversed(range(n_a)):
        await c.write([row_insert("t.grid", {"a": a, "b": f"b{b:04d}"}, {"v": a * n_b + b})
                       for b in reversed(range(n_b))])


def test_scan_all_reads_every_page_in_key_order_sync_and_async(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def body() -> None:
        async with running(cfg):
            async with AsyncGatewayClient(cfg.api) as c:
                await _write_grid(c, 5, 501)  # 2,505 rows: pages of 1,000 and of 7
                got = [_key(r) async for r in c.scan_all("t.grid")]
                small = [_key(r) async for r in c.scan_all("t.grid", page=7)]
                # bounds: from (1, "b0100") inclusive up to (3, "b0000") exclusive
                bounded = [_key(r) async for r in c.scan_all(
                    "t.grid", start=[1, "b0100"], end=[3, "b0000"], page=250)]

            def sync_scans() -> tuple[list, list]:
                with GatewayClient(cfg.api) as s:
                    every = [_key(r) for r in s.scan_all("t.grid", page=1000,
                                                         consistency="stale")]
                    one = s.scan("t.grid", limit=1000)
                return every, [_key(r) for r in one.rows] + [one.more]

            every, first_page = await asyncio.to_thread(sync_scans)
        want = [(a, f"b{b:04d}") for a in range(5) for b in range(501)]
        assert got == want
        assert small == want
        assert every == want
        assert first_page == [*want[:1000], True]  # one call is one page
        assert bounded == [k for k in want if (1, "b0100") <= k < (3, "b0000")]

    run(body())


def test_start_after_excludes_the_start_key(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def body() -> None:
        async with running(cfg):
            async with AsyncGatewayClient(cfg.api) as c:
                await _write_grid(c, 3, 3)
                after_row = await c.scan("t.grid", start=[1, "b0001"], start_after=True)
                at_row = await c.scan("t.grid", start=[1, "b0001"])
                after_last = await c.scan("t.grid", start=[2, "b0002"], start_after=True)
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    await gateway_pb2_grpc.GatewayStub(ch).Scan(
                        gateway_pb2.ScanRequest(table="t.grid", start_after=True))
        assert [_key(r) for r in after_row.rows] == \
            [(1, "b0002"), (2, "b0000"), (2, "b0001"), (2, "b0002")]
        assert _key(at_row.rows[0]) == (1, "b0001")
        assert list(after_last.rows) == [] and not after_last.more
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert ei.value.details().startswith("start_after: ")

    run(body())


def test_scan_all_moves_on_when_each_page_holds_one_big_row(tmp_path):
    """Rows of 2.5 MiB: a response (under 4 MiB) carries one, with ``more``."""
    cfg = node_configs(tmp_path, 1)[0]
    big = "x" * (5 << 19)

    async def body() -> None:
        async with running(cfg), AsyncGatewayClient(cfg.api) as c:
            for i in range(3):
                await c.write([row_insert("t.wide", {"id": i}, {"v": big})])
            page = await c.scan("t.wide")
            rows = await asyncio.wait_for(_collect(c.scan_all("t.wide")), 30)

            selected: list[int] = []

            def select() -> None:  # gateway sql "SELECT ...": the CLI's paging
                with GatewayClient(cfg.api) as s:
                    _, got = run_select(s, parse_select("SELECT id FROM t.wide WHERE id >= 0"))
                selected.extend(r.key_values[0].int_value for r in got)

            t = threading.Thread(target=select, daemon=True)  # a regression loops: not joined
            t.start()
            await asyncio.to_thread(t.join, 30)
        assert len(page.rows) == 1 and page.more
        assert [r.key_values[0].int_value for r in rows] == [0, 1, 2]
        assert all(len(r.values[0].string_value) == len(big) for r in rows)
        assert selected == [0, 1, 2]

    run(body())


async def _collect(it):  # type: ignore[no-untyped-def]
    return [r async for r in it]


def _row(k: int) -> gateway_pb2.Row:
    return gateway_pb2.Row(key_values=[value_pb2.Value(int_value=k)])


def test_scan_all_against_a_node_without_start_after_skips_the_repeated_row_or_stops():
    """A node older than ``start_after`` ignores it and starts each page at the key given:
    the repeated first row is left out, and a page that brings nothing new ends the scan
    with an error rather than asking for it again for ever."""
    base = _Base
    req = gateway_pb2.ScanRequest(table="t.x", limit=2)
    first = gateway_pb2.ScanResponse(rows=[_row(1), _row(2)], more=True)
    assert [r.key_values[0].int_value for r in base._page_rows(req, first)] == [1, 2]
    assert base._next_page(req, first) and req.start_after
    assert [v.int_value for v in req.start_key] == [2]
    old = gateway_pb2.ScanResponse(rows=[_row(2), _row(3)], more=True)  # began at 2 again
    assert [r.key_values[0].int_value for r in base._page_rows(req, old)] == [3]
    assert base._next_page(req, old)
    stuck = gateway_pb2.ScanResponse(rows=[_row(3)], more=True)  # only the row asked after
    assert list(base._page_rows(req, stuck)) == []
    with pytest.raises(GatewayError) as ei:
        base._next_page(req, stuck)
    assert "cannot page past" in ei.value.details
    assert not base._next_page(req, gateway_pb2.ScanResponse(rows=[_row(4)], more=False))
