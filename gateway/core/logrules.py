"""The log model's rules for names and typed values (docs/log-model.md, "Names" and "Values"):
the one definition the leader's validation (``gateway.node.base.validation``), the read API and
the C fast path (``gateway.node._wire.check_records``, whose specification is
``validation._check_records_py``) follow.

Every function here is pure and returns the reason a name or value breaks a rule (one phrase,
without the field path, which the caller knows) or None when it is valid.

Names (schema, table, column, session variable), after MySQL's identifier rules:

- 1 to 64 characters, all in the Basic Multilingual Plane (MySQL identifiers cannot hold
  supplementary characters);
- no control, format, surrogate, line or paragraph separator character (NUL, newlines, tabs,
  zero-width and bidirectional controls such as U+202E): they are invisible or reorder the
  text around them, so a name could not be told from another;
- no trailing whitespace (MySQL strips it);
- no ``.``: ``schema.table`` splits at its only dot, and a column reads as ``table.column``.
  ``$`` is allowed (exception tables are named ``table$EX``);
- a table name does not start with ``_gateway_`` or ``sqlite_`` (any case): reserved by the
  stores (:func:`table_name_problem`).

Values, per ``FieldType`` (the case is checked by the caller): DOUBLE is never NaN and a key
is never ``-0.0`` (NaN is not equal to itself and ``-0.0`` equals ``0.0``: either breaks key
equality; SQL stores cannot hold a NaN); DECIMAL is canonical plain text
``-?(0|[1-9][0-9]*)(.[0-9]+)?`` and not a negative zero; DATE is ``YYYY-MM-DD``, TIME
``hh:mm:ss[.f]``, DATETIME ``YYYY-MM-DDThh:mm:ss[.f]`` (ISO 8601, a real calendar date, hours
00-23, 1 to 9 fraction digits, no zone); JSON is one RFC 8259 document (no ``NaN``); UUID is
exactly 16 bytes. BOOLEAN, INTEGER, UNSIGNED, TIMESTAMP, VARCHAR (UTF-8, which protobuf
guarantees) and BLOB take any value of their case.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable

from gateway.v1 import value_pb2

__all__ = [
    "MAX_NAME_CHARS",
    "RESERVED_TABLE_PREFIXES",
    "TEXT_RULES",
    "date_problem",
    "datetime_problem",
    "decimal_problem",
    "double_problem",
    "json_problem",
    "name_problem",
    "table_name_problem",
    "time_problem",
    "uuid_problem",
    "value_problem",
]

FT = value_pb2.FieldType

#: The longest name, in characters (MySQL's limit for schema, table and column names).
MAX_NAME_CHARS = 64
_BAD_CATEGORIES = {"Cc": "a control character", "Cf": "a format character",
                   "Cs": "a surrogate", "Zl": "a line separator", "Zp": "a paragraph separator"}


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid schema, table, column or variable name, or None."""
    if not name:
        return "empty name"
    n = len(name)
    if n > MAX_NAME_CHARS:
        return f"name longer than {MAX_NAME_CHARS} characters ({n})"
    # The common case (printable ASCII) costs three C-level scans.
    if not (name.isascii() and name.isprintable()):
        for ch in name:
            code = ord(ch)
            if code > 0xFFFF:
                return (f"name contains U+{code:X}, beyond the Basic Multilingual Plane (MySQL "
                        f"identifiers cannot hold it)")
            what = _BAD_CATEGORIES.get(unicodedata.category(ch))
            if what is not None:
                return f"name contains U+{code:04X} ({what})"
    if "." in name:
        return "name contains '.' (names are joined as schema.table and table.column)"
    if name[-1].isspace():
        return "name ends with whitespace"
    return None


#: Table-name prefixes reserved by stores (compared without case): the embedded SQLite
#: applier keeps its bookkeeping in ``_gateway_*`` tables (a user table there would pass for
#: its applied-GTID record), and SQLite refuses ``sqlite_*`` names.
RESERVED_TABLE_PREFIXES = ("_gateway_", "sqlite_")


def table_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid table name: :func:`name_problem`, or a reserved prefix."""
    reason = name_problem(name)
    if reason is None and name.casefold().startswith(RESERVED_TABLE_PREFIXES):
        prefix = next(p for p in RESERVED_TABLE_PREFIXES if name.casefold().startswith(p))
        return f"table names starting with {prefix!r} are reserved"
    return reason


# -- values -------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]{1,9})?")
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def double_problem(v: float, key: bool) -> str | None:
    """DOUBLE: never NaN; a key is never negative zero."""
    if v != v:
        return "NaN is not a valid DOUBLE (it is not equal to itself)"
    if key and v == 0.0 and math.copysign(1.0, v) < 0:
        return "-0.0 is not a valid key (it equals 0.0; send 0.0)"
    return None


def decimal_problem(text: str) -> str | None:
    """DECIMAL: canonical plain text (``-12.50``), no exponent, sign only when negative."""
    if _DECIMAL.fullmatch(text) is None:
        return (f"{_show(text)} is not a canonical DECIMAL (digits with an optional '-' and "
                f"'.fraction', e.g. -12.50)")
    if text[0] == "-" and not text.strip("-0."):
        return f"{_show(text)} is a negative zero, not a canonical DECIMAL (send it without '-')"
    return None


def _date_fields(y: str, m: str, d: str) -> bool:
    year, month, day = int(y), int(m), int(d)
    if year < 1 or not 1 <= month <= 12 or day < 1:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return day <= (29 if month == 2 and leap else _DAYS[month - 1])


def _time_fields(h: str, m: str, s: str) -> bool:
    return int(h) <= 23 and int(m) <= 59 and int(s) <= 59


def date_problem(text: str) -> str | None:
    """DATE: ``YYYY-MM-DD``, a real date from 0001-01-01 to 9999-12-31."""
    got = _DATE.fullmatch(text)
    if got is None or not _date_fields(*got.groups()):
        return f"{_show(text)} is not a valid DATE (YYYY-MM-DD)"
    return None


def time_problem(text: str) -> str | None:
    """TIME: ``hh:mm:ss`` with 1 to 9 optional fraction digits, hours 00 to 23."""
    got = _TIME.fullmatch(text)
    if got is None or not _time_fields(*got.groups()):
        return f"{_show(text)} is not a valid TIME (hh:mm:ss[.fffffffff])"
    return None


def datetime_problem(text: str) -> str | None:
    """DATETIME: ``YYYY-MM-DDThh:mm:ss[.fffffffff]`` (no zone or offset)."""
    date, sep, time = text.partition("T")
    got_d, got_t = _DATE.fullmatch(date), _TIME.fullmatch(time)
    if not sep or got_d is None or got_t is None or not _date_fields(*got_d.groups()) \
            or not _time_fields(*got_t.groups()):
        return f"{_show(text)} is not a valid DATETIME (YYYY-MM-DDThh:mm:ss[.fffffffff])"
    return None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def json_problem(text: str) -> str | None:
    """JSON: exactly one RFC 8259 document (surrounding whitespace allowed)."""
    try:
        # Numbers are not converted (a valid 5000-digit integer must not fail int()).
        doc = json.loads(text, parse_constant=_no_constant, parse_int=len, parse_float=len)
    except RecursionError:
        return "JSON text nested too deeply"
    except ValueError as exc:
        return f"invalid JSON text: {exc}"
    if "\\u" in text:  # a surrogate can only come from a \u escape
        code = _lone_surrogate(doc)
        if code is not None:
            return (f"invalid JSON text: a \\u escape makes a lone surrogate U+{code:04X}, "
                    f"which is not a Unicode character (stores refuse it)")
    return None


def _lone_surrogate(doc: object) -> int | None:
    """The first lone surrogate in a string (or key) of decoded JSON ``doc``, or None."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            texts: list[str] = [item]
        elif isinstance(item, dict):
            texts = list(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for t in texts:
            if not t.isascii():
                for ch in t:
                    if 0xD800 <= ord(ch) <= 0xDFFF:
                        return ord(ch)
    return None


def uuid_problem(data: bytes) -> str | None:
    """UUID: exactly 16 bytes."""
    if len(data) != 16:
        return f"a UUID is exactly 16 bytes, not {len(data)}"
    return None


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


#: The rule of each text-carried type whose text has a syntax (the value's text -> reason).
TEXT_RULES: dict[int, Callable[[str], str | None]] = {
    FT.FIELD_TYPE_DECIMAL: decimal_problem,
    FT.FIELD_TYPE_DATE: date_problem,
    FT.FIELD_TYPE_TIME: time_problem,
    FT.FIELD_TYPE_DATETIME: datetime_problem,
    FT.FIELD_TYPE_JSON: json_problem,
}


def value_problem(value: value_pb2.Value, field_type: int, *, key: bool) -> str | None:
    """Why the non-null ``value``, already in the case ``field_type`` uses, breaks its type's
    rule, or None. ``key``: the value is part of a primary key."""
    if field_type == FT.FIELD_TYPE_DOUBLE:
        return double_problem(value.double_value, key)
    if field_type == FT.FIELD_TYPE_UUID:
        return uuid_problem(value.bytes_value)
    rule = TEXT_RULES.get(field_type)
    if rule is None:
        return None
    return rule(value.decimal_value if field_type == FT.FIELD_TYPE_DECIMAL
                else value.string_value)
