"""The appliers' read of a node's committed log hands schema events over as ``SchemaEntry``
values, in place, and a schema event the state machine refused as no event at all."""

from __future__ import annotations

import pytest

from gateway.appliers.source import CommittedEntry, EntrySourceError, SchemaEntry
from gateway.core import messages
from gateway.core.messages import TypeTag
from gateway.node.appliers import feed
from gateway.node.appliers.feed import CommittedLogSource
from gateway.raft import Entry
from gateway.schema.codec import encode_event
from tests.appliers.schema_log import events, txn


class _Storage:
    def __init__(self, ents: list[Entry]) -> None:
        self.ents = ents

    def first_index(self) -> int:
        return 1

    def entries(self, lo: int, hi: int, _max_bytes: int) -> list[Entry]:
        return [e for e in self.ents if lo <= e.index < hi]


class _Sm:
    def __init__(self, applied: int, skipped: set[int]) -> None:
        self.applied_index = applied
        self.skipped = skipped

    def skipped_between(self, lo: int, hi: int) -> set[int]:
        return {i for i in self.skipped if lo <= i < hi}


class _Driver:
    def __init__(self, ents: list[Entry], skipped: set[int]) -> None:
        self.storage = _Storage(ents)
        self.sm = _Sm(len(ents), skipped)


@pytest.mark.parametrize("in_c", [True, False])
def test_schema_events_the_state_machine_applied_are_schema_entries_in_place(monkeypatch,
                                                                              in_c):
    if not in_c:
        monkeypatch.setattr(feed, "feed_entries", None)
    elif feed.feed_entries is None:
        pytest.skip("no C accelerator built")
    create, add_c = events()[:2]
    ents = [Entry(1, 1, data=encode_event(create)),
            Entry(1, 2, data=messages.pack(txn(1))),
            Entry(1, 3, data=bytes((TypeTag.EPOCH_MARKER,))),
            Entry(1, 4, data=encode_event(add_c)),   # refused by the state machine
            Entry(1, 5, data=encode_event(add_c))]
    got = CommittedLogSource(_Driver(ents, {4})).read(1, 10)
    assert [type(e) for e in got] == [SchemaEntry, CommittedEntry, CommittedEntry,
                                      CommittedEntry, SchemaEntry]
    assert got[0].schema == create and got[4].schema == add_c
    assert got[1].transaction is not None and got[3].transaction is None


def test_an_undecodable_schema_event_stops_the_read_naming_the_entry():
    ents = [Entry(1, 1, data=bytes((TypeTag.SCHEMA_EVENT,)) + b"\xff\xff")]
    with pytest.raises(EntrySourceError, match="log entry 1: schema event: "):
        CommittedLogSource(_Driver(ents, set())).read(1, 10)


def test_the_node_source_tells_each_tables_version_as_of_an_index_from_the_store_history():
    from gateway.node.state.schema_apply import history_prefix

    create, add_c, rename, drop_b = events()
    applied_at = {1: create, 4: add_c, 8: rename, 12: drop_b}
    stored = sorted((history_prefix(e.table) + e.version.to_bytes(8, "big"),
                     i.to_bytes(8, "big") + encode_event(e)) for i, e in applied_at.items())

    class _Store:
        def scan_prefix(self, prefix: bytes):
            return [(k, v) for k, v in stored if k.startswith(prefix)]

    driver = _Driver([], set())
    driver.sm.store = _Store()
    source = CommittedLogSource(driver)
    assert source.schema_versions(0) == {}
    assert source.schema_versions(7) == {"s.items": 2}
    assert source.schema_versions(8) == {"s.items": 3}
    assert source.schema_versions(100) == {"s.items": 4}
