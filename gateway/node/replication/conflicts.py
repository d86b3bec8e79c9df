"""This cluster's conflict configuration: the rules (MySQL's ``ndb_replication`` table) and
the role, as replicated state (``ConflictCommand`` entries, applied by the state machine).

Changes come from the admin API (``Conflicts``: checked here, on the leader, before they are
proposed: the function exists with the right arguments, the resolution column exists with a
numeric type in every known table the pattern matches, the role is one of MySQL's) and from
the configuration file (``conflict_role``, ``[[conflicts]]``), which the leader proposes once
per term, before the channels start, where the replicated state differs: the file wins for
what it names.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gateway.conflict import (
    BUILTIN,
    ConflictConfigError,
    ConflictFunctionsError,
    ConflictRule,
    FunctionSpec,
    Role,
)
from gateway.conflict.rules import RuleSet, parse_function, rule_from_proto, rule_to_proto
from gateway.core import messages
from gateway.node.base.validation import InvalidRequest
from gateway.node.replication.conflict_rows import list_conflicts, replay_conflicts
from gateway.v1 import gateway_pb2, replication_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["NodeConflicts", "check_rule"]

_ROLES = ", ".join(r.value for r in Role)


def check_rule(rule: ConflictRule, schemas: Mapping[str, Mapping[str, int]],
               functions: Mapping[str, FunctionSpec] = BUILTIN,
               key_columns: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise ``InvalidRequest`` (field ``set``) naming the table pattern and the problem:
    the pattern or function is malformed, or a known table it matches lacks the resolution
    column or has it with a non-numeric type (``schemas``: table name -> column types)."""
    rules = RuleSet(functions=functions, checked=False)
    try:
        rules.check(rule)
        for name in sorted(schemas):
            if fnmatch.fnmatchcase(name, rule.pattern):
                try:
                    rules.check(rule, schemas[name])
                    if rule.args and rule.args[0] in (key_columns or {}).get(name, ()):
                        raise ConflictConfigError(
                            f"table {rule.pattern}: {rule.text}: column {rule.args[0]!r} is "
                            f"part of the primary key; the resolution column must be one "
                            f"the writers set on every change")
                except ConflictConfigError as exc:
                    if name == rule.pattern:
                        raise
                    raise ConflictConfigError(str(exc).replace(
                        f"table {rule.pattern}:", f"table {name} (matched by "
                        f"{rule.pattern}):", 1)) from None
    except ConflictConfigError as exc:
        raise InvalidRequest("set", str(exc)) from None


class NodeConflicts:
    """Admin changes and the configuration file's rules, on the leader."""

    def __init__(self, driver: RaftDriver, role: str = "",
                 rules: Sequence[ConflictRule] = ()) -> None:
        """``rules``: the configuration file's, already checked against the functions the
        node has (``GatewayNode.start``)."""
        self.driver = driver
        self._role = role
        self._rules = tuple(rules)

    def _schemas(self) -> dict[str, Mapping[str, int]]:
        return {name: {**dict(s.key_fields), **s.columns}
                for name, s in self.driver.sm.schemas.items()}

    async def change(self, req: gateway_pb2.ConflictsRequest) -> gateway_pb2.AdminResponse:
        """Check and propose one change; the response names what changed."""
        cmd = replication_pb2.ConflictCommand()
        if req.HasField("set"):
            rule = rule_from_proto(req.set)
            if not rule.args and "(" in rule.function:  # written as MySQL writes it
                try:
                    name, args = parse_function(req.set.function)
                except ConflictConfigError as exc:
                    raise InvalidRequest("set", f"table {rule.pattern}: {exc}") from None
                rule = ConflictRule(rule.pattern, name, args)
            try:
                functions = self.driver.sm.functions(rule.function)
            except ConflictFunctionsError as exc:
                raise InvalidRequest("set", f"table {rule.pattern}: {exc}") from None
            check_rule(rule, self._schemas(), functions,
                       {name: [k for k, _ in sc.key_fields]
                        for name, sc in self.driver.sm.schemas.items()})
            spec = functions.get(rule.function)
            if spec is not None and spec.epoch and self.driver.sm.conflict_role is Role.NONE:
                raise InvalidRequest("set", f"table {rule.pattern}: {rule.function} needs this "
                                     f"cluster's role: set it first (PRIMARY on the cluster "
                                     f"that decides, SECONDARY on the others)")
            cmd.set.CopyFrom(rule_to_proto(rule))
            what = f"rule {rule.pattern} -> {rule.text} set"
        elif req.unset:
            if req.unset not in self.driver.sm.conflict_rules:
                known = ", ".join(sorted(self.driver.sm.conflict_rules)) or "none"
                raise InvalidRequest("unset", f"no conflict rule for {req.unset!r} (rules: "
                                     f"{known})")
            cmd.unset = req.unset
            what = f"rule {req.unset} unset"
        elif req.role:
            role = req.role.upper()
            if role not in {r.value for r in Role}:
                raise InvalidRequest("role", f"{req.role!r} is not a role ({_ROLES})")
            cmd.role = role
            what = f"role {role} set"
        else:
            raise InvalidRequest("set", "nothing to change: give set, unset or role")
        index = await self.driver.submit_entry(messages.pack(cmd))
        return gateway_pb2.AdminResponse(message=what, log_index=index)

    # -- the configuration file -----------------------------------------------------------------

    async def propose_configured(self) -> None:
        """Propose, and wait until applied, what the configuration file names and the
        replicated state lacks or holds differently (the file wins for what it names). The
        channels call this once per term on the leader before their runners start, so no
        replicated epoch is applied without the rules the operator wrote. Raises
        ``NodeError`` when a proposal fails (the channels retry)."""
        sm = self.driver.sm
        cmds = []
        if self._role and sm.conflict_role.value != self._role:
            cmds.append(replication_pb2.ConflictCommand(role=self._role))
        for rule in self._rules:
            if sm.conflict_rules.get(rule.pattern) != rule:
                cmds.append(replication_pb2.ConflictCommand(set=rule_to_proto(rule)))
        for cmd in cmds:
            await self.driver.submit_entry(messages.pack(cmd))

    # -- recorded conflicts (``conflict_rows``) ------------------------------------------------

    def list_rows(self, req: gateway_pb2.ConflictsListRequest) -> gateway_pb2.ConflictsListResponse:
        """Counts per table and cause, then a page of exception rows, from this node's
        store (on the event loop)."""
        return list_conflicts(self.driver.sm, req)

    async def replay(self, req: gateway_pb2.ConflictsReplayRequest, *, admin: bool = True
                     ) -> gateway_pb2.ConflictsReplayResponse:
        """Write the chosen rejected changes again, conditionally (on the leader)."""
        return await replay_conflicts(self.driver, req, admin=admin)

    # -- status ---------------------------------------------------------------------------------

    def rules(self) -> list[replication_pb2.ConflictRule]:
        """The replicated rules, most specific first."""
        ordered = RuleSet(self.driver.sm.conflict_rules.values(), checked=False).rules()
        return [rule_to_proto(r) for r in ordered]

    def role(self) -> str:
        return self.driver.sm.conflict_role.value
