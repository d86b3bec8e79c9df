"""The log model's rules for names and values (``gateway.core.logrules``, docs/log-model.md):
one test per rule and per type, each with the values it must refuse and the nearby values it
must accept."""

from __future__ import annotations

import math

import pytest

from gateway.core import logrules
from gateway.v1 import value_pb2

FT = value_pb2.FieldType


@pytest.mark.parametrize("name", ["items", "items$EX", "a" * 64, "Größe", "日本", "with space",
                                  "x-y", "_", "$", "\u00e9t\u00e9", " lead"])
def test_valid_names(name):
    assert logrules.name_problem(name) is None


@pytest.mark.parametrize(("name", "words"), [
    ("", "empty"),
    ("a" * 65, "longer than 64"),
    ("é" * 65, "longer than 64"),
    ("x" * 10_000, "longer than 64"),
    ("a\0b", "U+0000 (a control"),
    ("a\nb", "U+000A (a control"),
    ("tab\there", "U+0009"),
    ("a\x7fb", "U+007F"),
    ("abc\u202edcba", "U+202E (a format"),   # right-to-left override
    ("zero\u200bwidth", "U+200B (a format"),
    ("a\u2028b", "U+2028 (a line separator"),
    ("a\u0085b", "U+0085 (a control"),
    ("emoji\U0001F600", "Basic Multilingual Plane"),
    ("a.b", "'.'"),
    (".", "'.'"),
    ("trailing ", "whitespace"),
    ("trailing\u3000", "whitespace"),
])
def test_invalid_names(name, words):
    reason = logrules.name_problem(name)
    assert reason is not None and words in reason, reason


def test_double_rule():
    assert logrules.double_problem(math.nan, key=False) is not None
    assert logrules.double_problem(-math.nan, key=True) is not None
    assert "-0.0" in logrules.double_problem(-0.0, key=True)
    for ok in (0.0, 1.5, -1.5, math.inf, -math.inf, 5e-324):
        assert logrules.double_problem(ok, key=True) is None
    assert logrules.double_problem(-0.0, key=False) is None  # a value, not a key


@pytest.mark.parametrize("text", ["0", "-12.50", "12", "0.000", "123456789012345678901234567890",
                                  "-0.01", "7.0"])
def test_canonical_decimals_are_valid(text):
    assert logrules.decimal_problem(text) is None


@pytest.mark.parametrize("text", ["", "-", "+1", "01", "00.5", ".5", "5.", "1e5", "1E5", " 1",
                                  "1 ", "NaN", "Infinity", "1,5", "\u0661", "-0", "-0.00", "--1",
                                  "1.2.3", "0x10"])
def test_non_canonical_decimals_are_invalid(text):
    assert logrules.decimal_problem(text) is not None


@pytest.mark.parametrize("text", ["2024-01-31", "2024-02-29", "2000-02-29", "0001-01-01",
                                  "9999-12-31"])
def test_valid_dates(text):
    assert logrules.date_problem(text) is None


@pytest.mark.parametrize("text", ["2024-13-45", "2023-02-29", "1900-02-29", "2024-04-31",
                                  "2024-00-10", "2024-01-00", "0000-01-01", "2024-1-01",
                                  "24-01-01", "2024/01/01", "2024-01-01T00:00:00", "2024-01-01 ",
                                  "\uff12\uff10\uff12\uff14-01-01", "", "20240101"])
def test_invalid_dates(text):
    assert logrules.date_problem(text) is not None


@pytest.mark.parametrize("text", ["00:00:00", "23:59:59", "12:30:00.5", "12:30:00.123456789"])
def test_valid_times(text):
    assert logrules.time_problem(text) is None


@pytest.mark.parametrize("text", ["24:00:00", "12:60:00", "12:00:60", "12:00", "1:00:00",
                                  "12:00:00.", "12:00:00.1234567890", "12:00:00Z",
                                  "12:00:00+01:00", "12:00:00,5", "", "12-00-00"])
def test_invalid_times(text):
    assert logrules.time_problem(text) is not None


@pytest.mark.parametrize("text", ["2024-02-29T23:59:59", "0001-01-01T00:00:00.000000001"])
def test_valid_datetimes(text):
    assert logrules.datetime_problem(text) is None


@pytest.mark.parametrize("text", ["2024-01-01 00:00:00", "2024-01-01T24:00:00",
                                  "2023-02-29T00:00:00", "2024-01-01T00:00:00Z",
                                  "2024-01-01T00:00:00+02:00", "2024-01-01", "T00:00:00",
                                  "2024-01-01T", "2024-01-01t00:00:00"])
def test_invalid_datetimes(text):
    assert logrules.datetime_problem(text) is not None


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, null, true]}', "1", '"s"', " [] ", "null",
                                  "1" * 5000, '{"a": 1, "a": 2}'])
def test_valid_json(text):
    assert logrules.json_problem(text) is None


@pytest.mark.parametrize("text", ["", "{bad", "[1] [2]", "NaN", "[Infinity]", "-Infinity",
                                  "{'a': 1}", "[1,]", '"a\nb"', "\ufeff[]", "[" * 100_000])
def test_invalid_json(text):
    assert logrules.json_problem(text) is not None


def test_uuid_rule():
    assert logrules.uuid_problem(bytes(16)) is None
    for n in (0, 15, 17, 36):
        assert str(n) in logrules.uuid_problem(bytes(n))


def test_value_problem_applies_each_types_rule():
    V = value_pb2.Value
    assert logrules.value_problem(V(bytes_value=b"x"), FT.FIELD_TYPE_BLOB, key=True) is None
    assert logrules.value_problem(V(bytes_value=b"x"), FT.FIELD_TYPE_UUID, key=False)
    assert logrules.value_problem(V(string_value="{"), FT.FIELD_TYPE_VARCHAR, key=False) is None
    assert logrules.value_problem(V(string_value="{"), FT.FIELD_TYPE_JSON, key=False)
    assert logrules.value_problem(V(decimal_value="1e3"), FT.FIELD_TYPE_DECIMAL, key=False)
    assert logrules.value_problem(V(double_value=-0.0), FT.FIELD_TYPE_DOUBLE, key=True)
    for ftype in (FT.FIELD_TYPE_BOOLEAN, FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_UNSIGNED,
                  FT.FIELD_TYPE_TIMESTAMP):
        assert logrules.value_problem(V(), ftype, key=True) is None


@pytest.mark.parametrize("name", ["_gateway_applied", "_GATEWAY_tables", "sqlite_master",
                                  "SQLite_x"])
def test_reserved_table_name_prefixes(name):
    assert "reserved" in logrules.table_name_problem(name)
    assert logrules.name_problem(name) is None  # a column or schema may be named so


def test_table_names_follow_the_name_rules_too():
    assert logrules.table_name_problem("items$EX") is None
    assert logrules.table_name_problem("gateway_x") is None
    assert "'.'" in logrules.table_name_problem("a.b")
