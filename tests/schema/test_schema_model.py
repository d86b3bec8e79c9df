"""The schema model: changes planned and refused, events encoded, rows upcast."""

from __future__ import annotations

import pytest

from gateway.core.messages import TypeTag
from gateway.schema.apply import (
    apply_event,
    plan_add_column,
    plan_create,
    plan_drop_column,
    plan_drop_table,
    plan_rename_column,
)
from gateway.schema.codec import decode_event, encode_event, event_id
from gateway.schema.history import TableHistory, winner
from gateway.schema.model import Column, InvalidChange, RefusedChange, SchemaError
from gateway.schema.upcast import project, upcast

T = "app.items"
ID = Column("id", "INTEGER", nullable=False)


def _created(*cols: Column):  # type: ignore[no-untyped-def]
    e = plan_create(None, T, (ID, *cols), ("id",), origin="A")
    return e, apply_event(None, e)


def test_create_puts_the_key_first_and_starts_at_version_1() -> None:
    e = plan_create(None, T, (Column("name", "varchar"), Column("id", "INTEGER")), ("id",))
    assert e.version == 1 and e.definition is not None
    assert e.definition.names == ("id", "name")
    assert e.definition.columns[0].nullable is False
    assert e.definition.columns[1].type == "VARCHAR"


@pytest.mark.parametrize(("cols", "key", "needle"), [
    ((ID,), (), "needs a primary key"),
    ((ID,), ("nope",), "'nope' is not a column"),
    ((ID, Column("ID", "INTEGER")), ("id",), "duplicate column"),
    ((ID, Column("c", "NUMBERISH")), ("id",), "unknown column type 'NUMBERISH'"),
    ((ID, Column("c", "INTEGER", "zero")), ("id",), "default 'zero' does not fit INTEGER"),
])
def test_a_malformed_create_is_invalid_naming_the_column(cols, key, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidChange, match=needle):
        plan_create(None, T, cols, key)


def test_changes_that_cannot_apply_everywhere_are_refused_with_the_reason() -> None:
    _, d = _created(Column("c", "INTEGER"))
    with pytest.raises(RefusedChange, match=r"app.items.id: cannot drop a primary-key column"):
        plan_drop_column(d, T, "id")
    with pytest.raises(RefusedChange, match=r"app.items.c: column already exists"):
        plan_add_column(d, T, Column("c", "VARCHAR"))
    with pytest.raises(RefusedChange, match="NOT NULL column needs a default"):
        plan_add_column(d, T, Column("n", "INTEGER", nullable=False))
    with pytest.raises(RefusedChange, match="already exists"):
        plan_create(d, T, (ID,), ("id",))
    with pytest.raises(RefusedChange, match="no such column"):
        plan_rename_column(d, T, "x", "y")


def test_each_change_bumps_the_version_and_the_replica_recomputes_it() -> None:
    _, d1 = _created()
    e2 = plan_add_column(d1, T, Column("c", "INTEGER", 0))
    d2 = apply_event(d1, e2)
    e3 = plan_rename_column(d2, T, "c", "k")
    d3 = apply_event(d2, e3)
    e4 = plan_drop_column(d3, T, "k")
    d4 = apply_event(d3, e4)
    assert [d.version for d in (d1, d2, d3, d4) if d] == [1, 2, 3, 4]
    assert d3 is not None and d3.names == ("id", "k")
    assert d4 is not None and d4.names == ("id",)
    e5 = plan_drop_table(d4, T)
    assert apply_event(d4, e5) is None
    again = plan_create(None, T, (ID,), ("id",), last_version=5)
    assert apply_event(None, again, last_version=5) is not None and again.version == 6


def test_an_event_that_does_not_follow_the_version_is_an_error() -> None:
    _, d1 = _created()
    e2 = plan_add_column(d1, T, Column("c", "INTEGER", 0))
    d2 = apply_event(d1, e2)
    with pytest.raises(SchemaError, match="event version 2 does not follow version 2"):
        apply_event(d2, e2)


def test_events_round_trip_through_the_log_tag() -> None:
    e1, d1 = _created(Column("d", "DECIMAL", "1.50"), Column("b", "BLOB", b"\x00"))
    e2 = plan_add_column(d1, T, Column("t", "TIMESTAMP", 12, nullable=False), origin="B",
                         parent=event_id(e1))
    for e in (e1, e2):
        data = encode_event(e)
        assert data[0] == TypeTag.SCHEMA_EVENT
        assert decode_event(data) == e
    assert event_id(e1) != event_id(e2)


def test_a_damaged_event_is_a_value_error_not_a_traceback() -> None:
    with pytest.raises(ValueError, match=r"does not parse as gateway.v1.SchemaEvent"):
        decode_event(bytes([TypeTag.SCHEMA_EVENT]) + b"\x0a\x05ab")
    with pytest.raises(ValueError, match=r"SchemaEvent.kind: invalid kind 9"):
        decode_event(bytes([TypeTag.SCHEMA_EVENT]) + b"\x18\x09")


def test_rows_upcast_get_the_default_lose_the_dropped_and_follow_the_rename() -> None:
    _, d1 = _created(Column("a", "VARCHAR"), Column("gone", "INTEGER"))
    e2 = plan_add_column(d1, T, Column("c", "INTEGER", 0))
    d2 = apply_event(d1, e2)
    e3 = plan_rename_column(d2, T, "a", "name")
    d3 = apply_event(d2, e3)
    e4 = plan_drop_column(d3, T, "gone")
    d4 = apply_event(d3, e4)
    assert d4 is not None
    old = {"id": 1, "a": "x", "gone": 7}
    assert project(upcast(old, (e2, e3, e4)), d4) == {"id": 1, "name": "x", "c": 0}


def test_the_winner_of_concurrent_changes_is_the_primarys_else_the_smaller_origin() -> None:
    e1, d1 = _created()
    p = event_id(e1)
    a = plan_add_column(d1, T, Column("c", "INTEGER", 0), origin="A", parent=p)
    b = plan_add_column(d1, T, Column("c", "VARCHAR", ""), origin="B", parent=p)
    assert winner(a, b) == winner(b, a) == a
    assert winner(a, b, primary="B") == winner(b, a, primary="B") == b


def test_the_loser_is_recorded_with_its_cause_and_its_rows_read_under_the_winner() -> None:
    e1, d1 = _created()
    p = event_id(e1)
    a = plan_add_column(d1, T, Column("c", "INTEGER", 0), origin="A", parent=p)
    b = plan_add_column(d1, T, Column("c", "VARCHAR", "none"), origin="B", parent=p)
    b2 = plan_rename_column(b.definition, T, "c", "k", origin="B", parent=event_id(b))
    for order in ((e1, a, b, b2), (b2, b, e1, a)):
        h = TableHistory(T)
        for e in order:
            h.add(e)
        assert [e.origin for e in h.chain()] == ["A", "A"]
        assert h.definition() == a.definition
        lost = {x.event.kind: x.cause for x in h.lost()}
        assert lost == {"add_column": "concurrent change of app.items version 2: lost to "
                        "add_column from A", "rename_column": "made on a change that lost"}
        # a row B wrote under its own (losing) version: its k (a text) is read as c's default
        assert h.read({"id": 3, "k": "text"}, event_id(b2)) == {"id": 3, "c": 0}


def test_an_explicit_create_wins_over_a_first_writes_shape() -> None:
    implicit = plan_create(None, T, (ID, Column("v", "VARCHAR")), ("id",), origin="A",
                           implicit=True)
    explicit = plan_create(None, T, (ID, Column("v", "INTEGER")), ("id",), origin="B")
    assert winner(implicit, explicit) == explicit


def test_log_dump_renders_a_schema_event_as_one_line() -> None:
    from gateway.cli.logtool import LogEntry, render_text
    from gateway.schema.codec import event_to_proto

    _, d1 = _created()
    e = plan_add_column(d1, T, Column("c", "INTEGER", 0), origin="1")
    got = render_text(LogEntry(offset=9, tag=TypeTag.SCHEMA_EVENT, message=event_to_proto(e)))
    assert got == ["# Schema: app.items version 2\tadd column c INTEGER DEFAULT 0\tfrom "
                   "cluster 1"]
