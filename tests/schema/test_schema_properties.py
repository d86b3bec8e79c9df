"""Property tests of the pure schema model over random interleavings on two and three
clusters: each cluster makes schema changes on its own current version and writes rows under
it, channels deliver each cluster's events and writes to the others in order (but in any
interleaving between channels), and once everything is delivered every cluster holds the
same definition, the same history, the same losers and the same rows."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.schema.apply import (
    plan_add_column,
    plan_create,
    plan_drop_column,
    plan_drop_table,
    plan_rename_column,
)
from gateway.schema.codec import event_id
from gateway.schema.history import TableHistory
from gateway.schema.model import Column, SchemaError, SchemaEvent, TableDef
from gateway.schema.upcast import fits

T = "app.t"
NAMES = ("a", "b", "c", "d")
TYPES = {"INTEGER": (0, 7), "VARCHAR": ("", "x"), "DOUBLE": (0.0, 1.5), "BOOLEAN": (False, True)}


@dataclass
class Write:
    stamp: tuple[int, str]
    key: int
    values: dict[str, object]
    under: bytes


@dataclass
class Cluster:
    name: str
    primary: str
    history: TableHistory = field(init=False)
    rows: dict[int, Write] = field(default_factory=dict)
    clock: int = 0

    def __post_init__(self) -> None:
        self.history = TableHistory(T, self.primary)

    def receive(self, item: SchemaEvent | Write) -> None:
        if isinstance(item, SchemaEvent):
            self.history.add(item)
            return
        self.clock = max(self.clock, item.stamp[0])
        have = self.rows.get(item.key)
        if have is None or have.stamp < item.stamp:
            self.rows[item.key] = item

    def view(self) -> dict[int, dict[str, object] | None]:
        return {k: self.history.read(w.values, w.under) for k, w in sorted(self.rows.items())}


def _change(c: Cluster, pick: int) -> SchemaEvent | None:
    """A change this cluster's leader would accept on its current version (None if refused)."""
    h = c.history
    d, parent = h.definition(), h.head()
    name, (tname, (default, _)) = NAMES[pick % 4], list(TYPES.items())[pick // 4 % 4]
    try:
        if d is None:
            return plan_create(None, T, (Column("id", "INTEGER"), Column(name, tname, default)),
                               ("id",), origin=c.name, parent=parent,
                               last_version=h.version(), implicit=bool(pick & 16))
        op = pick // 16 % 5
        if op <= 1:
            return plan_add_column(d, T, Column(name, tname, default), origin=c.name,
                                   parent=parent)
        if op == 2:
            return plan_drop_column(d, T, name, origin=c.name, parent=parent)
        if op == 3:
            victim = d.columns[pick % len(d.columns)].name
            return plan_rename_column(d, T, victim, NAMES[(pick + 1) % 4], origin=c.name,
                                      parent=parent)
        return plan_drop_table(d, T, origin=c.name, parent=parent) if pick % 7 == 0 else None
    except SchemaError:
        return None


def _row(d: TableDef, pick: int) -> dict[str, object]:
    out: dict[str, object] = {"id": pick % 5}
    for i, col in enumerate(d.columns[1:]):
        out[col.name] = TYPES[col.type][(pick >> i) & 1]
    return out


STEPS = st.lists(st.tuples(st.sampled_from(("change", "write", "deliver", "deliver")),
                           st.integers(0, 2), st.integers(0, 2), st.integers(0, 255)),
                 max_size=60)


def _run(n: int, steps: list[tuple[str, int, int, int]], primary: str) -> list[Cluster]:
    clusters = [Cluster(chr(ord("A") + i), primary) for i in range(n)]
    queues = {(s, r): deque[SchemaEvent | Write]() for s in range(n) for r in range(n) if s != r}

    def send(src: int, item: SchemaEvent | Write) -> None:
        clusters[src].receive(item)
        for r in range(n):
            if r != src:
                queues[(src, r)].append(item)

    for what, a, b, pick in steps:
        src, dst = a % n, b % n
        c = clusters[src]
        if what == "change":
            e = _change(c, pick)
            if e is not None:
                send(src, e)
                assert c.history.head() == event_id(e)  # the leader applies its own change
        elif what == "write":
            d = c.history.definition()
            if d is not None:
                c.clock += 1
                send(src, Write((c.clock, c.name), pick % 5, _row(d, pick), c.history.head()))
        elif src != dst and queues[(src, dst)]:
            clusters[dst].receive(queues[(src, dst)].popleft())
    for q in queues.values():  # quiescence: every channel drained
        while q:
            item = q.popleft()
            for (_, r), q2 in queues.items():
                if q2 is q:
                    clusters[r].receive(item)
    return clusters


def _assert_converged(clusters: list[Cluster]) -> None:
    first = clusters[0]
    for c in clusters[1:]:
        assert c.history.chain() == first.history.chain()
        assert c.history.definition() == first.history.definition()
        assert c.history.lost() == first.history.lost()
        assert c.view() == first.view()
    for c in clusters:
        assert c.history.pending() == []
        d = c.history.definition()
        for row in c.view().values():
            if row is not None and d is not None:
                assert list(row) == [col.name for col in d.columns]
                assert all(fits(row[col.name], col.type) for col in d.columns)


@settings(max_examples=300, deadline=None)
@given(STEPS, st.sampled_from(("", "A", "B")))
def test_two_clusters_converge_whatever_the_interleaving(steps, primary) -> None:  # type: ignore[no-untyped-def]
    _assert_converged(_run(2, steps, primary))


@settings(max_examples=300, deadline=None)
@given(STEPS, st.sampled_from(("", "B", "C")))
def test_three_clusters_converge_whatever_the_interleaving(steps, primary) -> None:  # type: ignore[no-untyped-def]
    _assert_converged(_run(3, steps, primary))


@settings(max_examples=100, deadline=None)
@given(STEPS)
def test_the_arrival_order_of_events_does_not_change_the_history(steps) -> None:  # type: ignore[no-untyped-def]
    clusters = _run(3, steps, "")
    events = [clusters[0].history.event(e) for e in clusters[0].history._events]
    backwards = TableHistory(T)
    for e in reversed(events):
        backwards.add(e)
    assert backwards.chain() == clusters[0].history.chain()
    assert backwards.lost() == clusters[0].history.lost()


def test_a_column_added_on_one_cluster_reaches_old_rows_of_the_other_with_its_default() -> None:
    a, b = Cluster("A", ""), Cluster("B", "")
    create = plan_create(None, T, (Column("id", "INTEGER"),), ("id",), origin="A")
    for c in (a, b):
        c.receive(create)
    b.receive(Write((1, "B"), 1, {"id": 1}, b.history.head()))  # B writes under version 1
    add = plan_add_column(a.history.definition(), T, Column("c", "INTEGER", 0), origin="A",
                          parent=a.history.head())
    a.receive(add)
    a.receive(b.rows[1])
    b.receive(add)
    assert a.view() == b.view() == {1: {"id": 1, "c": 0}}
