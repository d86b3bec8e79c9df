"""Schema events through the dispatcher: log order against concurrent workers, the
per-applier policy (apply, ignore, stop) and failures (gateway.appliers.schema_delivery)."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Sequence

import pytest

from gateway.appliers.contract import (
    ApplierConfigError,
    ApplierFactory,
    Capabilities,
    TransientApplyError,
    UnsupportedOperationError,
)
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig, DispatcherError
from gateway.appliers.source import MemorySource
from gateway.appliers.workers import RetryPolicy
from gateway.core.rowops import RowOp
from gateway.schema.model import Column, SchemaEvent, TableDef
from tests.appliers.fakes import ModelApplier
from tests.appliers.test_dispatcher import sequential, workload

FAST = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.002)


def event(version: int, name: str = "c") -> SchemaEvent:
    col = Column(name, "INTEGER", 0)
    return SchemaEvent("s.t", version, "add_column", column=col,
                       definition=TableDef("s.t", version, (Column("id", "INTEGER"), col),
                                           ("id",)))


class SchemaModel(ModelApplier):
    """A model applier that records, for every schema event, the store as it was then, and a
    global trace of what it was handed (schema events and the log indexes of operations)."""

    def __init__(self, *, delay: float = 0.0, fail: Exception | None = None,
                 fails: int = 0) -> None:
        super().__init__(capabilities=Capabilities(accepts_sql=True, max_batch=4))
        self.delay = delay
        self.seen: list[tuple[SchemaEvent, dict]] = []
        self.order: list[tuple[str, int]] = []
        self.schema_fail = fail
        self.schema_fails = fails
        self._order_lock = threading.Lock()

    def apply(self, ops: Sequence[RowOp]) -> None:
        if self.delay:
            time.sleep(self.delay)  # keep workers busy so a wrong order would show
        super().apply(ops)
        with self._order_lock:
            self.order.extend(("op", op.log_index) for op in ops)

    def apply_schema(self, ev: SchemaEvent) -> None:
        if self.schema_fail is not None and self.schema_fails > 0:
            self.schema_fails -= 1
            raise self.schema_fail
        with self._order_lock:
            self.seen.append((ev, copy.deepcopy(self.store)))
            self.order.append(("schema", ev.version))


def config(**kw) -> DispatcherConfig:
    kw.setdefault("retry", FAST)
    kw.setdefault("save_interval", 0.0)
    return DispatcherConfig(**kw)


def log_with_events(n: int = 120, every: int = 30) -> tuple[list, dict[int, int]]:
    """A workload with a schema event after every ``every`` transactions; returns the items
    and {event version: its log index}."""
    txns = workload(7, n=n, with_sql=False)
    items: list = []
    where: dict[int, int] = {}
    for i, t in enumerate(txns, 1):
        items.append(t)
        if i % every == 0:
            v = i // every
            items.append(event(v))
            where[v] = len(items)
    return items, where


@pytest.mark.parametrize("threads", [1, 8])
def test_a_schema_event_reaches_the_applier_after_every_earlier_transaction_and_before_any_later(
        tmp_path, threads):
    items, where = log_with_events()
    applier = SchemaModel(delay=0.0005)
    d = Dispatcher(applier, MemorySource(items), tmp_path,
                   config=config(threads=threads, read_batch=64))
    position = d.run()
    assert position.log_index == len(items)
    assert [ev.version for ev, _ in applier.seen] == sorted(where)
    txns = [t for t in items if not isinstance(t, SchemaEvent)]
    for ev, store in applier.seen:
        before = [t for t in items[:where[ev.version] - 1] if not isinstance(t, SchemaEvent)]
        assert store == sequential(before)[0], f"store at schema version {ev.version}"
    # and no operation of a later entry was handed over before the event
    for k, (what, value) in enumerate(applier.order):
        if what == "schema":
            index = where[value]
            assert all(i < index for w, i in applier.order[:k] if w == "op")
            assert all(i > index for w, i in applier.order[k + 1:] if w == "op")
    assert applier.store == sequential(txns)[0]
    assert d.metrics.snapshot()["schema_events"] == len(where)


def test_the_columns_path_still_delivers_schema_events_between_its_windows(tmp_path):
    from gateway.appliers.sqlite import SqliteApplier
    from tests.reducer.model import insert, txn

    items: list = []
    where: dict[int, int] = {}
    for t in range(1, 61):  # plain inserts of distinct rows: the columns path takes them
        items.append(txn(t, insert("t", [{"id": t, "a": t}]), commit_ts_ns=t))
        if t % 20 == 0:
            items.append(event(t // 20))
            where[t // 20] = len(items)
    seen: list[tuple[int, int]] = []

    class Recording(SqliteApplier):
        def apply_schema(self, ev: SchemaEvent) -> None:
            rows = self._conn().execute('SELECT count(*) FROM "t"').fetchone()[0]
            seen.append((ev.version, rows))

    applier = Recording(tmp_path / "t.db")
    d = Dispatcher(applier, MemorySource(items), tmp_path, config=config(threads=4))
    assert d.run().log_index == len(items)
    assert d.metrics.snapshot()["column_windows"] >= 3
    # at each event, exactly the rows of the transactions before it
    assert seen == [(1, 20), (2, 40), (3, 60)]


def test_an_applier_with_policy_ignore_is_not_handed_schema_events_and_the_hook_says_so(
        tmp_path):
    items, _ = log_with_events(n=40, every=20)
    applier = SchemaModel()
    applier.schema_policy = "ignore"
    told: list[tuple[str, int, str]] = []
    d = Dispatcher(applier, MemorySource(items), tmp_path, config=config(),
                   on_schema_event=lambda a, ev, outcome: told.append((a, ev.version, outcome)))
    assert d.run().log_index == len(items)
    assert applier.seen == []
    assert told == [("model", 1, "ignored"), ("model", 2, "ignored")]


def test_an_applier_without_apply_schema_passes_schema_events_by_and_applies_every_row(
        tmp_path):
    items, _ = log_with_events(n=40, every=20)
    applier = ModelApplier()
    told: list[str] = []
    d = Dispatcher(applier, MemorySource(items), tmp_path, config=config(),
                   on_schema_event=lambda a, ev, outcome: told.append(outcome))
    assert d.run().log_index == len(items)
    assert applier.store == sequential([t for t in items if not isinstance(t, SchemaEvent)])[0]
    assert told == ["ignored", "ignored"]


def test_policy_stop_halts_the_applier_at_the_event_naming_it_and_keeps_its_position(tmp_path):
    items, where = log_with_events(n=40, every=20)
    applier = SchemaModel()
    applier.schema_policy = "stop"
    d = Dispatcher(applier, MemorySource(items), tmp_path, config=config(threads=4))
    with pytest.raises(DispatcherError) as info:
        d.run()
    text = str(info.value)
    assert "table s.t version 1 (add_column c)" in text and "'stop'" in text
    assert "\n" not in text
    assert d.positions.load().log_index == where[1] - 1  # right before the event
    assert applier.store == sequential(items[:where[1] - 1])[0]  # nothing after it
    # a restart stops at the same place again
    d2 = Dispatcher(applier, MemorySource(items), tmp_path, config=config(threads=4))
    with pytest.raises(DispatcherError):
        d2.run()
    assert d2.positions.load().log_index == where[1] - 1
    # ... until the policy changes: then it goes on from there
    applier.schema_policy = "apply"
    d3 = Dispatcher(applier, MemorySource(items), tmp_path, config=config(threads=4))
    assert d3.run().log_index == len(items)
    assert [ev.version for ev, _ in applier.seen] == [1, 2]


def test_a_change_the_store_cannot_make_is_reported_in_one_line_and_passed_by(tmp_path, caplog):
    items, _ = log_with_events(n=40, every=20)
    applier = SchemaModel(fail=UnsupportedOperationError("CQL renames only key columns"),
                          fails=1)
    d = Dispatcher(applier, MemorySource(items), tmp_path, config=config())
    with caplog.at_level(logging.WARNING, logger="gateway.appliers"):
        assert d.run().log_index == len(items)
    lines = [r.getMessage() for r in caplog.records if "not applied" in r.getMessage()]
    assert lines == ["applier model: schema change at log index 21, table s.t version 1 "
                     "(add_column c): not applied: CQL renames only key columns"]
    assert d.metrics.snapshot()["schema_unsupported"] == 1
    assert d.schema.note == lines[0]
    assert [ev.version for ev, _ in applier.seen] == [2]


def test_a_transient_schema_failure_is_retried_and_a_permanent_one_stops_before_the_event(
        tmp_path):
    items, where = log_with_events(n=40, every=20)
    flaky = SchemaModel(fail=TransientApplyError("busy"), fails=2)
    d = Dispatcher(flaky, MemorySource(items), tmp_path / "a", config=config())
    assert d.run().log_index == len(items)
    assert [ev.version for ev, _ in flaky.seen] == [1, 2]
    broken = SchemaModel(fail=ValueError("no such type"), fails=1)
    d = Dispatcher(broken, MemorySource(items), tmp_path / "b", config=config())
    with pytest.raises(DispatcherError, match=r"version 1 .*apply_schema failed: "
                                              r"ValueError: no such type"):
        d.run()
    assert d.positions.load().log_index == where[1] - 1


def test_the_schema_policy_is_every_appliers_option_checked_by_the_factory():
    factory = ApplierFactory("m", lambda opts: ModelApplier(), options={})
    assert factory.build({}).schema_policy == "apply"
    assert factory.build({"schema_policy": "Stop"}).schema_policy == "stop"
    with pytest.raises(ApplierConfigError, match="schema_policy must be one of apply, "
                                                 "ignore, stop, not 'never'"):
        factory.build({"schema_policy": "never"})


def test_a_replicated_epochs_schema_events_come_before_its_transactions(tmp_path):
    from gateway.appliers.source import CommittedEntry, SchemaEntry
    from tests.reducer.model import insert, txn

    class Source:
        def __init__(self, entries):
            self.entries = entries

        def read(self, from_index, max_entries):
            return [e for e in self.entries if e.index >= from_index][:max_entries]

        def last_index(self):
            return self.entries[-1].index

    entries = [CommittedEntry(1, txn(1, insert("t", [{"id": 1, "a": 1}]))),
               SchemaEntry(2, (event(1), event(2, "d")),
                           (txn(7, insert("t", [{"id": 2, "a": 2}]), server_id=9),)),
               CommittedEntry(3, txn(2, insert("t", [{"id": 3, "a": 3}])))]
    applier = SchemaModel()
    d = Dispatcher(applier, Source(entries), tmp_path, config=config(threads=4))
    assert d.run().log_index == 3
    assert applier.order[:3] == [("op", 1), ("schema", 1), ("schema", 2)]
    assert sorted(applier.order[3:]) == [("op", 2), ("op", 3)]  # other rows: any order
    # stopped at it: the entry is not done, its transactions not applied
    stopper = SchemaModel()
    stopper.schema_policy = "stop"
    d = Dispatcher(stopper, Source(entries), tmp_path / "stop", config=config(threads=4))
    with pytest.raises(DispatcherError, match="log index 2"):
        d.run()
    assert d.positions.load().log_index == 1 and stopper.order == [("op", 1)]
