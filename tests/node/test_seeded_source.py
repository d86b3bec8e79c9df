"""A seeded cluster as a source: its log holds none of the transactions the seed brought, so
a channel is refused unless the reader holds them already (``ChannelHello.holds``;
docs/replication.md, "Growing a pair into a ring"). Before, a new cluster added with a plain
``channel add`` from a seeded one streamed its log and silently never got the seeded rows.
And a source at rest whose last record is a unit of reflections only pins a seed at once."""

from __future__ import annotations

from gateway.client import AsyncGatewayClient, row_insert
from gateway.core import messages
from gateway.node.state.state_machine import StoreStateMachine
from gateway.v1 import epoch_pb2, gtid_pb2, replication_pb2, transaction_pb2

from .conftest import leader_of, node_configs, run, running, wait_for
from .test_seed_source import E1, E2, _insert, apply, marker, pin, txn


def _keys(node) -> set[int]:
    return {r.key_values[0].int_value for r in node.sm.scan_rows("shop", "items", [], [])}


async def _write(api: str, keys_, text: str) -> None:
    async with AsyncGatewayClient(api) as c:
        await c.write([row_insert("shop.items", {"id": k}, {"v": f"{text}{k}"})
                       for k in keys_])


def _channel(node, name: str):
    return next((st for st in node.channels.status() if st.name == name), None)


def test_a_reader_lacking_what_a_seed_brought_is_refused_one_holding_it_is_served(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    c = node_configs(tmp_path / "c", 1, cluster_id=3)[0]

    async def go():
        async with running(a, b, c) as (na, nb, nc):
            for n in (na, nb, nc):
                await leader_of([n])
            await _write(a.api, range(20), "a")
            async with AsyncGatewayClient(b.api) as cl:
                await cl.add_channel("fromA", [a.api], seed=True)
            await wait_for(lambda: "fromA" not in nb.sm.seeds and len(_keys(nb)) == 20, 30,
                           "B seeded from A")
            await _write(b.api, [100], "b")  # B's own, in its log after the seed
            # C holds nothing: B's log from its start would give it row 100, never 0..19
            async with AsyncGatewayClient(c.api) as cl:
                await cl.add_channel("fromB", [b.api])
            await wait_for(lambda: (st := _channel(nc, "fromB")) is not None
                           and st.state == "behind", 20, "C's channel refused")
            err = _channel(nc, "fromB").last_error
            assert "behind the source's log: resync" in err
            assert "cluster 2 was seeded (last seed end at log index" in err, err
            assert "origin 1 up to trans id 1 (the reader holds up to 0)" in err, err
            assert not _keys(nc)
            # A holds every transaction the seed brought (its own): served from B's start
            async with AsyncGatewayClient(a.api) as cl:
                await cl.add_channel("fromB", [b.api])
            await wait_for(lambda: 100 in _keys(na), 20, "A reading B")
            assert _channel(na, "fromB").state == "running"
            # and C seeded from B gets everything
            async with AsyncGatewayClient(c.api) as cl:
                await cl.channel_action("fromB", "remove")
                await cl.add_channel("fromB", [b.api], seed=True)
            # (B at rest: its last record is the unit of A's reflection of its epoch)
            await wait_for(lambda: _keys(nc) == _keys(nb), 30, "C seeded from B")

    run(go(), 90)


def _unit(source_epoch: int, *items: replication_pb2.ReplicatedItem) -> bytes:
    return messages.pack(replication_pb2.ReplicatedEpoch(
        channel="fromB", source_id=2, source_epoch=source_epoch, local_epoch=E2, segment_id=1,
        end_segment=True, items=list(items)))


def test_a_pin_after_a_unit_of_reflections_only_is_taken_at_once(tmp_path):
    # In a pair at rest the last record of a source's log is often the unit its channel
    # wrote for a reflection of its own epoch (apply status only): the leader seals no
    # epoch for it, so a pin waiting for a marker after it waited until the source wrote
    # again -- a seed of an idle source never began.
    sm = StoreStateMachine(str(tmp_path / "a"), cluster_id=1)
    apply(sm, txn(1, E1, _insert(1, "a")), marker(E1, 1))
    apply(sm, _unit(40, replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
        server_id=1, epoch=E1, applied_by=2))))
    apply(sm, pin(9))
    p = sm.seed_pins.get(9)
    assert p is not None and p.snapshot is not None and p.epoch == E1
    # a unit with a transaction opens the epoch: the next pin waits for its marker
    t = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=2, trans_id=5), epoch=41, author=2, segment_id=1,
        end_segment=True, statements=[_insert(2, "b")])
    apply(sm, _unit(41, replication_pb2.ReplicatedItem(transaction=t)), pin(10))
    assert sm.seed_pins.get(10).snapshot is None
    apply(sm, marker(E2, 1))
    assert sm.seed_pins.get(10).snapshot is not None
    sm.close()
