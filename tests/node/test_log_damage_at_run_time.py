"""A damaged entry in a sealed WAL segment met at run time (issue 52, item 4).

Recovery trusts a sealed segment's footer and reads its records only when they are needed: by
a follower that lags that far, by a subscriber or an applier reading that far back. The read
must name the file and offset; the leader must not die (it sends the newest snapshot instead
of the entries); subscribers and appliers get a data-loss error, never a silent gap."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from gateway.core.wal import WalOptions
from gateway.node.storage.storage import LogDamagedError, RaftLogStorage
from gateway.raft import CompactedError, Entry, HardState, MessageType, Ready
from gateway.raft.config import Config
from gateway.raft.core import Raft

ENTRIES = 200


def _storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RaftLogStorage:
    """A log of ENTRIES entries over several sealed segments, none of them in the tail cache."""
    small = dataclasses.replace(WalOptions(), max_segment_bytes=4096)
    monkeypatch.setattr("gateway.node.storage.storage.WalOptions",
                        lambda **kw: dataclasses.replace(small, **kw))
    storage = RaftLogStorage(str(tmp_path / "raft"), fsync=False, cache_entries=1)
    storage.bootstrap((1, 2))
    for lo in range(2, ENTRIES + 2, 10):  # a batch never spans segments: many batches
        ents = [Entry(1, i, data=b"\0" + bytes([i % 251]) * 99) for i in range(lo, lo + 10)]
        storage.save_ready(Ready(hard_state=HardState(1, 1, 1), entries=ents, must_sync=True))
    return storage


def _damage_second_segment(tmp_path: Path) -> Path:
    segment = sorted((tmp_path / "raft" / "wal").glob("*.wal"))[1]
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0x20
    segment.write_bytes(bytes(data))
    return segment


def test_a_damaged_sealed_entry_reads_as_log_damage_naming_file_and_offset(
        tmp_path, monkeypatch, caplog):
    storage = _storage(tmp_path, monkeypatch)
    try:
        segment = _damage_second_segment(tmp_path)
        told: list[int] = []
        storage.on_damage = told.append
        with caplog.at_level(logging.WARNING), pytest.raises(LogDamagedError) as err:
            storage.entries(2, ENTRIES + 2, 1 << 30)
        assert isinstance(err.value, CompactedError)  # the Raft core sends a snapshot
        msg = str(err.value)
        assert msg.startswith(f"raft/wal/{segment.name}: byte ") and "\n" not in msg, msg
        assert told == [2]
        with pytest.raises(LogDamagedError):
            storage.entries(2, ENTRIES + 2, 1 << 30)
        warnings = [r.getMessage() for r in caplog.records if "Raft log damaged" in r.getMessage()]
        assert len(warnings) == 1 and segment.name in warnings[0]  # once per damaged place
    finally:
        storage.close()


def test_a_leader_sends_a_snapshot_when_a_follower_needs_a_damaged_entry(tmp_path, monkeypatch):
    storage = _storage(tmp_path, monkeypatch)
    try:
        _damage_second_segment(tmp_path)
        raft = Raft(Config(id=1, storage=storage, applied=1))
        raft.become_candidate()
        raft.become_leader()
        raft.msgs.clear()
        pr = raft.trk.progress[2]
        pr.recent_active = True
        pr.next = 2  # far behind: every entry it needs is read from the WAL
        raft._send_append(2)  # raised WalCorruptionError out of the core before
        assert [m.type for m in raft.msgs] == [MessageType.SNAP]
    finally:
        storage.close()


class _Driver:
    """What the change feed and the appliers' source read of a driver: every entry applied."""

    def __init__(self, storage: RaftLogStorage) -> None:
        self.storage = storage
        self.removed = False
        self.sm = type("Sm", (), {"applied_index": ENTRIES + 1,
                                  "skipped_between": staticmethod(lambda lo, hi: set())})()


def test_subscribers_and_appliers_get_data_loss_naming_the_damaged_file(tmp_path, monkeypatch):
    import asyncio

    import grpc

    from gateway.node.api.api import GatewayServicer
    from gateway.node.appliers.feed import ChangeFeed, CommittedLogSource

    storage = _storage(tmp_path, monkeypatch)
    try:
        segment = _damage_second_segment(tmp_path)
        drv = _Driver(storage)

        async def subscribe() -> None:
            async for _ in ChangeFeed(drv).events(2):  # type: ignore[arg-type]
                pass

        # before: the feed took the damage for a compaction race and spun on it forever
        with pytest.raises(LogDamagedError) as err:
            asyncio.run(asyncio.wait_for(subscribe(), 10))
        assert segment.name in str(err.value)
        code, _ = GatewayServicer._status_of(None, err.value)  # type: ignore[arg-type]
        assert code is grpc.StatusCode.DATA_LOSS
        # before: the appliers' source read nothing, and the applier waited there silently
        source = CommittedLogSource(drv)  # type: ignore[arg-type]
        with pytest.raises(LogDamagedError):
            for lo in range(2, ENTRIES + 2, 16):
                source.read(lo, 16)
    finally:
        storage.close()


def test_a_running_node_answers_data_loss_and_takes_a_snapshot_past_the_damage(
        tmp_path, monkeypatch):
    """A real node: a subscriber from the log's start meets the damaged sealed entry (the
    tail cache is one entry, so reads go to the WAL): DATA_LOSS naming the segment relative
    to the data directory, the node keeps serving, and a snapshot past the damage is taken
    for followers that need those entries."""
    import asyncio
    import functools

    import grpc

    from gateway.cli.sql import sql_to_statements
    from gateway.client import AsyncGatewayClient
    from gateway.node import server
    from gateway.v1 import gateway_pb2, gateway_pb2_grpc

    from .conftest import leader_of, node_configs, run, running

    monkeypatch.setattr("gateway.node.storage.storage.WalOptions",
                        functools.partial(WalOptions, max_segment_bytes=4096))
    monkeypatch.setattr(server, "RaftLogStorage",
                        functools.partial(RaftLogStorage, cache_entries=1))
    cfg = node_configs(tmp_path, 1, snapshot_entries=1_000_000)[0]

    async def body() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                for i in range(60):
                    await c.write(sql_to_statements(
                        f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 100}')", []))
            segments = sorted((Path(cfg.data_dir) / "raft" / "wal").glob("*.wal"))
            assert len(segments) >= 3
            data = bytearray(segments[1].read_bytes())
            data[len(data) // 2] ^= 0x20
            segments[1].write_bytes(bytes(data))
            assert node.storage.snapshots.metadata.index == 1
            async with grpc.aio.insecure_channel(cfg.api) as channel:
                stream = gateway_pb2_grpc.GatewayStub(channel).Subscribe(
                    gateway_pb2.SubscribeRequest(from_log_index=2), timeout=20)
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    async for _ in stream:
                        pass
            assert err.value.code() is grpc.StatusCode.DATA_LOSS, err.value
            assert f"raft/wal/{segments[1].name}: byte " in err.value.details()
            for _ in range(500):
                if node.storage.snapshots.metadata.index > 1:
                    break
                await asyncio.sleep(0.02)
            assert node.storage.snapshots.metadata.index >= 60
            assert node.failure is None and node.driver.is_leader

    run(body(), timeout=120)


def _three_nodes_of_small_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """Configurations of three real nodes whose WAL segments are 4 KiB and whose Raft log
    storage caches one entry: a few writes seal segments that reads must then decode."""
    import functools

    from gateway.node import server

    from .conftest import node_configs

    monkeypatch.setattr("gateway.node.storage.storage.WalOptions",
                        functools.partial(WalOptions, max_segment_bytes=4096))
    monkeypatch.setattr(server, "RaftLogStorage",
                        functools.partial(RaftLogStorage, cache_entries=1))
    return node_configs(tmp_path, 3, snapshot_entries=1_000_000)


def test_a_lagging_follower_catches_up_by_snapshot_past_a_leaders_damaged_entry(
        tmp_path, monkeypatch):
    """Three real nodes; one is stopped while the others commit entries over several WAL
    segments; a sealed segment of the leader is damaged; the follower comes back. Before,
    the leader's Raft loop died on the read (and the cluster with it); now it sends a
    snapshot taken past the damage, the follower catches up, and the leader keeps leading."""
    from gateway.cli.sql import sql_to_statements
    from gateway.client import AsyncGatewayClient

    from .conftest import leader_of, run, running, started, wait_for

    cfgs = _three_nodes_of_small_segments(tmp_path, monkeypatch)

    async def body() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            lagging = next(n for n in nodes if n is not leader)
            await lagging.stop()
            async with AsyncGatewayClient(leader.config.api) as c:
                for i in range(60):
                    await c.write(sql_to_statements(
                        f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 100}')", []))
            segments = sorted((Path(leader.config.data_dir) / "raft" / "wal").glob("*.wal"))
            assert len(segments) >= 3
            data = bytearray(segments[1].read_bytes())
            data[len(data) // 2] ^= 0x20
            segments[1].write_bytes(bytes(data))
            back = await started(lagging.config)
            nodes.append(back)
            await wait_for(lambda: back.sm.applied_index >= leader.sm.applied_index, 60,
                           "the lagging follower to catch up")
            assert leader.failure is None and leader.driver.is_leader
            assert leader.storage.snapshots.metadata.index > 1
            assert len(list(back.sm.scan_rows("shop", "items", [], []))) == 60

    run(body(), timeout=120)


def test_the_epoch_a_new_term_seals_is_read_back_past_a_damaged_entry(tmp_path, monkeypatch):
    """A node that takes a new term looks back through its log for an epoch left open. When
    that look reaches a damaged sealed segment, it stops there as at the start of a compacted
    log (sealing what may lie before it) instead of letting the damage stop the node."""
    from gateway.node.loop.epoch_seal import unsealed_epoch
    from gateway.raft.log import RaftLog

    storage = _storage(tmp_path, monkeypatch)
    try:
        _damage_second_segment(tmp_path)
        with pytest.raises(LogDamagedError):
            storage.entries(2, ENTRIES + 2, 1 << 30)
        assert unsealed_epoch(RaftLog(storage), 5) == ((5 << 32) - 1, 0)
    finally:
        storage.close()


def test_a_leader_whose_applied_entry_is_damaged_leads_again_in_a_new_term(
        tmp_path, monkeypatch):
    """Three real nodes; a sealed segment of the leader is damaged after its entries were
    applied; leadership moves away and back. Taking the new term, the node reads its log back
    for an epoch to seal: before, the read met the damage and the node stopped itself; now it
    leads, accepts writes and seals its epochs."""
    from gateway.cli.sql import sql_to_statements
    from gateway.client import AsyncGatewayClient

    from .conftest import leader_of, run, running, wait_for

    cfgs = _three_nodes_of_small_segments(tmp_path, monkeypatch)

    async def body() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            async with AsyncGatewayClient(leader.config.api) as c:
                for i in range(20):
                    await c.write(sql_to_statements(
                        f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 100}')", []))
            # the newest entries are read from the tail cache; the damage sits within the
            # look-back's first step
            segments = sorted((Path(leader.config.data_dir) / "raft" / "wal").glob("*.wal"))
            assert len(segments) >= 2
            data = bytearray(segments[-2].read_bytes())
            data[len(data) // 2] ^= 0x20
            segments[-2].write_bytes(bytes(data))
            other = next(n for n in nodes if n is not leader)
            resp = await leader.transfer_leader(other.config.node_id, 10)
            assert "leads now" in resp.message, resp.message
            resp = await other.transfer_leader(leader.config.node_id, 10)
            assert "leads now" in resp.message, resp.message
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write(sql_to_statements(
                    "INSERT INTO shop.items (id, name) VALUES (100, 'z')", []))
            await wait_for(lambda: all(n.sm.applied_index >= leader.sm.applied_index
                                       for n in nodes), 30, "every node to apply the write")
            assert leader.failure is None and leader.driver.is_leader
            assert len(list(other.sm.scan_rows("shop", "items", [], []))) == 21

    run(body(), timeout=120)


def test_the_look_back_goes_on_past_a_step_that_reads_only_entry_by_entry():
    """A step of the look-back whose range read fails while each of its entries reads alone
    (the damage lies outside them) is read one by one, and the walk goes on to older
    entries: it finds the record there instead of reading the same step again forever."""
    from gateway.node.loop import epoch_seal
    from gateway.node.state.wire import encode_transaction_wire

    epoch = (2 << 32) | 1
    entries = {i: Entry(2, i, data=b"") for i in range(2, 200)}
    entries[5] = Entry(2, 5, data=encode_transaction_wire(7, 9, epoch, 7, 1, 1, b""))
    reads = 0

    class Log:
        def first_index(self) -> int:
            return 2

        def last_index(self) -> int:
            return 199

        def slice(self, lo: int, hi: int, _limit: int) -> list[Entry]:
            nonlocal reads
            reads += 1
            assert reads < 1000, "the look-back reads the same step again and again"
            if hi - lo > 1 and lo <= 150 < hi:
                raise LogDamagedError("raft/wal/x.wal", 10, "record does not verify", lo)
            return [entries[i] for i in range(lo, hi)]

    assert epoch_seal.unsealed_epoch(Log(), 3) == (epoch, 9)  # type: ignore[arg-type]
