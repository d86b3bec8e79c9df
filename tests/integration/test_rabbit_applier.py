"""The ``rabbit`` applier against a real broker: what a queue consumer receives.

End to end: random transactions go through the dispatcher (reduced, partitioned over worker
threads) into the applier; a consumer bound to the exchange reads the queue, drops copies by
``message_id``, checks that each row's operations arrive in log order and applies them to the
reference model -- its view must equal applying the original statements one by one. Also:
message properties, unroutable messages as errors, a broker restart in the middle of a stream,
and ``gateway apply`` from the command line.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from click.testing import CliRunner

from gateway.appliers import Dispatcher, DispatcherConfig, MemorySource, RetryPolicy
from gateway.cli import logtool, main
from gateway.client import AsyncGatewayClient, row_update
from gateway.core.rowops import RowOp
from tests.integration.backfill_node import fill, plugins_with, stored_rows
from tests.integration.servers import RabbitMQServer, require_module
from tests.integration.workloads import Workload, reference, without_nulls
from tests.node.conftest import node_configs, running, wait_for
from tests.reducer.model import Store, apply_op

require_module("aio_pika", "aio-pika")
require_module("gateway_rabbit", "-e plugins/gateway-rabbit")

import aio_pika  # noqa: E402
import gateway_rabbit  # noqa: E402
from gateway_rabbit import (  # noqa: E402
    RabbitApplier,
    UnroutableMessageError,
    decode_body,
    parse_options,
)

pytestmark = pytest.mark.integration

PATIENT = RetryPolicy(max_attempts=50, initial_backoff=0.05, max_backoff=1.0)


@dataclass
class Route:
    """A private exchange with one durable queue bound to every routing key."""

    url: str
    exchange: str
    queue: str


@dataclass
class ConsumerView:
    """What a de-duplicating consumer made of the queue."""

    store: Store = field(default_factory=dict)
    received: int = 0
    duplicates: int = 0
    order_violations: int = 0
    messages: list[Any] = field(default_factory=list)


async def _bind(url: str, exchange: str, queue: str) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        ex = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        q = await channel.declare_queue(queue, durable=True)
        await q.bind(ex, "#")


async def _drain(url: str, queue: str, idle: float) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Every message in ``queue`` until none arrives for ``idle`` seconds (all acked)."""
    connection = await aio_pika.connect(url)
    out = []
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=500)
        q = await channel.declare_queue(queue, durable=True)
        async with q.iterator() as it:
            while True:
                try:
                    message = await asyncio.wait_for(it.__anext__(), idle)
                except (TimeoutError, StopAsyncIteration):
                    break
                out.append(message)
                await message.ack()
        await q.delete(if_unused=False, if_empty=False)
    return out


def consume(route: Route, idle: float = 2.0) -> ConsumerView:
    """Drain the route's queue the way a de-duplicating consumer would."""
    view = ConsumerView()
    seen: set[str] = set()
    last: dict[Any, tuple[int, int]] = {}
    for message in asyncio.run(_drain(route.url, route.queue, idle)):
        view.received += 1
        assert message.message_id is not None
        if message.message_id in seen:
            view.duplicates += 1
            continue
        seen.add(message.message_id)
        op: RowOp = decode_body(message.body, message.content_type)
        position = (op.log_index, op.statement)
        if last.get(op.row_id, (0, 0)) > position:
            view.order_violations += 1
        last[op.row_id] = position
        view.messages.append(message)
        apply_op(view.store, op)
    return view


@pytest.fixture
def route(rabbitmq_url: str) -> Iterator[Route]:
    tag = uuid.uuid4().hex[:10]
    r = Route(rabbitmq_url, f"gw-test-{tag}", f"gw-test-q-{tag}")
    asyncio.run(_bind(r.url, r.exchange, r.queue))
    yield r


def _applier(url: str, exchange: str, **options: str) -> RabbitApplier:
    return RabbitApplier(parse_options({"url": url, "exchange": exchange, **options}))


def _run(applier: RabbitApplier, txns: list, state_dir: Any, threads: int) -> Dispatcher:
    dispatcher = Dispatcher(applier, MemorySource(txns), state_dir,
                            config=DispatcherConfig(threads=threads, retry=PATIENT))
    dispatcher.run()
    return dispatcher


@pytest.mark.parametrize(("threads", "fmt"), [(1, "frame"), (4, "json"), (8, "frame")])
def test_a_consumer_sees_the_reduced_operations_in_row_order_and_reaches_the_model(
        route, tmp_path, threads, fmt):
    txns = Workload(seed=threads).transactions(150)
    applier = _applier(route.url, route.exchange, format=fmt, max_batch="32")
    try:
        dispatcher = _run(applier, txns, tmp_path, threads)
    finally:
        applier.close()
    view = consume(route)
    assert dispatcher.metrics.dead_letters == 0
    assert view.order_violations == 0
    assert view.received == dispatcher.metrics.applied_ops  # each confirmed op exactly once
    assert without_nulls(view.store) == without_nulls(reference(txns))


def test_messages_are_persistent_with_headers_and_routing_keys(route, tmp_path):
    txns = Workload(seed=11).transactions(5)
    applier = _applier(route.url, route.exchange)
    try:
        _run(applier, txns, tmp_path, 2)
    finally:
        applier.close()
    view = consume(route)
    for message in view.messages:
        op = decode_body(message.body, message.content_type)
        assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        assert message.routing_key == f"{op.table.schema}.{op.table.name}.{op.kind.name.lower()}"
        assert message.headers["x-gateway-gtid"] == f"{op.gtid.server_id}:{op.gtid.trans_id}"
        assert message.headers["x-gateway-log-index"] == op.log_index
        assert message.headers["x-gateway-commit-ts-ns"] == op.commit_ts_ns
        assert message.headers["x-gateway-epoch"] == op.epoch
        assert message.headers["x-gateway-author"] == op.author
        assert message.content_type == "application/x-gateway-frame"


def test_a_replayed_stream_carries_the_same_message_ids(route, tmp_path):
    txns = Workload(seed=5).transactions(30)
    for run in ("first", "second"):  # fresh state dirs: the second run replays everything
        applier = _applier(route.url, route.exchange)
        try:
            _run(applier, txns, tmp_path / run, 4)
        finally:
            applier.close()
    view = consume(route)
    assert view.duplicates * 2 == view.received
    assert without_nulls(view.store) == without_nulls(reference(txns))


def test_an_unroutable_message_is_an_error_then_a_dead_letter_not_a_silent_drop(
        rabbitmq_url, tmp_path):
    applier = _applier(rabbitmq_url, f"gw-test-unbound-{uuid.uuid4().hex[:8]}")
    txns = Workload(seed=3).transactions(2)
    try:
        from gateway.core.rowops import statement_ops
        with pytest.raises(UnroutableMessageError, match="no queue is bound"):
            applier.apply(statement_ops(txns[0], 1))
        dispatcher = Dispatcher(applier, MemorySource(txns), tmp_path, config=DispatcherConfig(
            threads=2, retry=RetryPolicy(max_attempts=2, initial_backoff=0.01)))
        dispatcher.run()
    finally:
        applier.close()
    letters = list(dispatcher.dead_letters.letters())
    assert dispatcher.metrics.applied_ops == 0 and len(letters) == dispatcher.metrics.ops_out
    assert all("no queue is bound" in letter.message.error for letter in letters)


def test_a_broker_restart_in_the_middle_of_a_stream_loses_nothing(
        restartable_rabbitmq: RabbitMQServer, route, tmp_path):
    workload = Workload(seed=42)
    txns = workload.transactions(400)
    source = MemorySource(txns[:150])
    applier = _applier(route.url, route.exchange, max_batch="16", reconnect_interval="0.5")
    dispatcher = Dispatcher(applier, source, tmp_path, config=DispatcherConfig(
        threads=4, retry=PATIENT, poll_interval=0.02))
    runner = threading.Thread(target=dispatcher.run, kwargs={"follow": True})
    runner.start()

    def feed() -> None:
        for txn in txns[150:]:
            source.append(txn)
            time.sleep(0.02)

    feeder = threading.Thread(target=feed)
    try:
        feeder.start()
        time.sleep(0.5)
        at_stop = dispatcher.position.log_index
        restartable_rabbitmq.restart()  # stop + start: publishing waits or fails, then resumes
        feeder.join()
        deadline = time.monotonic() + 120
        while dispatcher.position.log_index < len(txns) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        dispatcher.stop()
        runner.join(60)
        applier.close()
    assert dispatcher.position.log_index == len(txns)
    assert dispatcher.metrics.dead_letters == 0
    assert at_stop < len(txns)  # the stream was still running when the broker went down
    view = consume(route)
    assert view.order_violations == 0
    assert without_nulls(view.store) == without_nulls(reference(txns))


def test_gateway_apply_publishes_a_log_through_the_rabbit_applier(route, tmp_path):
    txns = Workload(seed=8).transactions(20)
    log = tmp_path / "log.bin"
    for txn in txns:
        logtool.append_transaction(log, txn)
    result = CliRunner().invoke(main, [
        "--plugins", "rabbit", "apply", str(log), "--applier", "rabbit",
        "-o", f"url={route.url}", "-o", f"exchange={route.exchange}", "--threads", "4"])
    assert result.exit_code == 0, result.output
    assert "rabbit: applied" in result.output
    assert without_nulls(consume(route).store) == without_nulls(reference(txns))


def test_a_rabbit_sink_added_to_a_node_publishes_its_rows_marked_as_backfill_then_changes(
        route, tmp_path):
    """Issue 54 item 4: a new applier on a node holding rows gets them as UPSERT messages
    headed ``x-gateway-backfill: true`` with the snapshot index, then the log's changes after
    that index without the header; a consumer's view equals the store."""
    n = 500
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> tuple[int, dict]:
        async with running(cfg):
            await fill(cfg.api, "shop.items", n)
        sink = replace(cfg, appliers={"rabbit": {"url": route.url, "exchange": route.exchange}})
        async with running(sink, plugins=plugins_with(gateway_rabbit, "rabbit")) as nodes:
            node = nodes[0]

            def caught_up() -> bool:
                a = node.status().appliers[0]
                return a.backfill_state == "done" and a.position >= node.sm.applied_index

            await wait_for(caught_up, 60, "the backfill to finish")
            index = node.status().appliers[0].backfill_index
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_update("shop.items", {"id": 3}, {"v": "changed"})])
            await wait_for(caught_up, 60, "the change to be published")
            assert not node.status().appliers[0].error
            return index, stored_rows(node)

    index, rows = asyncio.run(asyncio.wait_for(go(), 120))
    view = consume(route)
    assert view.order_violations == 0
    snapshot = [m for m in view.messages if m.headers.get("x-gateway-backfill") == "true"]
    changes = [m for m in view.messages if "x-gateway-backfill" not in m.headers]
    assert len(snapshot) == n
    assert {m.headers["x-gateway-snapshot-index"] for m in snapshot} == {index}
    assert {m.routing_key for m in snapshot} == {"shop.items.upsert"}
    assert all(decode_body(m.body).backfill == index for m in snapshot)
    (change,) = changes
    assert change.routing_key == "shop.items.update" and decode_body(change.body).log_index > index
    model = {(t.schema, t.name, key[0]): row for (t, key), row in view.store.items()}
    assert model == rows


def test_schema_events_reach_the_exchange_in_log_order_and_rows_carry_their_version(
        route, tmp_path):
    """Issue 57: the log of tests/appliers/schema_log.py through the rabbit applier to a real
    broker: the four schema events are messages of their own (``s.items.schema``), each
    after the rows before it and before the rows after it, and every row message's
    ``x-gateway-schema-version`` is its table's version then."""
    from gateway_rabbit import decode_schema_body

    from tests.appliers.schema_log import events, schema_log

    applier = _applier(route.url, route.exchange, max_batch="4")
    try:
        dispatcher = Dispatcher(applier, MemorySource(schema_log()), tmp_path,
                                config=DispatcherConfig(threads=4, retry=PATIENT))
        dispatcher.run()
    finally:
        applier.close()
    received = asyncio.run(_drain(route.url, route.queue, 2.0))
    assert dispatcher.metrics.dead_letters == 0
    schema = [m for m in received if m.routing_key == "s.items.schema"]
    assert [decode_schema_body(m.body, m.content_type) for m in schema] == events()
    at = {item.version: i for i, item in enumerate(schema_log(), 1)
          if not hasattr(item, "gtid")}  # version -> log index of its event
    version = 0
    for m in received:
        if m in schema:
            version = m.headers["x-gateway-schema-version"]
            assert m.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
            continue
        op = decode_body(m.body, m.content_type)
        assert m.headers["x-gateway-schema-version"] == version, op
        # published after the event of its version and before the next one
        assert at[version] < op.log_index < at.get(version + 1, 1 << 30), (version, op)
    assert version == 4
    assert len(received) - len(schema) == dispatcher.metrics.applied_ops
