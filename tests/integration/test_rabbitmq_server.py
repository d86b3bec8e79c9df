"""Smoke tests: the RabbitMQ broker the fixtures provide works the way the applier plugin needs.

Topic exchange, routing keys ``schema.table.op``, persistent messages with headers and message ids,
publisher confirms, unroutable mandatory messages raising, consuming back, and a broker restart that
keeps durable queues and persistent messages.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from tests.integration.servers import RabbitMQServer, require_module

require_module("aio_pika", "aio-pika")

import aio_pika  # noqa: E402
from aio_pika.abc import AbstractIncomingMessage  # noqa: E402
from pamqp.commands import Basic  # noqa: E402

pytestmark = pytest.mark.integration

T = TypeVar("T")
TIMEOUT = 60.0


def run(coro: Awaitable[T], timeout: float = TIMEOUT) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def collect(queue: aio_pika.abc.AbstractQueue, count: int) -> list[AbstractIncomingMessage]:
    received: list[AbstractIncomingMessage] = []
    async with queue.iterator() as messages:
        async for message in messages:
            async with message.process():
                received.append(message)
            if len(received) == count:
                break
    return received


def test_topic_exchange_publish_with_confirms_and_consume(rabbitmq_url: str) -> None:
    ops = ["insert", "update", "delete"]
    count = 30

    async def scenario() -> tuple[list[Any], list[AbstractIncomingMessage]]:
        connection = await aio_pika.connect_robust(rabbitmq_url, timeout=30)
        async with connection:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            exchange = await channel.declare_exchange(
                unique("gw-smoke"), aio_pika.ExchangeType.TOPIC, auto_delete=True
            )
            queue = await channel.declare_queue(unique("gw-smoke"), exclusive=True)
            await queue.bind(exchange, routing_key="shop.orders.*")

            confirms = await asyncio.gather(
                *(
                    exchange.publish(
                        aio_pika.Message(
                            body=f"row-{i}".encode(),
                            message_id=f"1:{i}",
                            headers={"gtid": f"1:{i}", "epoch": 7, "author": "cluster-1"},
                            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                            content_type="application/octet-stream",
                        ),
                        routing_key=f"shop.orders.{ops[i % len(ops)]}",
                        mandatory=True,
                    )
                    for i in range(count)
                )
            )
            # Mandatory + no matching binding: the broker returns it and the publish raises.
            with pytest.raises(aio_pika.exceptions.DeliveryError):
                await exchange.publish(
                    aio_pika.Message(b"nobody listens"),
                    routing_key="shop.customers.insert",
                    mandatory=True,
                )
            received = await collect(queue, count)
            return confirms, received

    confirms, received = run(scenario())

    assert all(isinstance(c, Basic.Ack) for c in confirms)
    assert [m.body for m in received] == [f"row-{i}".encode() for i in range(count)]
    assert [m.message_id for m in received] == [f"1:{i}" for i in range(count)]
    assert [m.routing_key for m in received] == [f"shop.orders.{ops[i % 3]}" for i in range(count)]
    assert received[5].headers == {"gtid": "1:5", "epoch": 7, "author": "cluster-1"}
    assert all(m.delivery_mode == aio_pika.DeliveryMode.PERSISTENT for m in received)


def test_broker_restart_keeps_persistent_messages(restartable_rabbitmq: RabbitMQServer) -> None:
    server = restartable_rabbitmq
    queue_name = unique("gw-restart")
    bodies = [f"before-restart-{i}".encode() for i in range(10)]

    async def publish_before() -> None:
        connection = await aio_pika.connect(server.url, timeout=30)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.declare_queue(queue_name, durable=True)
            for body in bodies:
                await channel.default_exchange.publish(
                    aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=queue_name,
                )

    async def consume_after() -> list[bytes]:
        connection = await aio_pika.connect(server.url, timeout=30)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(queue_name, durable=True)
            got = [m.body for m in await collect(queue, len(bodies))]
            await queue.delete(if_unused=False, if_empty=False)
            return got

    run(publish_before())
    server.restart()
    assert run(consume_after()) == bodies


def test_robust_connection_survives_broker_restart(restartable_rabbitmq: RabbitMQServer) -> None:
    """A robust connection and channel held across a restart publish again once it is back."""
    server = restartable_rabbitmq
    queue_name = unique("gw-robust")

    async def scenario() -> list[bytes]:
        connection = await aio_pika.connect_robust(server.url, timeout=30, reconnect_interval=0.5)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue(queue_name, durable=True)
            await channel.default_exchange.publish(
                aio_pika.Message(b"one", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue_name,
            )
            reconnected = asyncio.Event()
            connection.reconnect_callbacks.add(lambda *_: reconnected.set())

            await asyncio.to_thread(server.restart)
            await asyncio.wait_for(reconnected.wait(), 60)

            await channel.default_exchange.publish(
                aio_pika.Message(b"two", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue_name,
            )
            got = [m.body for m in await collect(queue, 2)]
            await queue.delete(if_unused=False, if_empty=False)
            return got

    assert run(scenario(), timeout=240) == [b"one", b"two"]
