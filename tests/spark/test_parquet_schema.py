"""The Parquet target's declared definitions (``spark_applier.parquet_schema``): what each
schema event leaves for the rows after it to be fitted to, and how a unit's rows are fitted."""

from __future__ import annotations

import pytest

from gateway.schema.apply import (
    apply_event,
    plan_add_column,
    plan_create,
    plan_drop_column,
    plan_drop_table,
    plan_rename_column,
)
from gateway.schema.model import Column
from gateway.v1.value_pb2 import FieldType
from spark_applier.parquet_schema import Declared, declared_after, fit_ops

T = "s.items"


def _chain(*plans):
    """Apply each ``plan(current)`` in turn; the declared definitions after each event."""
    current = None
    declared = None
    out = []
    for plan in plans:
        event = plan(current)
        current = apply_event(current, event, getattr(event, "version", 1) - 1)
        declared = declared_after(declared, event)
        out.append(declared)
    return out


def test_renames_follow_a_column_through_every_name_it_had():
    *_, last = _chain(
        lambda c: plan_create(c, T, [Column("id", "INTEGER"), Column("a", "INTEGER")], ["id"]),
        lambda c: plan_rename_column(c, T, "a", "b"),
        lambda c: plan_rename_column(c, T, "b", "Qty"),
    )
    assert [n for n, _, _ in last.columns] == ["id", "Qty"]
    assert last.renames == {"a": "Qty", "b": "Qty"}
    assert Declared.from_json(last.to_json()) == last


def test_a_column_added_again_under_an_old_name_is_that_column_not_a_rename():
    steps = _chain(
        lambda c: plan_create(c, T, [Column("id", "INTEGER"), Column("a", "INTEGER")], ["id"]),
        lambda c: plan_rename_column(c, T, "a", "qty"),
        lambda c: plan_add_column(c, T, Column("A", "VARCHAR", "x")),
        lambda c: plan_drop_column(c, T, "qty"),
    )
    assert steps[1].renames == {"a": "qty"}
    assert steps[2].renames == {}
    assert [(n, t, d) for n, t, d in steps[2].columns] == [
        ("id", "INTEGER", None), ("qty", "INTEGER", None), ("A", "VARCHAR", "x")]
    assert [n for n, _, _ in steps[3].columns] == ["id", "A"]


def test_every_default_survives_the_declaration_file():
    """Each type's default as the model holds it (a BLOB's bytes, a DECIMAL's text, a
    TIMESTAMP's nanoseconds...) comes back from the JSON it is kept in."""
    import json

    cols = [Column("id", "INTEGER"), Column("b", "BLOB", b"\x00\xff"), Column("u", "UUID",
            bytes(range(16))), Column("d", "DECIMAL", "1.50"), Column("t", "TIMESTAMP", 7),
            Column("f", "DOUBLE", 0.5), Column("k", "BOOLEAN", True), Column("s", "VARCHAR", "x")]
    (declared,) = _chain(lambda c: plan_create(c, T, cols, ["id"]))
    again = Declared.from_json(json.loads(json.dumps(declared.to_json())))
    assert again == declared
    assert [d for _, _, d in again.columns] == [None, b"\x00\xff", bytes(range(16)), "1.50",
                                                 7, 0.5, True, "x"]


def test_a_dropped_table_is_no_longer_declared():
    steps = _chain(
        lambda c: plan_create(c, T, [Column("id", "INTEGER")], ["id"]),
        lambda c: plan_drop_table(c, T),
    )
    assert steps[-1] is None


def test_a_damaged_declaration_is_refused_by_name():
    with pytest.raises(ValueError, match="not a declared table definition"):
        Declared.from_json({"version": 1, "columns": [["id"]]})


def test_a_unit_is_fitted_to_the_current_names_and_defaults(spark):
    """A row under the current name, one under the old name, one naming both (the current
    name's value kept), one naming a dropped column, an insert and an update naming none."""
    declared = Declared(4, (("id", "INTEGER", None), ("qty", "INTEGER", None),
                            ("c", "INTEGER", 0)), ("id",), {"a": "qty"})
    integer = FieldType.FIELD_TYPE_INTEGER
    rows = [  # op, id, qty, has, a, has, b, has, meta
        ("INSERT", 1, 10, True, None, False, None, False, 7),
        ("INSERT", 2, None, False, 20, True, None, False, 7),
        ("INSERT", 3, 30, True, 99, True, None, False, 7),
        ("INSERT", 4, None, False, None, False, "gone", True, 7),
        ("UPDATE", 5, None, False, None, False, None, False, 7),
    ]
    ops = spark.createDataFrame(rows, "op string, id long, qty long, __has_qty boolean, "
                                      "a long, __has_a boolean, b string, __has_b boolean, "
                                      "_log_index long")
    fitted, values = fit_ops(ops, [("id", integer)], [("qty", integer), ("a", integer),
                                                      ("b", FieldType.FIELD_TYPE_VARCHAR)],
                             ["_log_index"], declared)
    assert values == [("qty", integer), ("c", integer)]
    assert fitted.columns == ["op", "id", "qty", "__has_qty", "c", "__has_c", "_log_index"]
    got = {r["id"]: (r["qty"], r["__has_qty"], r["c"], r["__has_c"])
           for r in fitted.collect()}
    assert got == {
        1: (10, True, 0, True),
        2: (20, True, 0, True),
        3: (30, True, 0, True),
        4: (None, False, 0, True),
        5: (None, False, 0, False),  # an UPDATE not naming c leaves it as it was
    }
