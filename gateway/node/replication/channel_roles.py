"""The conflict roles of a channel's two ends, as its runner sees them (docs/conflicts.md,
"Guards").

The source's role and rules travel in its ``Status`` answer (``conflict_role``,
``conflict_rules``), which the runner asks at the start of every session and again every
``CHECK_S`` seconds while it runs; this cluster's are its replicated state. Under an epoch
function exactly one cluster of a relation must be PRIMARY:

- this cluster and its source both PRIMARY for epoch-function tables: each takes the
  other's refresh as a conflicting change and refreshes back, for ever. The channel refuses
  to run (its session ends with the reason, naming the source's cluster as the one that
  also claims the role) until one of them is set to SECONDARY;
- neither PRIMARY while the source also replicates from this cluster (a pair): concurrent
  changes are not detected and each cluster applies the other's value, so the two swap
  them. The channel runs, with a warning in its status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.conflict import FunctionSpec, Role
from gateway.v1 import gateway_pb2

__all__ = ["CHECK_S", "RoleCheck", "check_roles"]

#: How often a running channel asks its source for its role again.
CHECK_S = 2.0


def _epoch_tables(rules: Iterable[tuple[str, str]], functions: Mapping[str, FunctionSpec]
                  ) -> list[str]:
    """The table patterns of ``rules`` ((pattern, function)) under an epoch function (a
    function this node does not know counts as one when MySQL names it so)."""
    out = []
    for pattern, fn in rules:
        spec = functions.get(fn.upper())
        if (spec.epoch if spec is not None else fn.upper().startswith("NDB$EPOCH")):
            out.append(pattern)
    return sorted(out)


class RoleCheck:
    """The verdict on one source ``Status``: ``problem`` stops the channel, ``warning`` is
    shown in its status; both None when the roles fit."""

    __slots__ = ("problem", "warning")

    def __init__(self, problem: str | None = None, warning: str | None = None) -> None:
        self.problem = problem
        self.warning = warning


def check_roles(me: int, my_role: Role, my_rules: Iterable[tuple[str, str]],
                functions: Mapping[str, FunctionSpec], target: str,
                st: gateway_pb2.StatusResponse) -> RoleCheck:
    """Check this cluster's role and rules against the source's ``Status`` ``st``."""
    mine = _epoch_tables(my_rules, functions)
    theirs = _epoch_tables(((r.table, r.function) for r in st.conflict_rules), functions)
    their_role = (st.conflict_role or "NONE").upper()
    source = st.cluster_id
    if my_role is Role.PRIMARY and their_role == Role.PRIMARY.value and mine and theirs:
        return RoleCheck(problem=(
            f"cluster {source} ({target}) also claims the PRIMARY role for epoch-function "
            f"tables (here: {', '.join(mine)}; there: {', '.join(theirs)}): two primaries "
            f"refresh each other's rows for ever, so this channel does not run; exactly one "
            f"cluster may be PRIMARY -- set the other to SECONDARY (gateway conflicts role "
            f"SECONDARY)"))
    reads_me = any(ch.source_id == me for ch in st.channels)
    if mine and reads_me and my_role is not Role.PRIMARY and their_role != Role.PRIMARY.value:
        return RoleCheck(warning=(
            f"neither this cluster ({my_role.value}) nor cluster {source} ({their_role}) is "
            f"PRIMARY for the epoch-function tables {', '.join(mine)}: concurrent changes are "
            f"not detected and the two clusters may swap their values; set one of them to "
            f"PRIMARY (gateway conflicts role PRIMARY)"))
    return RoleCheck()
