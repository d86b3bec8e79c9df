"""Conflict detection and resolution between replicating clusters (pure: values in, verdicts
out): the change/row/verdict model (:mod:`.model`), the built-in functions of MySQL Cluster's
NDB$ family and last-writer-wins (:mod:`.functions`), and the per-table rules that choose them
(:mod:`.rules`). The state machine applies the verdicts (issue 15, in progress)."""

from .functions import BUILTIN, ConflictConfigError, FunctionSpec, RoleNotSetError, bind
from .model import Cause, Change, Context, OpType, Role, Stored, Verdict
from .rules import ConflictRule, RuleSet, parse_function

__all__ = [
    "BUILTIN",
    "Cause",
    "Change",
    "ConflictConfigError",
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
]
