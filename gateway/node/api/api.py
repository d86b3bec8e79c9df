"""The public ``gateway.v1.Gateway`` service of a node.

Semantics (details in docs/node.md, "API"):

- Writes (Write, WriteBatch, StreamWrite) return once the transaction is committed *and*
  applied to the leader's store. A follower forwards them to the leader over the peer channel
  (``Peer.Forward``); with no leader the call fails UNAVAILABLE and the trailing metadata
  ``gateway-leader-id`` / ``gateway-leader-api`` name the leader when one is known.
- Reads: LINEARIZABLE (ReadIndex confirmed by a quorum), LEASE (leader lease), STALE (this
  node's store as it is). Followers serve linearizable reads after the leader confirmed the
  read index.
- Every call has a deadline: the client's, capped at ``MAX_DEADLINE`` seconds.
- Bad requests: INVALID_ARGUMENT, message ``field: reason``, trailing metadata
  ``gateway-field``; nothing of a rejected write (or of a WriteBatch holding one) is applied.
  A request that does not parse is INVALID_ARGUMENT too (field ``request``, see
  ``api_handlers``); one over ``max_request_bytes`` is RESOURCE_EXHAUSTED.
- A conditional write whose condition fails when it is applied: FAILED_PRECONDITION, message
  ``conditions[i]: schema.table key (...): why``, trailing ``gateway-field``; in a
  WriteBatch only that write is refused (``WriteBatchResponse.errors``), in a StreamWrite its
  ack carries the code, message and field.

Reads run in ``reads``, the admin operations in ``admin``; this module keeps the dispatch,
the forwarding, the error mapping and the writes.

Size: ~630 lines because the servicer holds every method of ``gateway.v1.Gateway`` and the
forwarding and error mapping they share; ``StreamWrite`` alone is ~150 of them. Next to
split off: ``StreamWrite``'s window and acknowledgement loop (a ``stream_write`` module
beside ``api_handlers``), then the admin and channel methods (``_*_local``), which only
forward to the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Set
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as PbMessage

from gateway.node.api import admin, operator, reads
from gateway.node.api.api_handlers import (
    KEEPS_BYTES,
    ReceivedRequest,
    Request,
    Response,
    serialized,
)
from gateway.node.api.call_context import CallContext
from gateway.node.api.schema_change import CHANGE_SCHEMA, change_schema
from gateway.node.api.security import AuthError, authorize, bearer_metadata, token_permissions
from gateway.node.base.errors import (
    DataLossError,
    NodeError,
    NodeStoppedError,
    NoSpaceError,
    NotLeaderError,
    PreconditionFailed,
    ProposalLostError,
    ReadTimeoutError,
    RequestTooLargeError,
    StorageFailedError,
)
from gateway.node.base.validation import (
    InvalidRequest,
    check_idempotency_key,
)
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.alarms import disarm
from gateway.node.state.conditions import check_conditions
from gateway.node.state.wire import ack_bytes, frame_batch_flagged, frame_field, frame_request
from gateway.node.storage.storage_errors import client_error
from gateway.v1 import (
    gateway_pb2,
    gateway_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
    reads_pb2,
    schema_pb2,
    transaction_pb2,
)
from gateway.v1.wire_tags import STREAM_WRITE_RESPONSE_ACKS_KEY as _ACKS_KEY
from gateway.v1.wire_tags import WRITE_BATCH_RESPONSE_ERRORS_KEY as _ERRORS_KEY
from gateway.v1.wire_tags import WRITE_BATCH_RESPONSE_RESULTS_KEY as _RESULTS_KEY

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

    from gateway.node.api.served_node import ServedNode
    from gateway.node.base.validation import TableSchema

__all__ = ["MAX_DEADLINE", "GatewayServicer"]

MAX_DEADLINE = 60.0
_MAX_SEQ = (1 << 64) - 1
#: The methods a NOSPACE alarm refuses (``alarms``).
_WRITES = frozenset({"Write", "WriteBatch"})
#: How long a follower's Status waits for the leader's channel figures.
_LEADER_STATUS_S = 1.0
_NO_KEYS: frozenset[str] = frozenset()  # no idempotency keys probed (a follower forwards)
#: A method run where the node leads (``GatewayServicer._local``). Its request is the message
#: class paired with it in that table, which a type per key cannot say: typed ``Any``.
_LocalBehaviour: TypeAlias = Callable[[Any, CallContext], Awaitable[Response]]
#: What a write is answered with: its ``WriteResult``, or that message's bytes.
_WriteAnswer: TypeAlias = gateway_pb2.WriteResult | bytes
#: A write's conditions as its request holds them (None: a plain write).
_Conditions: TypeAlias = "RepeatedCompositeFieldContainer[transaction_pb2.Condition] | None"


def _deadline(context: CallContext | None) -> float:
    if context is None:
        return MAX_DEADLINE
    left = context.time_remaining()
    return MAX_DEADLINE if left is None else max(0.0, min(left, MAX_DEADLINE))


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Implements ``Gateway`` over the node it serves (a :class:`ServedNode`: the
    ``GatewayNode``)."""

    def __init__(self, node: ServedNode) -> None:
        self.node = node
        self._local: dict[str, tuple[type[PbMessage], _LocalBehaviour]] = {
            "Write": (gateway_pb2.WriteRequest, self._write_local),
            "WriteBatch": (gateway_pb2.WriteBatchRequest, self._write_batch_local),
            "AddNode": (gateway_pb2.AddNodeRequest, self._add_node_local),
            "RemoveNode": (gateway_pb2.RemoveNodeRequest, self._remove_node_local),
            "TransferLeader": (gateway_pb2.TransferLeaderRequest, self._transfer_local),
            "AddChannel": (gateway_pb2.AddChannelRequest, self._add_channel_local),
            "ChannelAction": (gateway_pb2.ChannelActionRequest, self._channel_action_local),
            "Conflicts": (gateway_pb2.ConflictsRequest, self._conflicts_local),
            # only as asked by a follower (``_leader_status``): Status itself runs anywhere
            "Status": (gateway_pb2.StatusRequest, self._status_local),
            "Alarm": (gateway_pb2.AlarmRequest, self._alarm_local),
            "ConflictsReplay": (gateway_pb2.ConflictsReplayRequest, self._replay_local),
            CHANGE_SCHEMA: (schema_pb2.SchemaChangeRequest, self._change_schema_local),
        }

    # -- errors and forwarding ------------------------------------------------------------------

    async def _abort(self, context: CallContext, exc: BaseException) -> NoReturn:
        exc = self._client_error(exc)
        code, meta = self._status_of(exc)
        context.set_trailing_metadata(meta)
        await context.abort(code, str(exc))

    def _status_of(self, exc: BaseException) -> tuple[grpc.StatusCode, tuple[tuple[str, str],
                                                                              ...]]:
        if isinstance(exc, InvalidRequest):
            return grpc.StatusCode.INVALID_ARGUMENT, (("gateway-field", exc.field),)
        if isinstance(exc, PreconditionFailed):
            return grpc.StatusCode.FAILED_PRECONDITION, (("gateway-field", exc.field),)
        if isinstance(exc, NotLeaderError):
            return grpc.StatusCode.UNAVAILABLE, self.node.leader_metadata()
        if isinstance(exc, ProposalLostError | NodeStoppedError | ReadTimeoutError):
            return grpc.StatusCode.UNAVAILABLE, self.node.leader_metadata()
        if isinstance(exc, RequestTooLargeError | NoSpaceError):
            return grpc.StatusCode.RESOURCE_EXHAUSTED, ()
        if isinstance(exc, DataLossError):  # LogDamagedError too: file and offset named
            return grpc.StatusCode.DATA_LOSS, ()
        if isinstance(exc, StorageFailedError):
            return grpc.StatusCode.UNAVAILABLE, self.node.leader_metadata()
        if isinstance(exc, TimeoutError):
            return grpc.StatusCode.DEADLINE_EXCEEDED, ()
        return grpc.StatusCode.INTERNAL, ()

    def _client_error(self, exc: BaseException) -> BaseException:
        """``exc``, or the one-line `StorageError` a client gets for a storage failure (a
        code, the node, the file relative to the data directory: ``storage_errors``)."""
        if isinstance(exc, InvalidRequest | TimeoutError):
            return exc
        cfg = self.node.config
        return client_error(exc, cfg.data_dir, cfg.node_id) or exc

    def _check_space(self) -> None:
        """Refuse a write while a NOSPACE alarm is raised (``alarms``): RESOURCE_EXHAUSTED
        naming the node and its path, on every node of the cluster."""
        space = getattr(self.node, "space", None)
        refusal = space.refusal() if space is not None else None
        if refusal is not None:
            raise refusal

    def _space_ok(self) -> bool:
        """Whether no NOSPACE alarm refuses writes now (``_check_space`` would pass)."""
        space = getattr(self.node, "space", None)
        return space is None or space.refusal() is None

    async def _run(self, method: str, request: Request, context: CallContext) -> Response:
        """Run ``method`` here if this node leads, else forward it to the leader."""
        drv = self.node.driver
        _, fn = self._local[method]
        try:
            if method in _WRITES:
                self._check_space()  # also before forwarding: this node's view suffices
            if drv.is_leader or method not in self._local:
                async with asyncio.timeout(_deadline(context)):  # no extra task per call
                    return await fn(request, context)
            return await self._forward(method, request, context)
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    async def _abort_storage(self, context: CallContext, exc: Exception) -> NoReturn:
        """End the call with a storage failure's code and line; re-raise anything else."""
        mapped = self._client_error(exc)
        if mapped is exc:
            raise exc
        await self._abort(context, mapped)

    async def _forward(self, method: str, request: Request, context: CallContext) -> bytes:
        leader = self.node.driver.leader_id
        channel = self.node.transport.channel(leader) if leader else None
        if channel is None:
            raise NotLeaderError(leader)
        stub = peer_pb2_grpc.PeerStub(channel)
        try:
            # The caller's token goes along: the leader checks it as its API would.
            # A write goes on as it was received (``ReceivedRequest``): not serialized again.
            payload = request.data if isinstance(request, ReceivedRequest) else \
                request.SerializeToString()
            resp: peer_pb2.ForwardResponse = await stub.Forward(
                peer_pb2.ForwardRequest(method=method, request=payload),
                timeout=_deadline(context),
                metadata=bearer_metadata(context.invocation_metadata()))
        except grpc.aio.AioRpcError as exc:
            context.set_trailing_metadata(tuple(exc.trailing_metadata() or ())
                                          or self.node.leader_metadata())
            await context.abort(exc.code(), exc.details() or "forwarding to the leader failed")
        return resp.response  # already serialized: handed on as it is (api_handlers)

    async def forwarded(self, method: str, payload: bytes, context: CallContext) -> bytes:
        """Run a request a follower forwarded (``Peer.Forward``); never forwards again. The
        call's ``authorization`` metadata (the original caller's, carried on by the follower)
        is checked with this node's tokens exactly as its API checks ``method``."""
        tokens = self.node.tokens
        if tokens is not None:
            try:
                authorize(tokens, method, context.invocation_metadata())
            except AuthError as exc:
                await context.abort(exc.code, f"forwarded {method}: {exc}")
        entry = self._local.get(method)
        if entry is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"cannot forward {method}")
        cls, fn = entry
        try:
            if not self.node.driver.is_leader:
                raise NotLeaderError(self.node.driver.leader_id)
            # The follower's API refused anything larger, but the limit is per node: this
            # node's applies to what it runs.
            limit = self.node.config.max_request_bytes
            if len(payload) > limit:
                raise RequestTooLargeError(f"request of {len(payload)} bytes is larger than "
                                           f"max_request_bytes ({limit}) of node "
                                           f"{self.node.config.node_id}")
            try:
                message = cls.FromString(payload)
            except DecodeError as exc:
                raise InvalidRequest("request", f"not a valid {cls.DESCRIPTOR.full_name} "
                                     f"message ({exc})") from None
            request: Request = ReceivedRequest(payload, message) if method in KEEPS_BYTES \
                else message
            resp = await asyncio.wait_for(fn(request, context), _deadline(context))
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)
        return serialized(resp)

    # -- writes ---------------------------------------------------------------------------------

    @staticmethod
    def _check_write(req: gateway_pb2.WriteRequest, path: str = "") -> None:
        # The request's size is the API server's (max_request_bytes); the statements are
        # checked where they are proposed (the driver's WireChecker), or before it for
        # WriteBatch.
        check_idempotency_key(req.idempotency_key, f"{path}idempotency_key")

    def _admin(self, context: CallContext) -> bool:
        """Whether the caller (of this call, or of the call a follower forwarded) holds the
        ``admin`` permission: it may delete rows of ``$EX`` tables (``core.reserved``)."""
        if self.node.tokens is None:
            return True
        return "admin" in token_permissions(self.node.tokens, context.invocation_metadata())

    async def _write_local(self, received: ReceivedRequest[gateway_pb2.WriteRequest],
                           context: CallContext) -> _WriteAnswer:
        req = received.message
        self._check_space()
        self._check_write(req)
        return await self.node.driver.submit_write(WriteProposal(
            req.statements, req.idempotency_key, time.time_ns(),
            raw=frame_request(req, received.data),
            wire=True, admin=self._admin(context), conditions=req.conditions or None))

    async def _write_batch_local(self, received: ReceivedRequest[gateway_pb2.WriteBatchRequest],
                                 context: CallContext) -> bytes:
        """The serialized ``WriteBatchResponse`` of the request's writes, all validated
        first."""
        req = received.message
        if not req.writes:
            raise InvalidRequest("writes", "no writes")
        self._check_space()
        drv = self.node.driver
        # Validated here, all of them first (all or nothing), against the schemas the leader's
        # pending proposals create too; the driver does not validate these writes again
        # before proposing (replicas still validate every entry when applying it).
        schemas = drv.known_schemas()
        checker = drv.checker
        admin = self._admin(context)
        checked: list[tuple[list[tuple[str, TableSchema]], bytes, _Conditions]] = []
        # The framer names the writes with conditions: a plain write's field is never read.
        frames, conditional = frame_batch_flagged(req, received.data)
        for i, (w, raw) in enumerate(zip(req.writes, frames, strict=True)):
            self._check_write(w, f"writes[{i}].")
            conds = w.conditions if conditional and i in conditional else None
            try:
                if conds is not None:
                    check_conditions(conds, schemas)
                created = checker.check(raw, w.statements, schemas, admin=admin)
            except InvalidRequest as exc:
                raise InvalidRequest(f"writes[{i}].{exc.field}", exc.reason) from None
            if created:
                schemas = {**schemas, **dict(created)}
            checked.append((created, raw, conds))
        now = time.time_ns()
        fresh = drv.sm.unrecorded([w.idempotency_key for w in req.writes if w.idempotency_key])
        # WriteProposal's fields by position (write_proposal.FIELDS: statements,
        # idempotency_key, start_ns, created, raw, wire, unrecorded, admin, conditions):
        # keywords cost a parse per write. test_write_path_work pins the order.
        futs = [drv.submit_write(WriteProposal(
                    w.statements, w.idempotency_key, now, created, raw, True,
                    w.idempotency_key in fresh, False, conds))
                for w, (created, raw, conds) in zip(req.writes, checked, strict=True)]
        # Awaited in order, not gathered: the writes resolve in log order, so most are done
        # by the time their turn comes and awaiting a done future does not suspend -- where
        # gather schedules a callback per future (~3 us each on the leader's loop).
        results: list[bytes] = []
        errors: list[bytes] = []  # serialized WriteErrors: refused conditional writes
        try:
            for i, f in enumerate(futs):
                try:
                    results.append(serialized(await f))
                except PreconditionFailed as exc:  # refused alone; the others are applied
                    results.append(b"")
                    errors.append(gateway_pb2.WriteError(
                        index=i, code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                        error=str(exc), field=exc.field).SerializeToString())
        except BaseException:
            for f in futs:
                if not f.done():
                    f.cancel()
                elif not f.cancelled():
                    f.exception()  # retrieved (as gather does): no "never retrieved" warning
            raise
        # The response's bytes from the results' (a WriteBatchResponse is its repeated
        # results field): no WriteResult message is parsed, copied or serialized again.
        out = frame_field(_RESULTS_KEY, results)
        return out + frame_field(_ERRORS_KEY, errors) if errors else out

    async def Write(self, request: ReceivedRequest[gateway_pb2.WriteRequest],
                    context: CallContext) -> Response:
        return await self._run("Write", request, context)

    async def WriteBatch(self, request: ReceivedRequest[gateway_pb2.WriteBatchRequest],
                         context: CallContext) -> Response:
        return await self._run("WriteBatch", request, context)

    async def StreamWrite(
            self, request_iterator: AsyncIterator[ReceivedRequest[gateway_pb2.StreamWriteRequest]],
            context: CallContext) -> AsyncIterator[bytes]:
        """Pipelined writes: every write of every request is submitted as it arrives (on the
        leader: its future itself, no task per write; on a follower: forwarded one by one)
        and acknowledged once; a request's acks are made in its order, as soon as a write
        and all before it in the request are done, and the acks ready when the response loop
        runs go out together in one ``StreamWriteResponse``.

        One done-callback per request waits for its first unfinished write and acks every
        done write from there on when it fires: the leader resolves writes in log order, a
        whole applied run at a time, so a request usually takes one callback, not one per
        write (each is a handle on the event loop).

        A bad request -- no writes, a ``seq`` whose writes would number past 2^64-1, a
        message that does not parse -- submits none of its writes and ends the stream with
        INVALID_ARGUMENT, but only after every write taken before it was acknowledged: an
        ack is never lost for a write that may have been applied."""
        acks: list[bytes] = []  # serialized StreamWriteAcks
        ready = asyncio.Event()
        outstanding = 0
        reading = True
        failure: list[Exception] = []
        admin = self._admin(context)
        forwarded_auth = bearer_metadata(context.invocation_metadata())

        def ack_of(seq: int, fut: asyncio.Future[_WriteAnswer]) -> bytes:
            if fut.cancelled():
                return gateway_pb2.StreamWriteAck(
                    seq=seq, code=grpc.StatusCode.CANCELLED.value[0],
                    error="cancelled").SerializeToString()
            if (exc := fut.exception()) is None:
                return ack_bytes(seq, serialized(fut.result()))
            if isinstance(exc, grpc.aio.AioRpcError):
                code, msg = exc.code(), exc.details() or ""
                meta = tuple(exc.trailing_metadata() or ())
            else:
                exc = self._client_error(exc)
                code, meta = self._status_of(exc)
                msg = str(exc)
            field = next((v for k, v in meta if k == "gateway-field"), "")
            return gateway_pb2.StreamWriteAck(seq=seq, code=code.value[0], error=msg,
                                              field=field).SerializeToString()

        def ack_done(seq: int, futs: list[asyncio.Future[_WriteAnswer]], at: int) -> None:
            """Ack ``futs[at:]`` up to the first write not done (write ``i`` has sequence
            number ``seq + i``); wait for that one with a callback doing the same."""
            n = len(futs)
            while at < n and futs[at].done():
                acks.append(ack_of(seq + at, futs[at]))
                at += 1
            if at < n:
                futs[at].add_done_callback(lambda _f: ack_done(seq, futs, at))
            ready.set()

        async def forward(req: gateway_pb2.WriteRequest, raw: bytes) -> _WriteAnswer:
            drv = self.node.driver
            if drv.is_leader:
                return await drv.submit_write(WriteProposal(
                    req.statements, req.idempotency_key, time.time_ns(),
                    raw=raw, wire=True, admin=admin,
                    conditions=req.conditions or None))
            leader = drv.leader_id
            channel = self.node.transport.channel(leader) if leader else None
            if channel is None:
                raise NotLeaderError(leader)
            resp: peer_pb2.ForwardResponse = await peer_pb2_grpc.PeerStub(channel).Forward(
                peer_pb2.ForwardRequest(method="Write", request=req.SerializeToString()),
                timeout=_deadline(context), metadata=forwarded_auth)
            return resp.response  # the serialized WriteResult

        def submit(w: gateway_pb2.WriteRequest, now: int, raw: bytes, fresh: Set[str],
                   space_ok: bool, conds: _Conditions) -> asyncio.Future[_WriteAnswer]:
            drv = self.node.driver
            try:
                if not space_ok:  # the request's writes are refused one by one
                    self._check_space()
                self._check_write(w)
            except (InvalidRequest, NoSpaceError) as exc:
                fut: asyncio.Future[_WriteAnswer] = asyncio.get_running_loop().create_future()
                fut.set_exception(exc)
                return fut
            if drv.is_leader:  # WriteProposal's fields by position, as in WriteBatch
                return drv.submit_write(WriteProposal(
                    w.statements, w.idempotency_key, now, None, raw, True,
                    w.idempotency_key in fresh, admin, conds))
            return asyncio.ensure_future(forward(w, raw))

        async def reader() -> None:
            nonlocal outstanding, reading
            try:
                async for received in request_iterator:
                    req = received.message
                    n = len(req.writes)
                    if not n:
                        raise InvalidRequest("writes", f"request with seq {req.seq} carries "
                                             f"no writes")
                    if req.seq + n - 1 > _MAX_SEQ:
                        raise InvalidRequest("seq", f"seq {req.seq} with {n} writes numbers "
                                             f"them past 2^64-1")
                    now = time.time_ns()
                    drv = self.node.driver
                    # One probe of the store for the request's keys (the leader's).
                    fresh = drv.sm.unrecorded([w.idempotency_key for w in req.writes
                                               if w.idempotency_key]) if drv.is_leader else _NO_KEYS
                    # The alarm is looked at once per request: no write of it can await, so
                    # none can see the alarm change.
                    space_ok = self._space_ok()
                    futs: list[asyncio.Future[_WriteAnswer]] = []
                    # The framer names the writes with conditions: a plain write's field is
                    # never read.
                    frames, conditional = frame_batch_flagged(req, received.data)
                    try:
                        if not conditional:
                            for w, raw in zip(req.writes, frames, strict=True):
                                futs.append(submit(w, now, raw, fresh, space_ok, None))
                        else:
                            for i, (w, raw) in enumerate(zip(req.writes, frames, strict=True)):
                                futs.append(submit(w, now, raw, fresh, space_ok,
                                                   w.conditions if i in conditional else None))
                    finally:
                        outstanding += len(futs)  # counted once submitted: each gets its ack
                        if futs:
                            ack_done(req.seq, futs, 0)
            except Exception as exc:
                # InvalidRequest from the request or the request iterator; anything else ends
                # the stream INTERNAL -- both after the acks of the writes already taken.
                failure.append(exc)
            finally:
                reading = False
                ready.set()

        read_task = asyncio.create_task(reader())
        try:
            while True:
                await ready.wait()
                ready.clear()
                if acks:
                    batch = acks[:]
                    del acks[:]
                    outstanding -= len(batch)
                    yield frame_field(_ACKS_KEY, batch)  # a StreamWriteResponse's bytes
                if not reading and not outstanding:
                    if failure:
                        await self._abort(context, failure[0])
                    return
        finally:
            read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await read_task

    # -- reads ----------------------------------------------------------------------------------

    async def Read(self, request: gateway_pb2.ReadRequest, context: CallContext) -> bytes:
        try:
            return await reads.read(self.node, request, _deadline(context))
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    async def Scan(self, request: gateway_pb2.ScanRequest, context: CallContext) -> bytes:
        try:
            return await reads.scan(self.node, request, _deadline(context))
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    async def ReadBatch(self, received: ReceivedRequest[reads_pb2.ReadBatchRequest],
                        context: CallContext) -> bytes:
        """``gateway.v1.Reads.ReadBatch`` (served beside ``Gateway``: ``ReadsServicer``)."""
        try:
            return await reads.read_batch(self.node, received.message, _deadline(context),
                                          received.data)
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    async def Subscribe(self, request: gateway_pb2.SubscribeRequest, context: CallContext
                        ) -> AsyncIterator[gateway_pb2.ChangeEvent | bytes]:
        try:
            async for event in self.node.change_feed.subscribe(request):
                yield event if isinstance(event, gateway_pb2.ChangeEvent) else \
                    event.SerializeToString()
        except (NodeError, InvalidRequest) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    # -- admin ----------------------------------------------------------------------------------

    async def Status(self, request: gateway_pb2.StatusRequest, context: CallContext
                     ) -> gateway_pb2.StatusResponse:
        resp = admin.status(self.node)
        drv = self.node.driver
        if resp.channels and not drv.is_leader and drv.leader_id:
            lead = await self._leader_status(context)
            if lead is not None:  # else the channels say "on the leader N"
                self.node.channels.take_leader(list(resp.channels), list(lead.channels),
                                               lead.node_id)
        return resp

    async def _status_local(self, request: gateway_pb2.StatusRequest, context: CallContext
                            ) -> gateway_pb2.StatusResponse:
        return admin.status(self.node)

    async def _leader_status(self, context: CallContext) -> gateway_pb2.StatusResponse | None:
        """The leader's ``Status`` (for its channels' live fields), asked over the peer
        channel with the caller's token and a short timeout; None when it does not answer
        in time: a follower's status must not hang on a leader that is gone."""
        leader = self.node.driver.leader_id
        channel = self.node.transport.channel(leader) if leader else None
        if channel is None:
            return None
        try:
            got = await peer_pb2_grpc.PeerStub(channel).Forward(
                peer_pb2.ForwardRequest(method="Status", request=b""),
                timeout=_LEADER_STATUS_S,
                metadata=bearer_metadata(context.invocation_metadata()))
            return gateway_pb2.StatusResponse.FromString(got.response)
        except (grpc.aio.AioRpcError, DecodeError):
            return None

    async def _add_node_local(self, req: gateway_pb2.AddNodeRequest, context: CallContext
                              ) -> gateway_pb2.AdminResponse:
        # admin.add_node checks the id and the addresses before proposing anything.
        return await admin.add_node(self.node, req.node_id, req.peer_address, req.api_address,
                                    learner=req.learner, timeout=_deadline(context))

    async def _remove_node_local(self, req: gateway_pb2.RemoveNodeRequest, context: CallContext
                                 ) -> gateway_pb2.AdminResponse:
        if req.node_id <= 0:
            raise InvalidRequest("node_id", "must be a positive integer")
        return await admin.remove_node(self.node, req.node_id)

    async def _transfer_local(self, req: gateway_pb2.TransferLeaderRequest, context: CallContext
                              ) -> gateway_pb2.AdminResponse:
        if req.node_id <= 0:
            raise InvalidRequest("node_id", "must be a positive integer")
        return await admin.transfer_leader(self.node, req.node_id, _deadline(context))

    async def _add_channel_local(self, req: gateway_pb2.AddChannelRequest, context: CallContext
                                 ) -> gateway_pb2.AdminResponse:
        return await self.node.channels.add(req.definition, req.replace, seed=req.seed,
                                            merge=req.merge)

    async def _channel_action_local(self, req: gateway_pb2.ChannelActionRequest,
                                    context: CallContext
                                    ) -> gateway_pb2.AdminResponse:
        return await self.node.channels.action(req.name, req.action, confirm=req.confirm)

    async def _conflicts_local(self, req: gateway_pb2.ConflictsRequest, context: CallContext
                               ) -> gateway_pb2.AdminResponse:
        return await self.node.conflicts.change(req)

    async def _alarm_local(self, req: gateway_pb2.AlarmRequest, context: CallContext
                           ) -> gateway_pb2.AdminResponse:
        return await disarm(self.node, req)

    async def _replay_local(self, req: gateway_pb2.ConflictsReplayRequest, context: CallContext
                            ) -> gateway_pb2.ConflictsReplayResponse:
        self._check_space()
        return await self.node.conflicts.replay(req, admin=self._admin(context))

    async def _change_schema_local(self, req: schema_pb2.SchemaChangeRequest,
                                   context: CallContext) -> Response:
        return await change_schema(self.node, req)  # schema_change (Schema.ChangeSchema)

    async def ConflictsReplay(self, request: gateway_pb2.ConflictsReplayRequest,
                              context: CallContext) -> Response:
        return await self._run("ConflictsReplay", request, context)

    async def _here(self, context: CallContext, work: Awaitable[Response]) -> Response:
        """Await ``work`` on this node (never forwarded), errors as ``_run`` maps them."""
        try:
            async with asyncio.timeout(_deadline(context)):
                return await work
        except (NodeError, InvalidRequest, TimeoutError) as exc:
            await self._abort(context, exc)
        except Exception as exc:
            await self._abort_storage(context, exc)

    async def ConflictsList(self, request: gateway_pb2.ConflictsListRequest,
                            context: CallContext) -> Response:
        return await self._here(context, operator.conflicts_list(self.node, request))

    async def DeadLetters(self, request: gateway_pb2.DeadLettersRequest,
                          context: CallContext) -> Response:
        return await self._here(context, operator.dead_letters(self.node, request))

    async def DeadLetterAction(self, request: gateway_pb2.DeadLetterActionRequest,
                               context: CallContext) -> Response:
        return await self._here(context, operator.dead_letter_action(self.node, request))

    async def Alarm(self, request: gateway_pb2.AlarmRequest, context: CallContext) -> Response:
        return await self._run("Alarm", request, context)

    async def Conflicts(self, request: gateway_pb2.ConflictsRequest, context: CallContext
                        ) -> Response:
        return await self._run("Conflicts", request, context)

    async def AddChannel(self, request: gateway_pb2.AddChannelRequest, context: CallContext
                         ) -> Response:
        return await self._run("AddChannel", request, context)

    async def ChannelAction(self, request: gateway_pb2.ChannelActionRequest, context: CallContext
                            ) -> Response:
        return await self._run("ChannelAction", request, context)

    async def AddNode(self, request: gateway_pb2.AddNodeRequest, context: CallContext) -> Response:
        return await self._run("AddNode", request, context)

    async def RemoveNode(self, request: gateway_pb2.RemoveNodeRequest, context: CallContext
                         ) -> Response:
        return await self._run("RemoveNode", request, context)

    async def TransferLeader(self, request: gateway_pb2.TransferLeaderRequest, context: CallContext
                             ) -> Response:
        return await self._run("TransferLeader", request, context)

    async def Snapshot(self, request: gateway_pb2.SnapshotRequest, context: CallContext
                       ) -> gateway_pb2.AdminResponse:
        try:
            index = await asyncio.wait_for(self.node.driver.snapshot_now(), _deadline(context))
        except (NodeError, TimeoutError) as exc:
            await self._abort(context, exc)
        return gateway_pb2.AdminResponse(message=f"snapshot at index {index}", log_index=index)

