"""The node's ``grpc.aio`` servers, accepting each registered method's calls several at a time.

Why: ``grpc.aio``'s server (grpcio 1.85) keeps *one* call requested from gRPC's core per registered
method. Its serving task awaits that request, then starts the call's task and requests the next --
about five event-loop iterations from one accepted call to the next request (the completion's
callback, the request task's end, ``asyncio.wait``'s callback, the serving task's resume, the new
request task's first step). Calls of one method are thus accepted one at a time, and how fast
depends on how long the loop's iterations are. A node's loop also runs Raft, the peer streams and
the state machine, so its iterations are long: 64 clients calling ``Write`` were accepted at a
fraction of the rate the node could serve, with a handful of them in the servicer at a time and the
rest waiting in gRPC's core (docs/benchmarks.md, "The gRPC servers accept each method's calls 32 at
a time").

What: :func:`aio_server` returns a ``grpc.aio.Server`` whose core server keeps
:data:`ACCEPT_DEPTH` calls requested per registered method and starts each accepted call
itself, with the coroutines gRPC's serving task would start (``_handle_rpc`` under
``_schedule_rpc_coro``: handler lookup, interceptors, cancellation, errors as gRPC handles
them). Calls of a method that arrive together are matched by core together and their
completions handled in one pass of the loop. Unregistered methods (reflection, a method no
service has) are accepted by gRPC's own serving task as before.

This relies on private parts of gRPC's Cython layer; :func:`aio_server` checks for them and
falls back to ``grpc.aio.server`` (logging once why) when a gRPC release changes them, so a
newer gRPC can cost speed, never correctness. ``tests/node/test_grpc_server.py`` fails on a
gRPC where the pooled accept is not in use.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Iterable, Sequence
from typing import Any, cast

import grpc

log = logging.getLogger(__name__)

__all__ = ["ACCEPT_DEPTH", "accepts_in_pools", "aio_server", "pooled_accept_unavailable"]

#: Calls kept requested per registered method. 8 already accepted 64 clients' unary calls as
#: fast as the node served them (4 accepted fewer); 32 leaves room for bursts. Each is a small
#: record in core and one idle task.
ACCEPT_DEPTH = 32

#: A gRPC channel argument: its value is an int or a string by key (gRPC's
#: ``ChannelArgumentType`` types it ``Any`` too).
ChannelOption = tuple[str, Any]
#: gRPC's per-call ``RPCState`` (cygrpc, Cython, has no type information).
RpcState = Any

_HANDLE_RPC_ARGS = ("method_name", "method_resolver", "interceptors", "rpc_state", "loop",
                    "concurrency_exceeded")
_SCHEDULE_ARGS = ("rpc_coro", "rpc_state", "loop", "method_name")


def _arg_names(fn: object) -> tuple[str, ...]:
    code = getattr(fn, "__code__", None)
    return tuple(code.co_varnames[:code.co_argcount]) if code is not None else ()


def _check_private_api() -> str:
    """Why the pooled accept cannot be used with the installed gRPC ('' if it can)."""
    try:
        from grpc._cython import cygrpc
        from grpc.aio import _server as aio_server_module
    except ImportError as exc:  # pragma: no cover - grpcio always has them today
        return f"gRPC's aio modules did not import ({exc})"
    missing = [name for name in ("_handle_rpc", "_schedule_rpc_coro", "_MethodResolver",
                                 "_RequestCallError", "AioServer", "get_working_loop")
               if not hasattr(cygrpc, name)]
    missing += [f"AioServer.{name}" for name in ("_make_request_call_future",
                                                  "_request_registered_call", "is_running",
                                                  "add_registered_method_handlers")
                if not hasattr(getattr(cygrpc, "AioServer", None), name)]
    missing += [f"grpc.aio._server.{name}" for name in ("Server", "_augment_channel_arguments")
                if not hasattr(aio_server_module, name)]
    if missing:
        return "missing " + ", ".join(missing)
    if _arg_names(cygrpc._handle_rpc) != _HANDLE_RPC_ARGS:
        return f"_handle_rpc takes {_arg_names(cygrpc._handle_rpc)}"
    if _arg_names(cygrpc._schedule_rpc_coro) != _SCHEDULE_ARGS:
        return f"_schedule_rpc_coro takes {_arg_names(cygrpc._schedule_rpc_coro)}"
    if inspect.iscoroutinefunction(cygrpc.AioServer._make_request_call_future):
        return "AioServer._make_request_call_future is a coroutine function"
    return ""


_UNAVAILABLE = _check_private_api()
_warned = False


def pooled_accept_unavailable() -> str:
    """Why :func:`aio_server` falls back to ``grpc.aio.server`` with this gRPC ('' when it
    does not)."""
    return _UNAVAILABLE


if not _UNAVAILABLE:
    from grpc._cython import cygrpc
    from grpc.aio import _server as _aio_server

    # cygrpc is Cython with no type information: its AioServer is Any to mypy.
    class _PooledAioServer(cygrpc.AioServer):  # type: ignore[misc]
        """gRPC's ``AioServer`` with :data:`ACCEPT_DEPTH` calls requested per registered
        method (module docstring). Its serving task gets, for each registered method, a
        future that only ends when the server stops; the pool accepts the method's calls."""

        def __init__(self, loop: asyncio.AbstractEventLoop,
                     interceptors: tuple[grpc.aio.ServerInterceptor, ...],
                     options: tuple[ChannelOption, ...], depth: int) -> None:
            # set before gRPC's __init__, which adds the (empty) generic handlers through
            # the method below
            self._p_loop = loop
            self._p_interceptors = interceptors
            self._p_depth = depth
            self._p_generic: list[grpc.GenericRpcHandler] = []
            # (each method's handler has its own message types: gRPC's own Any, Any)
            self._p_registered: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
            self._p_resolver: object = None  # a cygrpc._MethodResolver once a call came
            # method -> its serving task's placeholder
            self._p_pooled: dict[bytes, asyncio.Future[RpcState]] = {}
            self._p_tasks: set[asyncio.Task[None]] = set()
            super().__init__(loop, None, (), interceptors, options, None)

        def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]
                                     ) -> None:
            handlers = list(handlers)
            self._p_generic.extend(handlers)
            super().add_generic_rpc_handlers(handlers)

        def add_registered_method_handlers(
                self, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
            if not self.is_running():  # gRPC ignores (and logs) additions once running
                self._p_registered.update(handlers)
            super().add_registered_method_handlers(handlers)

        def _make_request_call_future(self, method_bytes: bytes | None
                                      ) -> asyncio.Future[RpcState]:
            if method_bytes is None or method_bytes in self._p_pooled:
                theirs: asyncio.Future[RpcState] = super()._make_request_call_future(
                    method_bytes)
                return theirs
            placeholder: asyncio.Future[RpcState] = self._p_loop.create_future()
            self._p_pooled[method_bytes] = placeholder
            name = method_bytes.decode()
            for _ in range(self._p_depth):
                self._request(method_bytes, name)
            return placeholder

        def _request(self, method_bytes: bytes, name: str) -> None:
            task = self._p_loop.create_task(self._request_registered_call(method_bytes))
            task.add_done_callback(functools.partial(self._accepted, method_bytes, name))

        def _accepted(self, method_bytes: bytes, name: str, task: asyncio.Task[RpcState]
                      ) -> None:
            """A request of ``name`` ended: start its call, and request another in its place
            -- also when starting the call failed, so that the method never runs out of
            requests while the server runs."""
            if task.cancelled():
                return
            exc = task.exception()
            if exc is not None and not isinstance(exc, cygrpc._RequestCallError):
                # a request core refused outright would fail again if re-issued; gRPC's
                # serving task stops the server then, and so does this
                log.error("gRPC server: requesting a call of %s failed (%r); stopping the "
                          "server", name, exc)
                self._stopping(method_bytes)
                self._p_loop.create_task(self.shutdown(None))
                return
            # (a _RequestCallError: core failed the request -- every request at shutdown, or
            # one transient failure, after which gRPC's serving task re-requests too)
            try:
                if exc is None:
                    self._start(name, task.result())
            finally:
                if self.is_running():
                    self._request(method_bytes, name)
                else:
                    self._stopping(method_bytes)

        def _start(self, name: str, rpc_state: RpcState) -> None:
            """Run the accepted call as gRPC's serving task would."""
            if self._p_resolver is None:
                self._p_resolver = cygrpc._MethodResolver(self._p_generic,
                                                          self._p_registered)
            coro = cygrpc._handle_rpc(name, self._p_resolver, self._p_interceptors,
                                      rpc_state, self._p_loop, False)
            rpc = self._p_loop.create_task(
                cygrpc._schedule_rpc_coro(coro, rpc_state, self._p_loop, name),
                name="rpc_task")
            self._p_tasks.add(rpc)
            rpc.add_done_callback(self._p_tasks.discard)

        def _stopping(self, method_bytes: bytes) -> None:
            """End the serving task's placeholder for the method the way a failed request
            would, so that the task sees the server stopping and exits."""
            placeholder = self._p_pooled.get(method_bytes)
            if placeholder is not None and not placeholder.done():
                placeholder.set_exception(cygrpc._RequestCallError())

        def pooled_methods(self) -> list[str]:
            return sorted(m.decode() for m in self._p_pooled)

    class _PooledServer(_aio_server.Server):
        """``grpc.aio.Server`` over :class:`_PooledAioServer` (the public class's
        ``__init__``, which builds gRPC's own ``AioServer``, is not called)."""

        def __init__(self, interceptors: Sequence[grpc.aio.ServerInterceptor],
                     options: Sequence[ChannelOption], depth: int) -> None:
            self._loop = cygrpc.get_working_loop()
            self._server = _PooledAioServer(
                self._loop, tuple(interceptors),
                _aio_server._augment_channel_arguments(options, None), depth)


def aio_server(*, options: Sequence[ChannelOption] = (),
               interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
               depth: int = ACCEPT_DEPTH) -> grpc.aio.Server:
    """A ``grpc.aio.Server`` as ``grpc.aio.server(options=..., interceptors=...)`` makes,
    accepting each registered method's calls ``depth`` at a time when the installed gRPC
    allows (module docstring); otherwise gRPC's own server, with one warning logged.
    Raises ``ValueError`` for an interceptor that is not a ``grpc.aio.ServerInterceptor``,
    as ``grpc.aio.server`` does."""
    global _warned
    invalid = [i for i in interceptors if not isinstance(i, grpc.aio.ServerInterceptor)]
    if invalid:  # as grpc.aio.server refuses them (a call would fail on each otherwise)
        raise ValueError(f"interceptors must be grpc.aio.ServerInterceptor, not {invalid!r}")
    if depth > 1 and not _UNAVAILABLE:
        try:
            # A grpc.aio.Server at runtime (grpc.aio._server.Server is what grpc.aio exports
            # under that name); the partial stubs declare their own class for it.
            return cast(grpc.aio.Server, _PooledServer(interceptors, options, depth))
        except TypeError as exc:  # gRPC's AioServer took other arguments
            reason = f"AioServer(...) refused its arguments ({exc})"
    else:
        reason = _UNAVAILABLE
    if reason and not _warned:
        _warned = True
        log.warning("gRPC %s: calls are accepted one at a time per method (%s)",
                    grpc.__version__, reason)
    return grpc.aio.server(options=list(options), interceptors=list(interceptors))


def accepts_in_pools(server: grpc.aio.Server) -> list[str]:
    """The methods ``server`` accepts in pools (empty for gRPC's own server or before it
    starts)."""
    inner = getattr(server, "_server", None)
    pooled = getattr(inner, "pooled_methods", None)
    return pooled() if pooled is not None else []
