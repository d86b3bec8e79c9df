"""Conflict functions from plugins (``with_plugins``): registration checked, and a plugin's
function judges rows like a built-in."""

from __future__ import annotations

import pytest

from gateway.conflict import (
    APPLY,
    BUILTIN,
    Cause,
    ConflictConfigError,
    ConflictRule,
    Context,
    FunctionSpec,
    OpType,
    Role,
    RuleSet,
    Stored,
    Verdict,
    with_plugins,
)
from gateway.conflict.resolve import judge_epoch
from tests.conflict.test_resolve import causes, rc, rows


def first_wins(change, stored, ctx):
    """Never overwrite: an insert over a row, an update or delete of a missing one conflict."""
    if change.op is OpType.WRITE_ROW:
        return Verdict(False, Cause.ROW_ALREADY_EXISTS) if stored.exists else APPLY
    return APPLY if stored.exists else Verdict(False, Cause.ROW_DOES_NOT_EXIST)


def newer(col):
    def check(change, stored, ctx):
        if not stored.exists or change.after.get(col, 0) > stored.values.get(col, 0):
            return APPLY
        return Verdict(False, Cause.DATA_IN_CONFLICT, refresh=ctx.role is Role.PRIMARY)
    return check


def test_plugin_functions_join_the_builtins():
    fns = with_plugins({"MY$FIRST_WINS": first_wins,
                        "MY$NEWER": FunctionSpec("MY$NEWER", True, False, False, newer)})
    assert set(BUILTIN) < set(fns)
    assert not fns["MY$FIRST_WINS"].column and fns["MY$NEWER"].column
    rules = RuleSet([ConflictRule("s.t", "MY$NEWER", ("v",))], fns)
    with pytest.raises(ConflictConfigError, match="takes one argument"):
        RuleSet([ConflictRule("s.t", "MY$NEWER")], fns)
    ctx = Context(me=1, role=Role.PRIMARY)
    j = judge_epoch([[rc(1, v=5)], [rc(2, v=1)]], rules,
                    rows(r1=Stored(True, {"v": 3}), r2=Stored(True, {"v": 3})), ctx, 9)
    assert causes(j) == [[None], [Cause.DATA_IN_CONFLICT]]
    assert j.refresh == [("s", "t", 2)] and j.counters["conflict_fn_other"] == 1
    j = judge_epoch([[rc(1, OpType.WRITE_ROW)]], RuleSet([ConflictRule("s.*", "MY$FIRST_WINS")],
                                                         fns),
                    rows(r1=Stored(True, {"v": 3})), ctx, 9)
    assert causes(j) == [[Cause.ROW_ALREADY_EXISTS]]


@pytest.mark.parametrize(("found", "message"), [
    ({"my$lower": first_wins}, "upper case"),
    ({"NDB$EPOCH": first_wins}, "a built-in function has that name"),
    ({"MY$X": FunctionSpec("MY$Y", False, False, False, lambda c: first_wins)},
     "FunctionSpec named 'MY$Y'"),
    ({"MY$X": 42}, "int is neither a function nor a FunctionSpec"),
])
def test_bad_registrations_name_the_function(found, message):
    with pytest.raises(ConflictConfigError, match=message.replace("$", r"\$")):
        with_plugins(found)
