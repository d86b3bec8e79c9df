"""``RabbitApplier``: publishes each operation of a batch and returns once the broker confirmed
them all.

The dispatcher calls ``apply`` from its worker threads; aio-pika is asyncio, so the applier
owns one event loop in a dedicated thread (``gateway-rabbit-io``) with one robust connection and
one channel in publisher-confirm mode. ``apply`` encodes the batch in the calling thread
(``gateway_rabbit.message``), hands it to the loop with ``run_coroutine_threadsafe`` and blocks
until:

- every message was confirmed (``basic.ack``): ``apply`` returns and the dispatcher may advance
  the position -- so a position never passes an unconfirmed message;
- or any message failed: ``apply`` raises. The messages are published concurrently and their
  confirms awaited together (the broker acks them in batches with ``multiple``), so a failed
  batch may have been partly delivered; the dispatcher publishes it again, and consumers drop
  the copies by ``message_id`` (at-least-once).

Every message is published ``mandatory`` and persistent (delivery mode 2) to a durable topic
exchange. A message the broker cannot route to any queue comes back (``basic.return``) and is
an ``UnroutableMessageError``, never a silent drop.

Errors (all ``gateway.appliers.contract.ApplyError``)::

    TransientApplyError                 retried by the dispatcher, then dead-lettered
    ├── RabbitUnavailableError          a StoreUnavailableError: no connection within
    │                                   ``reconnect_timeout``, or it was lost, or confirms did
    │                                   not come within ``confirm_timeout``; retried until the
    │                                   broker returns, never dead-lettered
    ├── RabbitNackError                 the broker refused a message (``basic.nack``)
    └── UnroutableMessageError          mandatory message returned: no queue is bound for its
                                        routing key (transient: a binding may be added)

Schema events (``apply_schema``, under the applier's ``schema_policy``): each is published as
a message of its own (``gateway_rabbit.message.encode_schema``) after every row before it was
confirmed and before any row after it (the dispatcher's order), and the table's version it
brings goes into the ``x-gateway-schema-version`` header of that table's later rows. The
versions at a start come from the dispatcher (``start_schema``: the versions as of the
applier's position); a table with none is at version 1.

While the broker is down the robust connection reconnects every ``reconnect_interval``
seconds in the background; ``apply`` waits up to ``reconnect_timeout`` for it before raising,
so a broker restart costs a pause, not dead letters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractRobustConnection
from aio_pika.connection import make_url

from gateway import (
    Applier,
    Capabilities,
    OpKind,
    RowOp,
    SchemaEvent,
    StoreUnavailableError,
    TransientApplyError,
)

from .message import OutgoingMessage, encode, encode_schema

__all__ = [
    "RabbitApplier",
    "RabbitNackError",
    "RabbitSettings",
    "RabbitUnavailableError",
    "UnroutableMessageError",
]


class RabbitUnavailableError(StoreUnavailableError):
    """No usable connection to the broker, or confirms did not arrive in time."""


class RabbitNackError(TransientApplyError):
    """The broker refused (nacked) a message."""


class UnroutableMessageError(TransientApplyError):
    """A mandatory message came back: no queue is bound for its routing key."""


@dataclass(frozen=True, slots=True)
class RabbitSettings:
    """Options of one RabbitMQ applier (see the plugin README for each)."""

    url: str
    exchange: str = "gateway"
    format: str = "frame"
    declare: bool = True
    max_batch: int = 256
    confirm_timeout: float = 30.0
    reconnect_timeout: float = 60.0
    reconnect_interval: float = 1.0
    name: str = "rabbit"


class _SameAsOurs(logging.Filter):
    """Drops aiormq's "error when creating transport" records: every failed connection
    attempt logs one, while the applier reports the same error once through the dispatcher
    (log, Status, metrics) -- with the broker down, a line per attempt is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error when creating transport")


logging.getLogger("aiormq.connection").addFilter(_SameAsOurs())


class RabbitApplier(Applier):
    """Publishes operations to a topic exchange; see the module docstring for the contract.

    Idempotent for consumers that de-duplicate on ``message_id``; accepts SQL operations
    (published with routing key ``<schema>._.sql``); thread-safe. ``close`` closes the
    connection and stops the loop thread.
    """

    def __init__(self, settings: RabbitSettings) -> None:
        self.name = settings.name
        self.settings = settings
        self.capabilities = Capabilities(accepts_sql=True, idempotent=True,
                                         max_batch=settings.max_batch, thread_safe=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="gateway-rabbit-io",
                                        daemon=True)
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._exchange: AbstractExchange | None = None
        self._connect_lock: asyncio.Lock | None = None
        self._closed = False
        #: Each table's schema version ("schema.table" -> version); replaced whole, never
        #: changed in place: read by the workers without a lock.
        self._versions: dict[str, int] = {}
        self._thread.start()

    # -- the loop thread -------------------------------------------------------------------------

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _submit(self, coro: Any, timeout: float) -> Any:
        if self._closed:
            coro.close()
            raise RabbitUnavailableError(f"applier {self.name!r} is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RabbitUnavailableError(
                f"no answer from the broker within {timeout:.0f}s") from None

    # -- applying --------------------------------------------------------------------------------

    def apply(self, ops: Sequence[RowOp]) -> None:
        """Publish ``ops`` and return when the broker confirmed every one; raise otherwise."""
        if not ops:
            return
        versions, fmt = self._versions, self.settings.format
        messages = [encode(op, fmt, None if op.kind is OpKind.SQL
                           else versions.get(f"{op.table.schema}.{op.table.name}", 1))
                    for op in ops]
        s = self.settings
        self._submit(self._publish(messages), s.reconnect_timeout + s.confirm_timeout + 10)

    def apply_schema(self, event: SchemaEvent) -> None:
        """Publish ``event`` as its own message and return when the broker confirmed it; the
        table's later rows carry its version. A replay publishes it again with the same
        message id."""
        s = self.settings
        message = encode_schema(event, s.format, time.time_ns())
        self._submit(self._publish([message]), s.reconnect_timeout + s.confirm_timeout + 10)
        self._versions = {**self._versions, event.table: event.version}

    def start_schema(self, versions: Mapping[str, int]) -> None:
        """The tables' schema versions as of the position the dispatcher starts from."""
        self._versions = dict(versions)

    async def _ready_exchange(self) -> AbstractExchange:
        """The exchange on a live channel: connect on first use, wait out a reconnection."""
        s = self.settings
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._connection is None:
                try:
                    self._connection = await self._open()
                    channel = await self._connection.channel(publisher_confirms=True,
                                                             on_return_raises=True)
                    self._channel = channel
                    if s.declare:
                        self._exchange = await channel.declare_exchange(
                            s.exchange, aio_pika.ExchangeType.TOPIC, durable=True)
                    else:
                        self._exchange = await channel.get_exchange(s.exchange, ensure=True)
                except (TimeoutError, aiormq.exceptions.AMQPError, ConnectionError,
                        OSError) as exc:
                    await self._drop_connection()
                    raise RabbitUnavailableError(
                        f"cannot connect to {_safe_url(s.url)}: {_describe(exc)}") from None
        assert self._channel is not None and self._exchange is not None
        try:
            await asyncio.wait_for(self._ready(), s.reconnect_timeout)
        except TimeoutError:
            raise RabbitUnavailableError(
                f"broker at {_safe_url(s.url)} unreachable for {s.reconnect_timeout:.0f}s"
            ) from None
        return self._exchange

    async def _open(self) -> AbstractRobustConnection:
        """A connected robust connection, or the error of the first attempt -- after closing
        the connection object (``aio_pika.connect_robust`` drops it unclosed on failure, and
        its finaliser then schedules a ``close`` nobody awaits: a warning on stderr)."""
        s = self.settings
        connection = aio_pika.RobustConnection(
            make_url(s.url, reconnect_interval=s.reconnect_interval),
            client_properties={"connection_name": f"gateway-{self.name}"})
        try:
            await asyncio.wait_for(connection.connect(), s.reconnect_timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        return connection

    async def _ready(self) -> None:
        assert self._connection is not None and self._channel is not None
        while True:
            await self._connection.connected.wait()
            if not self._channel.is_closed:
                return
            await asyncio.sleep(0.05)  # the channel is restored after the connection

    async def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._channel = self._exchange = None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _publish(self, messages: list[OutgoingMessage]) -> None:
        exchange = await self._ready_exchange()
        s = self.settings
        publishes = [exchange.publish(_amqp_message(m), m.routing_key, mandatory=True)
                     for m in messages]
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*publishes, return_exceptions=True), s.confirm_timeout)
        except TimeoutError:
            raise RabbitUnavailableError(
                f"{len(messages)} messages not confirmed within {s.confirm_timeout:.0f}s"
            ) from None
        for message, result in zip(messages, results, strict=True):
            if isinstance(result, BaseException):
                raise _publish_error(message, result, s.exchange) from None

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection and stop the loop thread; idempotent."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            self._submit(self._drop_connection(), 30)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self._loop.close()


def _amqp_message(m: OutgoingMessage) -> aio_pika.Message:
    return aio_pika.Message(
        m.body, headers=m.headers, content_type=m.content_type,  # type: ignore[arg-type]
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT, message_id=m.message_id,
        timestamp=datetime.fromtimestamp(m.commit_ts_ns / 1e9, UTC),
        type=m.message_type, app_id="gateway")


def _publish_error(message: OutgoingMessage, exc: BaseException, exchange: str) -> Exception:
    what = f"message {message.message_id} (routing key {message.routing_key!r})"
    if isinstance(exc, aiormq.exceptions.PublishError):
        return UnroutableMessageError(
            f"{what} returned unroutable by exchange {exchange!r}: no queue is bound for it")
    if isinstance(exc, aiormq.exceptions.DeliveryError):
        return RabbitNackError(f"{what} refused by the broker: {_describe(exc)}")
    return RabbitUnavailableError(f"{what} not confirmed: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at:
        return url
    user = creds.partition(":")[0]
    return f"{scheme}{sep}{user}@{host}"
