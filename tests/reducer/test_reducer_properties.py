"""Property tests: reduced operations reach the same state as the original statements.

Transactions are generated the way a master commits them: starting from a random store, each
statement is valid at its point (INSERT of an absent key, UPDATE/DELETE of a present one,
key-changing UPDATE to an absent key), records are grouped into multi-record statements, and
SQL statements are sprinkled in as barriers (the model snapshots the store at each one, so the
state at every barrier must match too). A second family ignores validity altogether and checks
the reducer with ``elide_insert_delete=False`` on arbitrary starting states.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.core.reducer import SegmentAssembler, reduce_transaction, reduce_window
from gateway.core.rowops import TableRef, statement_ops
from gateway.v1 import statement_pb2
from tests.reducer.model import apply_all, delete, insert, sql, txn, update

TABLES = ("t", "u")
KEYS = st.integers(0, 6)
A = st.one_of(st.none(), st.integers(-3, 3))
B = st.sampled_from(["x", "y", "z", ""])


@st.composite
def stores(draw: Any) -> dict:
    store = {}
    for table in TABLES:
        for key in draw(st.sets(KEYS, max_size=5)):
            store[(TableRef("s", table), (key,))] = {"a": draw(A), "b": draw(B)}
    return store


def _group(actions: list[tuple]) -> list[statement_pb2.Statement]:
    """Group consecutive actions of the same kind, table and columns into one statement."""
    stmts: list[statement_pb2.Statement] = []
    i = 0
    while i < len(actions):
        j = i + 1
        while j < len(actions) and actions[j][:3] == actions[i][:3] and actions[i][0] != "sql":
            j += 1
        kind, table, cols = actions[i][:3]
        run = actions[i:j]
        if kind == "insert":
            stmts.append(insert(table, [{"id": k, **dict(zip(cols, v, strict=True))}
                                        for *_, k, v in run]))
        elif kind == "update":
            stmts.append(update(table, cols, [(k, v) for *_, k, v in run]))
        elif kind == "delete":
            stmts.append(delete(table, [k for *_, k, _ in run]))
        else:
            stmts.append(sql(f"-- barrier {i}"))
        i = j
    return stmts


@st.composite
def valid_actions(draw: Any, start: dict, n_max: int = 25) -> list[tuple]:
    """Actions valid against a master whose store starts as ``start`` (mutated copy)."""
    live = {(t.name, k[0]) for t, k in start}
    actions: list[tuple] = []
    for _ in range(draw(st.integers(0, n_max))):
        table = draw(st.sampled_from(TABLES))
        present = sorted(k for t, k in live if t == table)
        absent = sorted(set(range(7)) - set(present))
        choices = ["sql"] + (["insert"] if absent else []) + (
            ["update", "update", "delete", "move"] if present else [])
        kind = draw(st.sampled_from(choices))
        if kind == "insert":
            key = draw(st.sampled_from(absent))
            cols = tuple(draw(st.sampled_from([("a", "b"), ("a",), ("b",), ()])))
            vals = tuple(draw(A if c == "a" else B) for c in cols)
            live.add((table, key))
            actions.append(("insert", table, cols, key, vals))
        elif kind == "update":
            key = draw(st.sampled_from(present))
            cols = draw(st.sampled_from([("a",), ("b",), ("a", "b"), ("b", "a")]))
            actions.append(("update", table, cols, key,
                            tuple(draw(A if c == "a" else B) for c in cols)))
        elif kind == "delete":
            key = draw(st.sampled_from(present))
            live.discard((table, key))
            actions.append(("delete", table, (), key, ()))
        elif kind == "move" and absent:
            key, new = draw(st.sampled_from(present)), draw(st.sampled_from(absent))
            live.discard((table, key))
            live.add((table, new))
            cols = draw(st.sampled_from([("id",), ("id", "a"), ("b", "id")]))
            vals = tuple(new if c == "id" else draw(A if c == "a" else B) for c in cols)
            actions.append(("update", table, cols, key, vals))
        else:
            actions.append(("sql", "", (), 0, ()))
    return actions


@st.composite
def any_actions(draw: Any, n_max: int = 25) -> list[tuple]:
    """Actions with no regard to validity: duplicate inserts, updates of missing rows..."""
    actions = []
    for _ in range(draw(st.integers(0, n_max))):
        kind = draw(st.sampled_from(["insert", "update", "delete", "move", "sql"]))
        table, key = draw(st.sampled_from(TABLES)), draw(KEYS)
        if kind == "insert":
            actions.append(("insert", table, ("a", "b"), key, (draw(A), draw(B))))
        elif kind == "update":
            actions.append(("update", table, ("a",), key, (draw(A),)))
        elif kind == "move":
            actions.append(("update", table, ("id", "b"), key, (draw(KEYS), draw(B))))
        elif kind == "delete":
            actions.append(("delete", table, (), key, ()))
        else:
            actions.append(("sql", "", (), 0, ()))
    return actions


@st.composite
def valid_case(draw: Any) -> tuple[dict, list[tuple]]:
    start = draw(stores())
    return start, draw(valid_actions(start))


@settings(max_examples=300, deadline=None)
@given(valid_case())
def test_reduced_transaction_reaches_the_same_state_as_its_statements(case):
    start, actions = case
    t = txn(1, *_group(actions))
    assert apply_all(start, reduce_transaction(t)) == apply_all(start, statement_ops(t))


@settings(max_examples=200, deadline=None)
@given(stores(), any_actions())
@example(  # a MOVE of a row deleted earlier in the unit: the net effect stays the DELETE
    start={(TableRef("s", "u"), (0,)): {"a": None, "b": "x"},
           (TableRef("s", "u"), (1,)): {"a": None, "b": "x"}},
    actions=[("update", "t", ("a",), 0, (None,)), ("delete", "u", (), 1, ()),
             ("update", "u", ("id", "b"), 1, (0, "y"))])
def test_without_elision_any_starting_state_gives_the_same_state(start, actions):
    t = txn(1, *_group(actions))
    reduced = reduce_transaction(t, elide_insert_delete=False)
    assert apply_all(start, reduced) == apply_all(start, statement_ops(t))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_window_reduction_equals_applying_transactions_in_order(data):
    start = data.draw(stores())
    master = dict(start)
    window, original = [], []
    for n in range(1, data.draw(st.integers(1, 5)) + 1):
        actions = data.draw(valid_actions(master, n_max=8))
        t = txn(n, *_group(actions))
        ops = statement_ops(t, n)
        master, _ = apply_all(master, ops)
        window.append((n, t))
        original.extend(ops)
    assert apply_all(start, reduce_window(window)) == apply_all(start, original)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_reduced_segments_equal_the_unsegmented_transaction(data):
    start = data.draw(stores())
    stmts = _group(data.draw(valid_actions(start)))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(stmts) - 1)), max_size=3)))
    parts = [stmts[i:j] for i, j in zip([0, *cuts], [*cuts, len(stmts)], strict=True)]
    segs = [txn(1, *p, segment_id=n, end_segment=n == len(parts))
            for n, p in enumerate(parts, 1)]
    other = txn(2, insert("t", [{"id": 99, "a": 1}]))
    asm = SegmentAssembler()
    done = []
    for index, seg in enumerate(segs, 1):
        if (result := asm.add(index * 2, seg)) is not None:
            done.append(result)
        if (result := asm.add(index * 2 + 1, other)) is not None and index == 1:
            done.append(result)  # an interleaved single-segment transaction completes at once
    mine = [d for d in done if d.gtid.trans_id == 1]
    assert len(mine) == 1 and len(asm) == 0
    whole = txn(1, *stmts)
    assert apply_all(start, reduce_window([mine[0]])) == apply_all(start, statement_ops(whole))
