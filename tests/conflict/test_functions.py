"""Every built-in conflict function's verdict, case by case: insert / update / delete x the
row exists / is missing x the change wins or is in conflict (MySQL's semantics for the NDB$
family, last writer wins for LWW), and the checks of their configuration."""

from __future__ import annotations

import pytest

from gateway.conflict.functions import (
    BUILTIN,
    ConflictConfigError,
    RoleNotSetError,
    bind,
    epoch_row_conflict,
)
from gateway.conflict.model import Cause, Change, Context, OpType, Role, Stored, Verdict
from gateway.v1 import value_pb2

FT = value_pb2.FieldType
W, U, D, R = OpType.WRITE_ROW, OpType.UPDATE_ROW, OpType.DELETE_ROW, OpType.REFRESH_ROW
APPLY = Verdict(True)
OVER = Verdict(True, as_op=OpType.UPDATE_ROW)
NOOP = Verdict(False)
EXISTS = Verdict(False, Cause.ROW_ALREADY_EXISTS)
MISSING = Verdict(False, Cause.ROW_DOES_NOT_EXIST)
DATA = Verdict(False, Cause.DATA_IN_CONFLICT)
CTX = Context(me=1)

ROW = Stored(True, {"ts": 10, "v": "here"}, epoch=5, author=1, commit_ts_ns=1000)
GONE = Stored.absent()


def change(op: OpType, *, ts: int | None = None, before: int | None = None,
           origin: int = 2, commit: int = 2000) -> Change:
    after = {} if op is D else {"v": "new", **({} if ts is None else {"ts": ts})}
    return Change(op, origin, origin_epoch=7, commit_ts_ns=commit, after=after,
                  before={} if before is None else {"ts": before})


def verdict(name: str, ch: Change, stored: Stored, ctx: Context = CTX) -> Verdict:
    _, fn = bind(name, [] if not BUILTIN[name].column else ["ts"])
    return fn(ch, stored, ctx)


# (function, change, stored row, expected verdict)
COLUMN_CASES = [
    # NDB$OLD: the before image of the column must equal the stored value
    ("NDB$OLD", change(W, ts=11), GONE, APPLY),
    ("NDB$OLD", change(W, ts=11), ROW, EXISTS),
    ("NDB$OLD", change(U, ts=11, before=10), ROW, APPLY),
    ("NDB$OLD", change(U, ts=11, before=9), ROW, DATA),
    ("NDB$OLD", change(U, ts=11), ROW, DATA),  # no before image: conflict, never blind
    ("NDB$OLD", change(U, ts=11, before=10), GONE, MISSING),
    ("NDB$OLD", change(D, before=10), ROW, APPLY),
    ("NDB$OLD", change(D, before=3), ROW, DATA),
    ("NDB$OLD", change(D, before=10), GONE, MISSING),
    # NDB$MAX: a greater column wins an update; a delete is judged as by NDB$OLD
    ("NDB$MAX", change(W, ts=11), GONE, APPLY),
    ("NDB$MAX", change(W, ts=99), ROW, EXISTS),
    ("NDB$MAX", change(U, ts=11), ROW, APPLY),
    ("NDB$MAX", change(U, ts=10), ROW, DATA),  # equal is not greater
    ("NDB$MAX", change(U, ts=9), ROW, DATA),
    ("NDB$MAX", change(U), ROW, DATA),  # the update does not set the column
    ("NDB$MAX", change(U, ts=11), GONE, MISSING),
    ("NDB$MAX", change(D, before=10), ROW, APPLY),
    ("NDB$MAX", change(D, before=9), ROW, DATA),
    ("NDB$MAX", change(D, before=10), GONE, MISSING),
    # NDB$MAX_DELETE_WIN: deletes of existing rows always win
    ("NDB$MAX_DELETE_WIN", change(W, ts=11), GONE, APPLY),
    ("NDB$MAX_DELETE_WIN", change(W, ts=11), ROW, EXISTS),
    ("NDB$MAX_DELETE_WIN", change(U, ts=11), ROW, APPLY),
    ("NDB$MAX_DELETE_WIN", change(U, ts=9), ROW, DATA),
    ("NDB$MAX_DELETE_WIN", change(U, ts=11), GONE, MISSING),
    ("NDB$MAX_DELETE_WIN", change(D, before=1), ROW, APPLY),
    ("NDB$MAX_DELETE_WIN", change(D), ROW, APPLY),
    ("NDB$MAX_DELETE_WIN", change(D), GONE, MISSING),
    # NDB$MAX_INS: an insert over an existing row is applied over it when greater
    ("NDB$MAX_INS", change(W, ts=11), GONE, APPLY),
    ("NDB$MAX_INS", change(W, ts=11), ROW, OVER),
    ("NDB$MAX_INS", change(W, ts=10), ROW, EXISTS),
    ("NDB$MAX_INS", change(U, ts=11), ROW, APPLY),
    ("NDB$MAX_INS", change(U, ts=9), ROW, DATA),
    ("NDB$MAX_INS", change(U, ts=11), GONE, MISSING),
    ("NDB$MAX_INS", change(D, before=10), ROW, APPLY),
    ("NDB$MAX_INS", change(D, before=9), ROW, DATA),
    ("NDB$MAX_INS", change(D, before=10), GONE, MISSING),
    # NDB$MAX_DEL_WIN_INS: inserts as NDB$MAX_INS, deletes as NDB$MAX_DELETE_WIN
    ("NDB$MAX_DEL_WIN_INS", change(W, ts=11), GONE, APPLY),
    ("NDB$MAX_DEL_WIN_INS", change(W, ts=11), ROW, OVER),
    ("NDB$MAX_DEL_WIN_INS", change(W, ts=3), ROW, EXISTS),
    ("NDB$MAX_DEL_WIN_INS", change(U, ts=11), ROW, APPLY),
    ("NDB$MAX_DEL_WIN_INS", change(U, ts=10), ROW, DATA),
    ("NDB$MAX_DEL_WIN_INS", change(U, ts=11), GONE, MISSING),
    ("NDB$MAX_DEL_WIN_INS", change(D), ROW, APPLY),
    ("NDB$MAX_DEL_WIN_INS", change(D), GONE, MISSING),
]


@pytest.mark.parametrize("name, ch, stored, want", COLUMN_CASES,
                         ids=[f"{c[0]}-{c[1].op.name}-{i}" for i, c in enumerate(COLUMN_CASES)])
def test_column_functions(name, ch, stored, want):
    assert verdict(name, ch, stored) == want


def test_nulls_never_win_and_a_stored_null_loses():
    null_row = Stored(True, {"ts": None}, epoch=5, author=1)
    assert verdict("NDB$MAX", change(U, ts=1), null_row) == APPLY
    assert verdict("NDB$MAX", Change(U, 2, after={"ts": None}), ROW) == DATA
    assert verdict("NDB$OLD", Change(U, 2, after={"v": 1}, before={"ts": None}), null_row) \
        == DATA


TOMB_NEW = Stored(False, epoch=6, author=3, commit_ts_ns=5000)  # deleted at ts 5000
TOMB_OLD = Stored(False, epoch=4, author=3, commit_ts_ns=500)

LWW_CASES = [
    (change(W, commit=2000), GONE, APPLY),
    (change(W, commit=2000), ROW, OVER),  # newer than the row (1000)
    (change(W, commit=900), ROW, DATA),
    (change(W, commit=2000), TOMB_OLD, APPLY),
    (change(W, commit=2000), TOMB_NEW, DATA),  # deleted later: no resurrection
    (change(U, commit=2000), ROW, APPLY),
    (change(U, commit=900), ROW, DATA),
    (change(U, commit=2000), GONE, MISSING),
    (change(U, commit=9000), TOMB_NEW, MISSING),
    (change(D, commit=2000), ROW, APPLY),
    (change(D, commit=900), ROW, DATA),
    (change(D, commit=2000), TOMB_OLD, APPLY),  # the newer delete's time is kept
    (change(D, commit=2000), TOMB_NEW, NOOP),  # already deleted later
    (change(D, commit=2000), GONE, APPLY),
    # equal timestamps: the greater origin id wins (the row's author is 1)
    (change(U, commit=1000, origin=2), ROW, APPLY),
    (change(U, commit=1000, origin=0), ROW, DATA),
]


@pytest.mark.parametrize("ch, stored, want", LWW_CASES,
                         ids=[f"{c[0].op.name}-{i}" for i, c in enumerate(LWW_CASES)])
def test_last_writer_wins(ch, stored, want):
    assert verdict("LWW", ch, stored) == want


# NDB$EPOCH: this cluster (1) is PRIMARY; cluster 2 has applied our epochs up to 5
PRIMARY = Context(me=1, role=Role.PRIMARY, max_replicated={2: 5})
STABLE = Stored(True, {"v": "x"}, epoch=5, author=1)  # changed here in epoch 5: 2 saw it
FRESH = Stored(True, {"v": "x"}, epoch=6, author=1)  # changed here in epoch 6: 2 had not
FROM_2 = Stored(True, {"v": "x"}, epoch=9, author=2)  # last changed by 2 itself
FRESH_TOMB = Stored(False, epoch=6, author=1)  # deleted here in epoch 6
REFRESH = dict(refresh=True)

EPOCH_CASES = [
    (change(W), GONE, APPLY),
    (change(W), STABLE, Verdict(False, Cause.ROW_ALREADY_EXISTS, **REFRESH)),
    (change(W), FRESH_TOMB, Verdict(False, Cause.DATA_IN_CONFLICT, **REFRESH)),
    (change(W), Stored(False, epoch=5, author=1), APPLY),  # a delete 2 had seen
    (change(U), STABLE, APPLY),
    (change(U), FRESH, Verdict(False, Cause.DATA_IN_CONFLICT, **REFRESH)),
    (change(U), FROM_2, APPLY),  # serial after 2's own change: no conflict
    (change(U), GONE, Verdict(False, Cause.ROW_DOES_NOT_EXIST, **REFRESH)),
    # an update of a row deleted here concurrently: MySQL's update finds no row (626)
    # before the epoch check runs, so the cause is ROW_DOES_NOT_EXIST (docs/conflicts.md)
    (change(U), FRESH_TOMB, Verdict(False, Cause.ROW_DOES_NOT_EXIST, **REFRESH)),
    (change(D), STABLE, APPLY),
    (change(D), FRESH, Verdict(False, Cause.DATA_IN_CONFLICT, **REFRESH)),
    (change(D), FROM_2, APPLY),
    # a change from a peer that has applied nothing of ours yet: every local change conflicts
    (change(U, origin=3), STABLE, Verdict(False, Cause.DATA_IN_CONFLICT, **REFRESH)),
]


@pytest.mark.parametrize("name", ["NDB$EPOCH", "NDB$EPOCH2", "NDB$EPOCH_TRANS",
                                  "NDB$EPOCH2_TRANS"])
@pytest.mark.parametrize("ch, stored, want", EPOCH_CASES,
                         ids=[f"{c[0].op.name}-{i}" for i, c in enumerate(EPOCH_CASES)])
def test_epoch_functions_on_the_primary(name, ch, stored, want):
    assert verdict(name, ch, stored, PRIMARY) == want


@pytest.mark.parametrize("stored", [GONE, FRESH_TOMB, Stored(False, epoch=5, author=2)],
                         ids=["never-known", "deleted-here-concurrently", "deleted-by-2"])
def test_a_delete_of_a_row_gone_here_is_a_delete_delete(stored):
    """MySQL's delete-delete: counted by every epoch function; a conflict answered by a
    refresh under NDB$EPOCH (as MySQL: the row does not exist), agreement under NDB$EPOCH2
    (both clusters hold the row deleted: nothing to apply, record or realign)."""
    missing = Verdict(False, Cause.ROW_DOES_NOT_EXIST, refresh=True, delete_delete=True)
    agreed = Verdict(False, delete_delete=True)
    for name, want in (("NDB$EPOCH", missing), ("NDB$EPOCH_TRANS", missing),
                       ("NDB$EPOCH2", agreed), ("NDB$EPOCH2_TRANS", agreed)):
        got = verdict(name, change(D), stored, PRIMARY)
        assert got == want, name
        assert got.in_conflict is (want is missing)


@pytest.mark.parametrize("role", [Role.SECONDARY, Role.PASS])
def test_epoch_functions_on_a_secondary_apply_what_arrives(role):
    ctx = Context(me=2, role=role, max_replicated={1: 3})
    for stored, cases in ((FRESH, [(W, OVER), (U, APPLY), (D, APPLY), (R, APPLY)]),
                          (GONE, [(W, APPLY), (U, NOOP), (D, NOOP), (R, APPLY)])):
        for op, want in cases:
            assert verdict("NDB$EPOCH", change(op, origin=1), stored, ctx) == want


def test_epoch_functions_refuse_to_run_without_a_role():
    with pytest.raises(RoleNotSetError, match="NONE"):
        verdict("NDB$EPOCH2", change(U), STABLE, Context(me=1))
    with pytest.raises(ValueError, match="two primaries"):
        verdict("NDB$EPOCH", change(R), STABLE, PRIMARY)


def test_the_epoch_row_rule_is_per_peer():
    ctx = Context(me=1, role=Role.PRIMARY, max_replicated={2: 9, 3: 4})
    row = Stored(True, epoch=6, author=1)
    assert not epoch_row_conflict(change(U, origin=2), row, ctx)  # 2 had applied epoch 6
    assert epoch_row_conflict(change(U, origin=3), row, ctx)  # 3 had not
    # a row last written by cluster 3, replicated here in our epoch 6
    row3 = Stored(True, epoch=6, author=3)
    assert not epoch_row_conflict(change(U, origin=3), row3, ctx)
    assert not epoch_row_conflict(change(U, origin=2), row3, ctx)
    assert epoch_row_conflict(change(U, origin=2), row3,
                              Context(me=1, role=Role.PRIMARY, max_replicated={2: 5}))
    assert not epoch_row_conflict(change(U, origin=2), Stored.absent(), ctx)


@pytest.mark.parametrize("name, args, columns, message", [
    ("NDB$NOPE", [], None, "unknown conflict function 'NDB$NOPE' (known: LWW, NDB$EPOCH"),
    ("NDB$MAX", [], None, "NDB$MAX takes one argument, the resolution column"),
    ("NDB$OLD", ["a", "b"], None, "takes one argument"),
    ("NDB$EPOCH", ["ts"], None, "NDB$EPOCH takes no argument, got ts"),
    ("LWW", ["ts"], None, "LWW takes no argument"),
    ("NDB$MAX", ["ts"], {"id": FT.FIELD_TYPE_INTEGER}, "the table has no column 'ts' (it has id)"),
    ("NDB$MAX_INS", ["ts"], {"ts": FT.FIELD_TYPE_VARCHAR},
     "column 'ts' is FIELD_TYPE_VARCHAR; a resolution column must be INTEGER, UNSIGNED"),
])
def test_configuration_errors_name_the_function_and_argument(name, args, columns, message):
    with pytest.raises(ConflictConfigError, match=message.replace("$", r"\$")
                       .replace("(", r"\(").replace(")", r"\)")):
        bind(name, args, columns)


def test_every_builtin_binds_with_its_arguments():
    for name, spec in BUILTIN.items():
        args = ["ts"] if spec.column else []
        got, fn = bind(name, args, {"ts": FT.FIELD_TYPE_UNSIGNED})
        assert got is spec and callable(fn)
