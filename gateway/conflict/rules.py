"""Which conflict function applies to which table: MySQL's ``ndb_replication`` table as rules.

A rule names a table pattern ``schema.table`` (``*`` matches any run of characters, ``?``
one; ``shop.*``, ``*.orders``, ``*``) and a function with its arguments, written as MySQL
writes them: ``NDB$MAX(ts)``, ``NDB$EPOCH2()``, ``LWW``. A table takes the rule of the most
specific pattern that matches it: an exact name first, then the pattern with the most
literal characters, then the one that sorts first (so every replica picks the same). Pure.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.v1 import replication_pb2

from .functions import BUILTIN, ConflictConfigError, FunctionSpec, bind

__all__ = ["ConflictRule", "RuleSet", "parse_function", "rule_from_proto", "rule_to_proto"]

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_$]*)\s*(?:\(\s*(.*?)\s*\))?\s*$")
_PATTERN = re.compile(r"^[A-Za-z0-9_*?]+\.[A-Za-z0-9_*?]+$|^\*$")


def parse_function(text: str) -> tuple[str, tuple[str, ...]]:
    """``"NDB$MAX(ts)"`` -> ``("NDB$MAX", ("ts",))``; ``"LWW"`` and ``"NDB$EPOCH()"`` have no
    arguments. Raises ``ConflictConfigError`` for anything else."""
    m = _CALL.match(text)
    if m is None:
        raise ConflictConfigError(f"{text!r} is not a conflict function (write it as "
                                  f"NAME or NAME(column), e.g. NDB$MAX(ts))")
    name, inner = m.group(1).upper(), m.group(2)
    args = tuple(a.strip() for a in inner.split(",")) if inner else ()
    if any(not a for a in args):
        raise ConflictConfigError(f"{text!r}: an empty argument")
    return name, args


@dataclass(frozen=True, slots=True)
class ConflictRule:
    """``pattern`` (``schema.table`` with wildcards, or ``*``) -> ``function(args)``."""

    pattern: str
    function: str
    args: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The function as written: ``NDB$MAX(ts)``, ``LWW``."""
        return f"{self.function}({', '.join(self.args)})" if self.args else self.function

    def specificity(self) -> tuple[int, int, str]:
        """Sort key, most specific first: exact names, then more literal characters."""
        exact = not any(c in self.pattern for c in "*?")
        literal = sum(1 for c in self.pattern if c not in "*?")
        return (0 if exact else 1, -literal, self.pattern)


class RuleSet:
    """The rules of a cluster, checked on the way in; ``rule_for`` answers per table."""

    def __init__(self, rules: Iterable[ConflictRule] = (),
                 functions: Mapping[str, FunctionSpec] = BUILTIN, *,
                 checked: bool = True) -> None:
        """``checked=False`` takes the rules as they are (replicated state: every replica
        holds the same rules whatever plugins it loaded; a function it lacks is an error
        when a change meets it, not when the rule arrives)."""
        self.functions = functions
        self._rules: dict[str, ConflictRule] = {}
        self._for: dict[tuple[str, str], ConflictRule | None] = {}  # rule_for's answers
        self._sorted: list[ConflictRule] | None = None
        for r in rules:
            if checked:
                self.check(r)
            self._rules[r.pattern] = r

    def check(self, rule: ConflictRule, columns: Mapping[str, int] | None = None) -> None:
        """Raise ``ConflictConfigError`` naming the table pattern and what is wrong with
        ``rule``; ``columns``: the types of a table it matches, when known."""
        self.check_pattern(rule)
        try:
            bind(rule.function, rule.args, columns, self.functions)
        except ConflictConfigError as exc:
            raise ConflictConfigError(f"table {rule.pattern}: {exc}") from None

    @staticmethod
    def check_pattern(rule: ConflictRule) -> None:
        """Raise ``ConflictConfigError`` when ``rule``'s table pattern is malformed."""
        if not _PATTERN.match(rule.pattern):
            raise ConflictConfigError(f"table {rule.pattern!r}: not schema.table (letters, "
                                      f"digits, _ and the wildcards * and ?) or *")

    def set(self, rule: ConflictRule) -> None:
        """Add or replace the rule for ``rule.pattern`` (checked)."""
        self.check(rule)
        self._rules[rule.pattern] = rule
        self._for, self._sorted = {}, None

    def unset(self, pattern: str) -> bool:
        """Remove the rule for ``pattern``; whether there was one."""
        self._for, self._sorted = {}, None
        return self._rules.pop(pattern, None) is not None

    def rules(self) -> list[ConflictRule]:
        """Every rule, most specific first (the order ``rule_for`` tries them)."""
        if self._sorted is None:
            self._sorted = sorted(self._rules.values(), key=ConflictRule.specificity)
        return list(self._sorted)

    def rule_for(self, schema: str, table: str) -> ConflictRule | None:
        """The rule that applies to ``schema.table``, or None (no conflict detection)."""
        try:
            return self._for[(schema, table)]
        except KeyError:
            pass
        name = f"{schema}.{table}"
        found = self._rules.get(name)
        if found is None:
            found = next((r for r in self.rules() if fnmatch.fnmatchcase(name, r.pattern)),
                         None)
        if len(self._for) < 4096:
            self._for[(schema, table)] = found
        return found


def rule_from_proto(msg: replication_pb2.ConflictRule) -> ConflictRule:
    """The rule a ``gateway.v1.ConflictRule`` carries (not checked)."""
    return ConflictRule(msg.table, msg.function.upper(), tuple(msg.args))


def rule_to_proto(rule: ConflictRule) -> replication_pb2.ConflictRule:
    return replication_pb2.ConflictRule(table=rule.pattern, function=rule.function,
                                        args=list(rule.args))
