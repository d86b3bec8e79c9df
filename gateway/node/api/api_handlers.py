"""The gRPC method handlers of the ``gateway.v1.Gateway`` service, built from its descriptor,
with request decoding that never fails inside gRPC, and responses that may come serialized.

gRPC's generated handlers parse each request with ``FromString`` inside the server, so bytes
that are not a valid message end the call UNKNOWN (``Unexpected DecodeError``) before the
servicer runs. Here the deserializer returns an :class:`UndecodableRequest` instead, and the
handler ends the call INVALID_ARGUMENT with the API's usual shape: message
``request: not a valid gateway.v1.WriteRequest message (...)``, trailing metadata
``gateway-field: request``. In ``StreamWrite`` the request iterator raises
:class:`~gateway.node.base.validation.InvalidRequest` at such a message, so the servicer ends the
stream the same way after acknowledging the writes it already took.

The write methods (:data:`KEEPS_BYTES`) keep the bytes they were given: their deserializer
returns a :class:`ReceivedRequest`, the bytes as received beside their parse, so that the
statements' bytes go into the log entry sliced from what the client sent (``wire.frame_request``,
``wire.frame_batch``) and a follower forwards the request as it came -- nothing is serialized
again. ``ReadBatch`` keeps them too: a batch's keys are read from its bytes
(``read_wire.batch_keys``) rather than from a message per key and value. The parse stays: it
is the check that the bytes are a well-formed message (the entry holds only bytes that
parse), and it gives validation the idempotency key, the conditions and, for a shape the wire
check has not seen, the statements.

A request larger than ``max_request_bytes`` never gets here: the API server's
``grpc.max_receive_message_length`` refuses it (RESOURCE_EXHAUSTED) before reading it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, NamedTuple, NoReturn, TypeAlias, TypeVar, final

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as PbMessage

from gateway.node.api.call_context import CallContext
from gateway.node.base.validation import InvalidRequest
from gateway.v1 import gateway_pb2, reads_pb2

__all__ = ["KEEPS_BYTES", "READS_SERVICE", "REQUEST_FIELD", "ReceivedRequest",
           "UndecodableRequest", "add_gateway_service", "add_reads_service", "serialized"]

SERVICE = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]
#: ``gateway.v1.Reads`` (reads of many rows), served with the same handlers.
READS_SERVICE = reads_pb2.DESCRIPTOR.services_by_name["Reads"]
#: The field an undecodable request's error names (the request as a whole).
REQUEST_FIELD = "request"
#: The methods whose requests reach the servicer as a :class:`ReceivedRequest`.
KEEPS_BYTES = frozenset({"Write", "WriteBatch", "StreamWrite", "ReadBatch"})

_M = TypeVar("_M", bound=PbMessage, covariant=True)  # a ReceivedRequest is read-only
#: What a behaviour returns: its response message, or the response already serialized.
Response: TypeAlias = PbMessage | bytes


class ReceivedRequest(NamedTuple, Generic[_M]):
    """A request as received and as parsed (module docstring)."""

    #: The serialized request exactly as gRPC (or ``Peer.Forward``) delivered it.
    data: bytes
    #: ``data`` parsed (a ``WriteRequest``, ``WriteBatchRequest``, ``StreamWriteRequest`` or
    #: ``ReadBatchRequest``).
    message: _M


@final  # so that ``type(request) is UndecodableRequest`` narrows both ways
class UndecodableRequest:
    """Stands for a request message that did not parse; ``reason`` says why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


#: A request as a behaviour gets it: the message, or (``KEEPS_BYTES``) its bytes beside it.
Request: TypeAlias = PbMessage | ReceivedRequest[PbMessage]
#: What a request deserializer returns (``_decoder``).
Decoded: TypeAlias = Request | UndecodableRequest
#: The servicer's methods, by kind. They are looked up by name (``add_gateway_service``), so
#: each method's own request type is not checked against these.
UnaryBehaviour: TypeAlias = Callable[[Request, CallContext], Awaitable[Response]]
StreamBehaviour: TypeAlias = Callable[[Request, CallContext], AsyncIterator[Response]]
StreamStreamBehaviour: TypeAlias = Callable[[AsyncIterator[Request], CallContext],
                                            AsyncIterator[Response]]


def _decoder(cls: type[PbMessage], keep: bool = False) -> Callable[[bytes], Decoded]:
    """The request deserializer: the message (a :class:`ReceivedRequest` when ``keep``), or
    an :class:`UndecodableRequest`."""
    parse = cls.FromString
    name = cls.DESCRIPTOR.full_name

    def decode(data: bytes) -> Decoded:
        try:
            return parse(data)
        except DecodeError as exc:
            return UndecodableRequest(f"not a valid {name} message ({exc})")

    if not keep:
        return decode

    def decode_kept(data: bytes) -> Decoded:
        try:
            return ReceivedRequest(data, parse(data))
        except DecodeError as exc:
            return UndecodableRequest(f"not a valid {name} message ({exc})")

    return decode_kept


def serialized(response: Response) -> bytes:
    """``response``'s bytes: a behaviour may return its response message, or the message
    already serialized (a forwarded call's answer, a write batch's results framed from their
    bytes), which is sent as it is."""
    return response if isinstance(response, bytes) else response.SerializeToString()


async def _reject(context: CallContext, request: UndecodableRequest) -> NoReturn:
    context.set_trailing_metadata((("gateway-field", REQUEST_FIELD),))
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{REQUEST_FIELD}: {request.reason}")


def _unary_unary(behaviour: UnaryBehaviour
                 ) -> Callable[[Decoded, CallContext], Awaitable[Response]]:
    async def handle(request: Decoded, context: CallContext) -> Response:
        if type(request) is UndecodableRequest:
            await _reject(context, request)
        return await behaviour(request, context)

    return handle


def _unary_stream(behaviour: StreamBehaviour
                  ) -> Callable[[Decoded, CallContext], AsyncIterator[Response]]:
    async def handle(request: Decoded, context: CallContext) -> AsyncIterator[Response]:
        if type(request) is UndecodableRequest:
            await _reject(context, request)
        async for response in behaviour(request, context):
            yield response

    return handle


async def _decoded(requests: AsyncIterator[Decoded]) -> AsyncIterator[Request]:
    async for request in requests:
        if type(request) is UndecodableRequest:
            raise InvalidRequest(REQUEST_FIELD, request.reason)
        yield request


def _stream_stream(behaviour: StreamStreamBehaviour
                   ) -> Callable[[AsyncIterator[Decoded], CallContext], AsyncIterator[Response]]:
    async def handle(requests: AsyncIterator[Decoded], context: CallContext
                     ) -> AsyncIterator[Response]:
        async for response in behaviour(_decoded(requests), context):
            yield response

    return handle


def add_gateway_service(servicer: object, server: grpc.aio.Server) -> None:
    """Serve ``gateway.v1.Gateway`` from ``servicer`` (one coroutine method per RPC, named as
    in the proto) on ``server``, with the handlers of the module docstring."""
    _add_service(SERVICE, servicer, server)


def add_reads_service(servicer: object, server: grpc.aio.Server) -> None:
    """Serve ``gateway.v1.Reads`` from ``servicer`` (the Gateway servicer: one coroutine
    method per RPC, named as in the proto) on ``server``, as :func:`add_gateway_service`."""
    _add_service(READS_SERVICE, servicer, server)


def _add_service(service: Any, servicer: object, server: grpc.aio.Server) -> None:
    """``service`` (a protobuf ``ServiceDescriptor``) from ``servicer`` on ``server``."""
    handlers: dict[str, grpc.RpcMethodHandler[Decoded, Response]] = {}
    for m in service.methods:
        behaviour = getattr(servicer, m.name)
        decode = _decoder(message_factory.GetMessageClass(m.input_type),
                          keep=m.name in KEEPS_BYTES)
        encode = serialized
        if m.client_streaming and m.server_streaming:
            h = grpc.stream_stream_rpc_method_handler(_stream_stream(behaviour), decode, encode)
        elif m.server_streaming:
            h = grpc.unary_stream_rpc_method_handler(_unary_stream(behaviour), decode, encode)
        elif not m.client_streaming:
            h = grpc.unary_unary_rpc_method_handler(_unary_unary(behaviour), decode, encode)
        else:  # no client-streaming-only RPC exists; one added later must be wired here
            raise TypeError(f"{service.name}.{m.name}: client-streaming handlers are not built")
        handlers[m.name] = h
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
