"""The node's gRPC servers accept each registered method's calls several at a time
(gateway/node/api/grpc_server.py) and otherwise behave as ``grpc.aio.server``'s."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import grpc
import pytest

from gateway.node.api.grpc_server import (
    ACCEPT_DEPTH,
    accepts_in_pools,
    aio_server,
    pooled_accept_unavailable,
)

from .conftest import leader_of, node_configs, run, running

SERVICE = "test.Pool"


def _service(server: grpc.aio.Server, handlers: dict[str, Any]) -> None:
    """Register ``handlers`` (name -> unary coroutine on raw bytes) as the node does its
    services: generic and registered."""
    built = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, built),))
    server.add_registered_method_handlers(SERVICE, built)


async def _serve(server: grpc.aio.Server) -> str:
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return f"127.0.0.1:{port}"


def test_the_installed_grpc_gets_the_pooled_accept() -> None:
    # Fails when a gRPC release changes the private parts the pool uses: the node then falls
    # back to gRPC's own accept (one call at a time per method) and this module needs a look.
    assert pooled_accept_unavailable() == ""

    async def main() -> list[str]:
        server = aio_server()

        async def echo(request: bytes, context: Any) -> bytes:
            return request

        _service(server, {"Echo": echo, "Other": echo})
        await _serve(server)
        try:
            return accepts_in_pools(server)
        finally:
            await server.stop(None)

    assert run(main()) == [f"/{SERVICE}/Echo", f"/{SERVICE}/Other"]


def _iterations_to_accept(make_server: Any, calls: int) -> int:
    """Loop iterations from the end of a 0.4 s block of the server's event loop, during which
    ``calls`` calls of one method arrived, until all of them are in the handler."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        iterations = 0

        def tick() -> None:
            nonlocal iterations
            iterations += 1
            loop.call_soon(tick)

        entered: list[int] = []
        all_in = asyncio.Event()
        release = asyncio.Event()

        async def hold(request: bytes, context: Any) -> bytes:
            entered.append(iterations)
            if len(entered) == calls:
                all_in.set()
            await release.wait()
            return b"ok"

        server = make_server()
        _service(server, {"Hold": hold})
        target = await _serve(server)
        results: list[Any] = []

        def client() -> None:
            with grpc.insecure_channel(target) as channel:
                grpc.channel_ready_future(channel).result(timeout=10)
                stub = channel.unary_unary(f"/{SERVICE}/Hold", _registered_method=True)
                ready.set()
                futures = [stub.future(b"x", timeout=30) for _ in range(calls)]
                results.extend(f.result() for f in futures)

        ready = threading.Event()
        thread = threading.Thread(target=client)
        thread.start()
        try:
            await asyncio.to_thread(ready.wait, 10)
            time.sleep(0.4)  # the loop is busy: the calls arrive in gRPC's core meanwhile
            start = iterations
            loop.call_soon(tick)
            await asyncio.wait_for(all_in.wait(), 20)
            release.set()
            await asyncio.to_thread(thread.join, 20)
            assert results == [b"ok"] * calls
            return entered[-1] - start
        finally:
            release.set()
            await server.stop(None)

    return run(main())


def test_calls_that_arrive_together_are_accepted_together() -> None:
    # gRPC's own server accepts one call per method every ~5 loop iterations (module
    # docstring): 16 calls take ~80 or more. The pool has them all in the handler within a
    # few. (Up to five tries, each measuring both servers one after the other: a machine busy
    # with other work -- a CI run -- delays the calls' arrival and the poller thread's turn
    # for the GIL, which adds iterations to both; CI runs measured 26 and, once, 240 pooled
    # against 129 one at a time, where a quiet machine gives 6-12 against ~80. The bound
    # stays under what one call per ~3 iterations would take. A CI run once measured every
    # try slow for both -- (416, 2377), (109, 2102), (330, 2120), (735, 410), (302, 607):
    # the loop spins while the calls are late -- so a try also passes when the pool took at
    # least 5 times fewer iterations than one at a time, whatever both took: a pool that no
    # longer accepts calls together takes as many.)
    tries = []
    for _ in range(5):
        pooled = _iterations_to_accept(aio_server, 16)
        one_at_a_time = _iterations_to_accept(lambda: aio_server(depth=1), 16)
        tries.append((pooled, one_at_a_time))
        if one_at_a_time >= 3 * pooled and (pooled <= 48 or one_at_a_time >= 5 * pooled):
            break
    else:
        raise AssertionError(f"(pooled, one at a time) iterations in each try: {tries}")


def test_more_calls_than_the_depth_are_all_served() -> None:
    async def main() -> list[bytes]:
        server = aio_server(depth=2)
        gate = asyncio.Event()
        waiting = 0

        async def hold(request: bytes, context: Any) -> bytes:
            nonlocal waiting
            waiting += 1
            if waiting == 10:
                gate.set()
            await gate.wait()
            return request

        _service(server, {"Hold": hold})
        target = await _serve(server)
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = channel.unary_unary(f"/{SERVICE}/Hold", _registered_method=True)
                return list(await asyncio.gather(*(stub(bytes([i])) for i in range(10))))
        finally:
            await server.stop(None)

    assert run(main()) == [bytes([i]) for i in range(10)]


class _NeedsToken(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        if ("token", "t") in tuple(details.invocation_metadata):
            return await continuation(details)

        async def deny(request: bytes, context: Any) -> bytes:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
            return b""

        return grpc.unary_unary_rpc_method_handler(deny)


@pytest.mark.parametrize("depth", [ACCEPT_DEPTH, 1])
def test_pooled_calls_get_interceptors_errors_and_statuses_as_grpc_gives_them(
        depth: int) -> None:
    async def main() -> dict[str, Any]:
        server = aio_server(interceptors=[_NeedsToken()], depth=depth)

        async def echo(request: bytes, context: Any) -> bytes:
            return request

        async def fail(request: bytes, context: Any) -> bytes:
            raise ValueError("boom")

        async def abort(request: bytes, context: Any) -> bytes:
            context.set_trailing_metadata((("gateway-field", "x"),))
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x: bad")
            return b""

        _service(server, {"Echo": echo, "Fail": fail, "Abort": abort})
        target = await _serve(server)
        out: dict[str, Any] = {}
        token = (("token", "t"),)
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                def call(name: str) -> Any:
                    return channel.unary_unary(f"/{SERVICE}/{name}", _registered_method=True)

                out["echo"] = await call("Echo")(b"hi", metadata=token)
                for name, metadata in (("Echo", ()), ("Fail", token), ("Abort", token),
                                       ("Missing", token)):
                    try:
                        await call(name)(b"hi", metadata=metadata)
                    except grpc.aio.AioRpcError as exc:
                        out[f"{name}/{bool(metadata)}"] = (
                            exc.code(), exc.details(), tuple(exc.trailing_metadata() or ()))
        finally:
            await server.stop(None)
        return out

    out = run(main())
    assert out["echo"] == b"hi"
    assert out["Echo/False"][:2] == (grpc.StatusCode.UNAUTHENTICATED, "no token")
    assert out["Fail/True"][0] == grpc.StatusCode.UNKNOWN
    assert "boom" in out["Fail/True"][1]
    assert out["Abort/True"][:2] == (grpc.StatusCode.INVALID_ARGUMENT, "x: bad")
    assert ("gateway-field", "x") in out["Abort/True"][2]
    assert out["Missing/True"][0] == grpc.StatusCode.UNIMPLEMENTED


def test_a_stop_ends_held_calls_and_leaves_no_task_or_error_behind(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[float, Any, set[str]]:
        server = aio_server()
        entered = asyncio.Event()

        async def hold(request: bytes, context: Any) -> bytes:
            entered.set()
            await asyncio.sleep(60)
            return b""

        _service(server, {"Hold": hold})
        target = await _serve(server)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = channel.unary_unary(f"/{SERVICE}/Hold", _registered_method=True)
            call = asyncio.ensure_future(stub(b"x"))
            await asyncio.wait_for(entered.wait(), 10)
            t0 = time.monotonic()
            await server.stop(grace=0.2)
            took = time.monotonic() - t0
            try:
                await asyncio.wait_for(call, 10)
                code: Any = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
        await asyncio.sleep(0.05)
        left = {t.get_name() for t in asyncio.all_tasks()} - {asyncio.current_task().get_name()}
        return took, code, left

    with caplog.at_level(logging.WARNING):
        took, code, left = run(main())
    assert took < 5
    assert code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    assert not any(name.startswith(("rpc_task", "HandleExceptions")) for name in left), left
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_node_accepts_every_gateway_method_in_pools(tmp_path: Any) -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with running(*node_configs(tmp_path, 1)) as nodes:
            node = await leader_of(nodes)
            peer, api = node._servers
            return accepts_in_pools(api), accepts_in_pools(peer)

    api, peer = run(main())
    assert "/gateway.v1.Gateway/Write" in api
    assert "/gateway.v1.Gateway/StreamWrite" in api
    assert any(m.startswith("/gateway.v1.Peer/") for m in peer), peer


def test_a_call_that_fails_to_start_leaves_its_method_accepting(
        caplog: pytest.LogCaptureFixture) -> None:
    # Both of the method's requests end in a call whose start raises (a bug, say): each is
    # requested again all the same, so the method keeps accepting calls.
    async def main() -> tuple[list[Any], bytes]:
        server = aio_server(depth=2)

        async def echo(request: bytes, context: Any) -> bytes:
            return request

        _service(server, {"Echo": echo})
        target = await _serve(server)
        inner = server._server  # type: ignore[attr-defined]
        real_start = inner._start
        failures = 0

        def start(name: str, rpc_state: Any) -> None:
            nonlocal failures
            if failures < 2:
                failures += 1
                raise RuntimeError("cannot start")
            real_start(name, rpc_state)

        inner._start = start
        codes = []
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = channel.unary_unary(f"/{SERVICE}/Echo", _registered_method=True)
                for _ in range(2):
                    try:
                        await stub(b"lost", timeout=0.5)
                    except grpc.aio.AioRpcError as exc:
                        codes.append(exc.code())
                answer = await stub(b"served", timeout=10)
        finally:
            await server.stop(None)
        return codes, answer

    with caplog.at_level(logging.ERROR):
        codes, answer = run(main())
    assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * 2
    assert answer == b"served"
    assert "cannot start" in caplog.text


@pytest.mark.parametrize("depth", [ACCEPT_DEPTH, 1])
def test_an_interceptor_of_the_wrong_kind_is_refused_when_the_server_is_made(depth: int) -> None:
    class Sync(grpc.ServerInterceptor):  # the threaded server's kind
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            return continuation(details)

    async def main() -> None:
        with pytest.raises(ValueError, match="ServerInterceptor"):
            aio_server(interceptors=[Sync()], depth=depth)

    run(main())

