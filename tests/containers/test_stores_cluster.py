"""Three gateway containers run with ``--plugins cassandra,rabbit`` against Cassandra and
RabbitMQ containers: under writes the leader's container is killed and later a follower is
partitioned away from its peers; after healing, every acknowledged write is on every node, in
Cassandra and on a RabbitMQ queue -- and nothing the test started is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import time

from tests.containers.stores import CASSANDRA_IMAGE, RABBITMQ_IMAGE, StoreContainer, store_network
from tests.containers.test_cluster import _left, survive_a_killed_leader_and_a_partition

QUEUE = "gateway-test-all"


async def _bind_queue(url: str) -> None:
    """A durable queue bound to every change the rabbit applier publishes (exchange
    ``gateway``, declared as the applier declares it) -- before anything is published."""
    import aio_pika

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        ex = await channel.declare_exchange("gateway", aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue(QUEUE, durable=True)
        await queue.bind(ex, "#")


async def _drain(url: str, idle: float) -> list[tuple[str, object]]:
    """``(routing key, RowOp)`` of every message in the queue until none comes for ``idle`` s."""
    import aio_pika
    from gateway_rabbit import decode_body

    out = []
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=500)
        queue = await channel.declare_queue(QUEUE, durable=True)
        async with queue.iterator() as it:
            while True:
                try:
                    message = await asyncio.wait_for(it.__anext__(), idle)
                except (TimeoutError, StopAsyncIteration):
                    break
                out.append((message.routing_key,
                            decode_body(message.body, message.content_type)))
                await message.ack()
    return out


def _cassandra_rows(host: str, port: int) -> dict[int, str]:
    from cassandra.cluster import Cluster

    cluster = Cluster([host], port=port, connect_timeout=10)
    try:
        session = cluster.connect()
        return {r.id: r.v for r in session.execute("SELECT id, v FROM s.t")}
    finally:
        cluster.shutdown()


def test_a_cluster_with_cassandra_and_rabbit_appliers_loses_no_acknowledged_write():
    from gateway.testing import GatewayCluster

    with contextlib.ExitStack() as stack:
        net = stack.enter_context(store_network())
        cassandra = StoreContainer(CASSANDRA_IMAGE, net, "cassandra", 9042)
        rabbit = StoreContainer(RABBITMQ_IMAGE, net, "rabbitmq", 5672)
        for store in (cassandra, rabbit):  # both start at once
            stack.callback(store.stop)
            store.run()
        rabbit.wait(), cassandra.wait()
        host, port = rabbit.address
        broker = f"amqp://guest:guest@{host}:{port}/"
        asyncio.run(_bind_queue(broker))

        cluster = GatewayCluster(3, plugins=("cassandra", "rabbit"), options={
            "cassandra.contact": "cassandra:9042",
            "rabbit.url": "amqp://guest:guest@rabbitmq:5672/"}, networks=[net])
        prefix = f"gateway-{cluster._id}"
        stack.callback(cluster.stop)
        cluster.start()

        acked = survive_a_killed_leader_and_a_partition(cluster)
        want = {i: f"v{i}" for i in acked}

        deadline = time.monotonic() + 120
        while True:
            rows = _cassandra_rows(*cassandra.address)
            missing = {i for i in want if rows.get(i) != want[i]}
            if not missing:
                break
            assert time.monotonic() < deadline, f"missing from Cassandra: {sorted(missing)}"
            time.sleep(1)

        published: dict[int, str] = {}
        deadline = time.monotonic() + 120
        while True:
            for key, op in asyncio.run(_drain(broker, idle=2.0)):
                assert key == "s.t.insert", key
                values = dict(zip((c.name for c in op.columns), op.values, strict=True))
                published[op.key[0]] = values["v"]
            missing = {i for i in want if published.get(i) != want[i]}
            if not missing:
                break
            assert time.monotonic() < deadline, f"missing from the queue: {sorted(missing)}"
    assert _left(prefix) == ("", "")
    assert _left(net) == ("", "")
