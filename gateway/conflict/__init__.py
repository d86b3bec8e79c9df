"""Conflict detection and resolution between replicating clusters (pure: values in, verdicts
out): the change/row/verdict model (:mod:`.model`), the built-in functions of MySQL Cluster's
NDB$ family and last-writer-wins (:mod:`.functions`), and the per-table rules that choose them
(:mod:`.rules`), and judging a whole replicated epoch (:mod:`.resolve`); the node's state
machine applies the verdicts (docs/conflicts.md)."""

from .functions import (
    BUILTIN,
    ConflictConfigError,
    ConflictFunctionsError,
    FunctionSpec,
    RoleNotSetError,
    bind,
    with_plugins,
)
from .model import APPLY, Cause, Change, Context, OpType, Role, Stored, Verdict
from .rules import ConflictRule, RuleSet, parse_function

__all__ = [
    "APPLY",
    "BUILTIN",
    "Cause",
    "Change",
    "ConflictConfigError",
    "ConflictFunctionsError",
    "ConflictRule",
    "Context",
    "FunctionSpec",
    "OpType",
    "Role",
    "RoleNotSetError",
    "RuleSet",
    "Stored",
    "Verdict",
    "bind",
    "parse_function",
    "with_plugins",
]
