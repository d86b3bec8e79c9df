"""The shared Cassandra mapping (``gateway.cassandra_mapping``): names, types by tag
name, and the write-timestamp clock with its bit budget. Pure: no driver, no server."""

from __future__ import annotations

import itertools

import pytest

import gateway.cassandra_mapping as cm
from gateway import FieldType, UnsupportedOperationError
from gateway.core.rowops import Column, OpKind, RowOp, TableRef


def test_schema_is_the_keyspace_and_table_the_table_in_every_path():
    assert cm.TableMapping.of(TableRef("shop", "orders"), "dflt").qualified == '"shop"."orders"'
    assert cm.TableMapping.of(TableRef("", "orders"), "dflt").keyspace == "dflt"
    assert cm.TableMapping.of(TableRef("s", "t$EX"), "d").table == "t__ex"
    assert cm.TableMapping.of(TableRef("s", "t"), "d", {"s.t": ["seq"]}).clustering == ("seq",)
    assert cm.legacy_spark_table("gw", TableRef("shop", "orders")) == ("gw", "shop_orders")
    assert cm.legacy_spark_table("gw", TableRef("", "orders")) is None


@pytest.mark.parametrize("ref", [TableRef("bad-schema", "t"), TableRef("s", "x" * 49),
                                 TableRef("s", "na me")])
def test_names_cassandra_cannot_hold_are_refused_in_one_line_not_renamed(ref):
    with pytest.raises(UnsupportedOperationError) as err:
        cm.TableMapping.of(ref, "d")
    assert "\n" not in str(err.value) and "is not a Cassandra name" in str(err.value)


def test_types_are_looked_up_by_the_tag_name_and_cover_every_tag():
    names = [n for n in FieldType.DESCRIPTOR.values_by_name if n != "FIELD_TYPE_UNSPECIFIED"]
    assert sorted(cm.CQL_TYPE_BY_NAME) == sorted(names)
    for name in names:
        assert cm.cql_type(FieldType.Value(name)) == cm.CQL_TYPE_BY_NAME[name]
    assert cm.cql_type(FieldType.FIELD_TYPE_UNSIGNED) == "varint"
    assert cm.cql_type(FieldType.FIELD_TYPE_TIMESTAMP) == "bigint"
    assert cm.cql_type(FieldType.FIELD_TYPE_UUID) == "uuid"
    assert cm.cql_type(FieldType.FIELD_TYPE_JSON) == "text"


@pytest.mark.parametrize(("tag", "shown"), [(0, "FIELD_TYPE_UNSPECIFIED"), (99, "unknown tag 99")])
def test_a_tag_without_a_cql_type_is_an_error_naming_the_column_never_text(tag, shown):
    col = Column("c", tag)
    with pytest.raises(UnsupportedOperationError) as err:
        cm.column_type(col, TableRef("s", "t"))
    assert str(err.value) == f"table s.t: column 'c': field type {shown} has no Cassandra type"


def test_timestamps_order_entries_then_statements_then_row_writes_then_phases():
    order = [(i, s, sub, ph) for i, s, sub, ph in itertools.product(
        (0, 1, 2, 2**20, cm.MAX_LOG_INDEX), (0, 1, 2, 2**16 - 1), (0, 1, 2**8 - 1), (0, 1))]
    stamps = [cm.write_timestamp(*o) for o in order]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    # the last write of an entry's last statement still loses to the next entry's first
    assert (cm.write_timestamp(7, 2**16 - 1, 2**8 - 1, 1) < cm.write_timestamp(8, 0, 0, 0))
    # an UPSERT's clearing tombstone sits between the write before it and its own write
    assert (cm.write_timestamp(7, 3, 0, 1) < cm.write_timestamp(7, 3, 1, 0)
            < cm.write_timestamp(7, 3, 1, 1))


def test_the_bit_budget_fits_a_signed_64_bit_timestamp_and_refuses_beyond():
    bits = cm.STATEMENT_BITS + cm.SUB_BITS + cm.PHASE_BITS
    assert cm.MAX_LOG_INDEX == 2**(63 - bits) - 1 == 2**38 - 1
    assert cm.write_timestamp(cm.MAX_LOG_INDEX, 2**16 - 1, 2**8 - 1, 1) == 2**63 - 1
    with pytest.raises(ValueError, match="outside"):
        cm.write_timestamp(cm.MAX_LOG_INDEX + 1, 1)
    with pytest.raises(ValueError, match="phase"):
        cm.write_timestamp(1, 1, 0, 2)
    # beyond their fields, statements and row writes share the last value, never overflow
    assert cm.write_timestamp(5, 2**16 + 9) == cm.write_timestamp(5, 2**16 - 1)
    assert cm.write_timestamp(5, 1, 300) == cm.write_timestamp(5, 1, 255)


def test_the_row_clock_orders_a_key_shifting_statements_writes_of_one_row():
    t, key = TableRef("s", "t"), (Column("id", FieldType.FIELD_TYPE_INTEGER),)
    m34 = RowOp(OpKind.MOVE, t, key, (3,), new_key=(4,), log_index=9, statement=1)
    m23 = RowOp(OpKind.MOVE, t, key, (2,), new_key=(3,), log_index=9, statement=1)
    clock = cm.RowClock()
    assert clock.sub((t, (3,)), m34) == 0  # row 3 deleted by the first move
    assert clock.sub((t, (3,)), m23) == 1  # then written by the second: after it
    assert clock.sub((t, (3,)), m23) == 1  # a retry keeps its place
    assert cm.write_timestamp(9, 1, 0) < cm.write_timestamp(9, 1, 1, 0)


# --- schema events (issue 57) ----------------------------------------------------------------


def test_schema_events_become_cql_through_the_shared_mapping_idempotently():
    import pytest as _pytest

    from gateway.appliers.contract import UnsupportedOperationError
    from gateway.cassandra_mapping import TableMapping, schema_change_cql
    from tests.appliers.schema_log import events

    m = TableMapping("s", "items")
    create, add_c, rename, drop_b = events()
    got = schema_change_cql(m, create, None)
    assert got.statements == ('CREATE TABLE IF NOT EXISTS "s"."items" ("id" bigint, '
                              '"a" bigint, "b" text, PRIMARY KEY (("id")))',)
    assert schema_change_cql(m, create, frozenset({"id", "a", "b"}), ("id",)).statements == ()
    got = schema_change_cql(m, add_c, frozenset({"id", "a", "b"}), ("id",))
    assert got.statements == ('ALTER TABLE "s"."items" ADD "c" bigint',)
    assert got.notes == ("table s.items: column 'c' has default 0 but CQL has no column "
                         "defaults: rows written before it read null",)
    assert schema_change_cql(m, add_c, frozenset({"id", "a", "b", "c"}), ("id",)) == \
        type(got)()  # replayed: nothing to do
    with _pytest.raises(UnsupportedOperationError, match="CQL renames only primary-key "
                                                         "columns: column 'a' keeps its name"):
        schema_change_cql(m, rename, frozenset({"id", "a", "b", "c"}), ("id",))
    assert schema_change_cql(m, drop_b, frozenset({"id", "a", "b", "c"}), ("id",)
                             ).statements == ('ALTER TABLE "s"."items" DROP "b"',)
    assert schema_change_cql(m, drop_b, frozenset({"id", "a", "c"}), ("id",)).statements == ()


def test_a_column_that_exists_with_another_type_is_named_in_a_note_not_passed_over():
    """The losing side of two concurrent definitions made the column first: CQL cannot
    change its type, so the change says so (the applier logs it) rather than do nothing."""
    from gateway.cassandra_mapping import TableMapping, schema_change_cql
    from tests.appliers.schema_log import events

    m = TableMapping("s", "items")
    create, add_c, _, _ = events()
    cols = frozenset({"id", "a", "b", "c"})
    same = {"id": "bigint", "a": "bigint", "b": "text", "c": "bigint"}
    assert schema_change_cql(m, add_c, cols, ("id",), same) == type(
        schema_change_cql(m, add_c, cols, ("id",)))()  # the same type: nothing to say
    got = schema_change_cql(m, add_c, cols, ("id",), {**same, "c": "text"})
    assert got.statements == ()
    assert len(got.notes) == 1
    assert got.notes[0].startswith("table s.items: column 'c' is text in s.items but bigint "
                                   "in this definition")
    assert "stays text" in got.notes[0] and "dead letters" in got.notes[0]
    # a whole definition (an implicit create that won) over a table the loser created
    got = schema_change_cql(m, create, frozenset({"id", "a"}), ("id",),
                            {"id": "bigint", "a": "text"})
    assert got.statements == ('ALTER TABLE "s"."items" ADD "b" text',)
    assert [n.split(":")[1].strip() for n in got.notes] == ["column 'a' is text in s.items "
                                                            "but bigint in this definition (a "
                                                            "concurrent change on another "
                                                            "cluster made it first and lost)"]


def test_a_key_column_rename_is_cql_and_clustering_is_kept_from_a_definition():
    from gateway.cassandra_mapping import TableMapping, schema_change_cql
    from gateway.schema.apply import plan_create, plan_rename_column
    from gateway.schema.model import Column as SchemaColumn

    create = plan_create(None, "s.ev", [SchemaColumn("region", "VARCHAR"),
                                        SchemaColumn("seq", "INTEGER"),
                                        SchemaColumn("v", "DOUBLE")], ["region", "seq"])
    m = TableMapping("s", "ev", ("seq",))
    assert schema_change_cql(m, create, None).statements == (
        'CREATE TABLE IF NOT EXISTS "s"."ev" ("region" text, "seq" bigint, "v" double, '
        'PRIMARY KEY (("region"), "seq"))',)
    rename = plan_rename_column(create.definition, "s.ev", "seq", "n")
    assert schema_change_cql(m, rename, frozenset({"region", "seq", "v"}), ("region", "seq")
                             ).statements == ('ALTER TABLE "s"."ev" RENAME "seq" TO "n"',)
