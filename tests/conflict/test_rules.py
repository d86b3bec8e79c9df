"""Conflict rules per table: parsing MySQL's function syntax, checking, and picking the most
specific matching pattern the same way on every replica."""

from __future__ import annotations

import pytest

from gateway.conflict.functions import ConflictConfigError
from gateway.conflict.rules import ConflictRule, RuleSet, parse_function
from gateway.v1 import value_pb2

FT = value_pb2.FieldType


@pytest.mark.parametrize("text, want", [
    ("NDB$MAX(ts)", ("NDB$MAX", ("ts",))),
    ("ndb$max( ts )", ("NDB$MAX", ("ts",))),
    ("NDB$EPOCH2()", ("NDB$EPOCH2", ())),
    ("NDB$EPOCH_TRANS", ("NDB$EPOCH_TRANS", ())),
    ("LWW", ("LWW", ())),
    ("NDB$OLD(a, b)", ("NDB$OLD", ("a", "b"))),
])
def test_function_syntax(text, want):
    assert parse_function(text) == want


@pytest.mark.parametrize("text", ["", "NDB$MAX(", "max ts", "NDB$MAX(ts,)", "(ts)"])
def test_bad_function_syntax_is_refused(text):
    with pytest.raises(ConflictConfigError):
        parse_function(text)


def test_the_most_specific_pattern_wins_whatever_the_order_rules_were_set_in():
    rules = [ConflictRule("*", "LWW"), ConflictRule("shop.*", "NDB$EPOCH2"),
             ConflictRule("shop.orders", "NDB$MAX", ("ts",)), ConflictRule("*.orders", "NDB$OLD",
                                                                            ("v",)),
             ConflictRule("shop.item?", "NDB$EPOCH")]
    for order in (rules, rules[::-1]):
        rs = RuleSet(order)
        assert rs.rule_for("shop", "orders").function == "NDB$MAX"  # exact
        assert rs.rule_for("shop", "items").function == "NDB$EPOCH"  # 9 literal characters
        assert rs.rule_for("shop", "carts").function == "NDB$EPOCH2"
        assert rs.rule_for("crm", "orders").function == "NDB$OLD"
        assert rs.rule_for("crm", "people").function == "LWW"
        assert [r.pattern for r in rs.rules()] == ["shop.orders", "shop.item?", "*.orders",
                                                   "shop.*", "*"]
    rs = RuleSet(rules[1:2])
    assert rs.rule_for("crm", "people") is None
    assert rs.unset("shop.*") and not rs.unset("shop.*")
    assert rs.rule_for("shop", "carts") is None


@pytest.mark.parametrize("rule, columns, message", [
    (ConflictRule("shop", "LWW"), None, "table 'shop': not schema.table"),
    (ConflictRule("shop.it-ems", "LWW"), None, "not schema.table"),
    (ConflictRule("shop.items", "NDB$NOPE"), None,
     "table shop.items: unknown conflict function 'NDB$NOPE'"),
    (ConflictRule("shop.items", "NDB$MAX"), None,
     "table shop.items: NDB$MAX takes one argument, the resolution column"),
    (ConflictRule("shop.items", "NDB$MAX", ("ts",)), {"v": FT.FIELD_TYPE_VARCHAR},
     "table shop.items: NDB$MAX(ts): the table has no column 'ts'"),
    (ConflictRule("shop.items", "NDB$MAX", ("v",)), {"v": FT.FIELD_TYPE_DOUBLE},
     "table shop.items: NDB$MAX(v): column 'v' is FIELD_TYPE_DOUBLE"),
])
def test_rules_are_checked_naming_table_and_argument(rule, columns, message):
    with pytest.raises(ConflictConfigError) as ei:
        RuleSet().check(rule, columns)
    assert message in str(ei.value)


def test_rule_text_is_written_back_as_mysql_writes_it():
    assert ConflictRule("s.t", "NDB$MAX", ("ts",)).text == "NDB$MAX(ts)"
    assert ConflictRule("s.t", "LWW").text == "LWW"
