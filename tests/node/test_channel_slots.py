"""Slots: a source keeps its log for the channels reading it, up to its retention bound."""

from __future__ import annotations

import asyncio
import dataclasses

from gateway.client import AsyncGatewayClient, GatewayClient, row_insert
from gateway.core import messages
from gateway.node.base.config import ChannelConfig, RetentionConfig
from gateway.node.state.slot_apply import apply_slot_command
from gateway.v1 import replication_pb2

from .conftest import leader_of, node_configs, run, running, started, wait_for


def _pair(tmp_path, **source_kw):
    a = node_configs(tmp_path / "a", 1, cluster_id=1, snapshot_entries=10, **source_kw)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))
    return a, b


def _rows(node) -> set[int]:
    return {r.key_values[0].int_value for r in node.sm.scan_rows("shop", "items", [], [])}


async def _write(cfg, keys) -> None:
    async with AsyncGatewayClient(cfg.api) as c:
        for k in keys:
            await c.write([row_insert("shop.items", {"id": k}, {"v": f"r{k}"})])


async def _action(cfg, name: str, action: str) -> str:
    def go() -> str:
        with GatewayClient(cfg.api, timeout=20) as c:
            return c.channel_action(name, action).message
    return await asyncio.to_thread(go)


def _cli(cfg, *args: str) -> str:
    from click.testing import CliRunner

    from gateway.cli import main

    res = CliRunner().invoke(main, ["channel", *args, "--target", cfg.api])
    assert res.exit_code == 0, res.output
    return res.stdout  # (plugin warnings of this machine go to stderr)


def _slot(node):
    return node.sm.slots.get((2, "fromA"))


async def _replicated_then_paused(a, b, na, nb) -> int:
    """Rows 0-4 written on A reach B, A's slot for B's channel holds B's position, then the
    channel is paused; returns the slot's log index."""
    await leader_of([na])
    await leader_of([nb])
    await _write(a, range(5))
    await wait_for(lambda: _rows(nb) == set(range(5)), 20, "replicated")
    held = nb.sm.replication.held(1)
    await wait_for(lambda: (s := _slot(na)) is not None and s.acked_epoch >= held, 10,
                   "A's slot for B's channel at B's position")
    await _action(b, "fromA", "pause")
    await wait_for(lambda: nb.status().channels[0].state == "paused", 10, "paused")
    return _slot(na).log_index


def test_a_paused_channel_resumes_with_nothing_lost_after_the_source_compacts(tmp_path):
    """The source writes far more than snapshot_entries while the channel is paused and
    takes snapshots: its log is kept from the slot's position, the status says the slot
    holds it, and the resumed channel gets every row."""
    a, b = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            pos = await _replicated_then_paused(a, b, na, nb)
            await _write(a, range(5, 65))
            await na.driver.snapshot_now()
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() <= pos  # held: not compacted past it
            st = na.status()
            assert st.retention.held_by == "slot 2/fromA"
            assert [s.holds_log for s in st.slots] == [True]
            assert st.slots[0].held_entries >= 60 and not st.slots[0].slot.lost
            await _action(b, "fromA", "resume")
            await wait_for(lambda: _rows(nb) == set(range(65)), 30, "every row replicated")
            assert nb.status().channels[0].state == "running"
            # the slot follows the reader: the log it held goes at the next compaction
            await wait_for(lambda: _slot(na).log_index > pos + 60, 10, "the slot advanced")
            await _write(a, range(65, 80))
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() > pos

    run(go(), 120)


def test_past_the_retention_bound_the_slot_is_lost_and_the_channel_says_resync(tmp_path):
    a, b = _pair(tmp_path, retention=RetentionConfig(max_entries=20))

    async def go():
        async with running(a, b) as (na, nb):
            pos = await _replicated_then_paused(a, b, na, nb)
            await _write(a, range(5, 65))
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() > pos  # compacted past the slot
            await wait_for(lambda: _slot(na).lost, 10, "the slot marked lost")
            assert "retention.max_entries (20)" in _slot(na).lost_reason
            lines = na.status().slots
            assert lines[0].slot.lost and lines[0].held_entries == 0
            out = await asyncio.to_thread(_cli, a, "slots")
            assert out.splitlines()[0].startswith("slot 2/fromA\tacked epoch ")
            assert "LOST: it held" in out and "retention bounds: max_entries 20" in out
            from click.testing import CliRunner

            from gateway.cli import main

            res = await asyncio.to_thread(CliRunner().invoke, main, ["status", "--target", a.api])
            assert "  slot 2/fromA acked epoch " in res.stdout and ", LOST: it held" in res.stdout
            await _action(b, "fromA", "resume")
            await wait_for(lambda: nb.status().channels[0].state == "behind", 20,
                           "the channel reports it is behind")
            err = nb.status().channels[0].last_error
            assert "behind the source's log: resync" in err
            assert "gateway channel resync fromA" in err
            assert _rows(nb) == set(range(5))  # nothing applied from the middle

    run(go(), 120)


def test_drop_slot_releases_the_log(tmp_path):
    a, b = _pair(tmp_path)

    async def go():
        async with running(a, b) as (na, nb):
            pos = await _replicated_then_paused(a, b, na, nb)
            await _write(a, range(5, 40))
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() <= pos
            msg = await asyncio.to_thread(_cli, a, "drop-slot", "2/fromA")
            assert msg.startswith("slot 2/fromA dropped")
            assert _slot(na) is None
            await _write(a, range(40, 60))
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() > pos
            assert na.status().retention.held_by == "snapshot"
            from gateway.client import GatewayError
            try:
                await _action(a, "2/nope", "drop-slot")
            except GatewayError as exc:
                assert "no slot '2/nope' (slots: none" in exc.details
            else:
                raise AssertionError("dropping an unknown slot was accepted")

    run(go(), 120)


def test_slots_survive_a_restart_of_the_source_and_still_hold_its_log(tmp_path):
    a, b = _pair(tmp_path)

    async def go():
        async with running(a, b) as nodes:
            na, nb = nodes
            pos = await _replicated_then_paused(a, b, na, nb)
            before = _slot(na)
            await na.stop()
            na = await started(a)
            nodes.append(na)
            await leader_of([na])
            assert _slot(na) == before
            await _write(a, range(5, 65))
            await na.driver.snapshot_now()
            assert na.driver.storage.first_index() <= pos
            await _action(b, "fromA", "resume")
            await wait_for(lambda: _rows(nb) == set(range(65)), 30, "every row replicated")

    run(go(), 120)


def _cmd(**kw) -> bytes:
    return messages.pack(replication_pb2.SlotCommand(**kw))


def _s(epoch=0, index=0, channel="c", **kw) -> replication_pb2.ChannelSlot:
    return replication_pb2.ChannelSlot(reader_cluster_id=2, channel=channel,
                                       acked_epoch=epoch, log_index=index, **kw)


def test_a_slot_never_moves_back_and_a_lost_one_is_only_reset():
    ops: list = []
    slots = apply_slot_command({}, _cmd(advance=[_s(5, 50)]), ops)
    assert slots[(2, "c")].acked_epoch == 5 and len(ops) == 1
    assert apply_slot_command(slots, _cmd(advance=[_s(4, 40)]), []) is None  # stale ack
    slots = apply_slot_command(slots, _cmd(lost=[_s(lost_reason="bound")]), [])
    assert slots[(2, "c")].lost and slots[(2, "c")].acked_epoch == 5
    assert apply_slot_command(slots, _cmd(advance=[_s(9, 90)]), []) is None  # not revived
    reset = apply_slot_command(slots, _cmd(reset=[_s(9, 90)]), [])
    assert not reset[(2, "c")].lost and reset[(2, "c")].acked_epoch == 9
    ops = []
    assert apply_slot_command(reset, _cmd(drop=[_s()]), ops) == {}
    assert ops[0][1] is None  # the key deleted
    assert apply_slot_command({}, b"\x63\xff\xff", []) is None  # does not parse: nothing


def test_slots_are_replicated_and_hold_the_log_after_a_leader_change(tmp_path):
    """Every node of the source holds the slot (it is in the log); after the leader stops,
    the new leader keeps its log for the paused channel and the channel resumes from it."""
    srcs = node_configs(tmp_path / "a", 3, cluster_id=1, snapshot_entries=10)
    b = node_configs(tmp_path / "b", 1, cluster_id=2)[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", tuple(c.api for c in srcs)),))

    async def go():
        async with running(*srcs, b) as nodes:
            nb = nodes[3]
            old = await leader_of(nodes[:3])
            await leader_of([nb])
            await _write(srcs[0], range(5))
            await wait_for(lambda: _rows(nb) == set(range(5)), 30, "replicated")
            held = nb.sm.replication.held(1)
            await wait_for(lambda: all((s := _slot(n)) is not None and s.acked_epoch >= held
                                       for n in nodes[:3]), 15, "the slot on every node")
            await _action(b, "fromA", "pause")
            await wait_for(lambda: nb.status().channels[0].state == "paused", 10, "paused")
            pos = _slot(old).log_index
            await old.stop()
            rest = [n for n in nodes[:3] if n is not old]
            new = await leader_of(rest, 30)
            cfg = next(c for c in srcs if c.node_id == new.config.node_id)
            await _write(cfg, range(5, 45))
            for n in rest:
                await n.driver.snapshot_now()
                assert n.driver.storage.first_index() <= pos
            await _action(b, "fromA", "resume")
            await wait_for(lambda: _rows(nb) == set(range(45)), 40, "every row replicated")

    run(go(), 180)


def test_the_bytes_and_age_bounds_let_compaction_pass_a_slot_too(tmp_path):
    """``max_bytes`` counts the log files' bytes from the slot's position; ``max_age_s`` the
    age of the oldest entry it holds (the keeper's clock moved two hours on here)."""
    import time

    for bound, want in ((RetentionConfig(max_bytes=2000), "retention.max_bytes (2000)"),
                        (RetentionConfig(max_age_s=3600), "retention.max_age_s (3600 s)")):
        a, b = _pair(tmp_path / want[10:18], retention=bound)

        async def go(a=a, b=b, want=want):
            async with running(a, b) as (na, nb):
                pos = await _replicated_then_paused(a, b, na, nb)
                await _write(a, range(5, 45))
                na.slots._clock = lambda: time.time_ns() + 7200 * 10**9
                await na.driver.snapshot_now()
                assert na.driver.storage.first_index() > pos
                await wait_for(lambda: _slot(na).lost, 10, "the slot marked lost")
                assert want in _slot(na).lost_reason

        run(go(), 120)
