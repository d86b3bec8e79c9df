"""The C judgement of replicated epochs under NDB$EPOCH / NDB$EPOCH2 (``epoch_judge``,
``gateway.node._judge``) decides exactly what its Python specification (``judge_unit``, hence
``gateway.conflict.judge_epoch`` and the functions) decides: the same verdicts, exception
rows, refreshes, dropped records and counters -- on random epochs of inserts, updates and
deletes over rows held, deleted or unknown here, written by this cluster or others, with
rows an earlier entry of the same batch wrote; and the state machine writes the same bytes
with it as without it."""

from __future__ import annotations

import os
import random

import pytest

from gateway.conflict import Context, Role, RuleSet, Stored
from gateway.conflict.functions import BUILTIN
from gateway.conflict.rules import ConflictRule
from gateway.core import messages
from gateway.core.lsm.format import encode_cell, version_of
from gateway.node.state import epoch_judge, keys
from gateway.node.state.conflict_apply import judge_unit
from gateway.node.state.epoch_judge import judge_unit_fast
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import (
    epoch_pb2,
    gateway_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)
from tests.harness.debug_alloc import run_under_debug_allocator
from tests.node.test_conflict_wire import run_recording

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    assert epoch_judge._judge is not None, "gateway.node._judge is not built"
elif epoch_judge._judge is None:
    pytest.skip("gateway.node._judge is not built", allow_module_level=True)

_INT = value_pb2.FIELD_TYPE_INTEGER


def _stmt(kind: str, table: str, keys_: list[int], value: int) -> statement_pb2.Statement:
    t = statement_pb2.TableMetadata(schema_name="s", table_name=table)
    kf = [statement_pb2.FieldMetadata(name="id", type=_INT)]
    f = [statement_pb2.FieldMetadata(name="v", type=_INT)]
    kv = [[value_pb2.Value(int_value=k)] for k in keys_]
    after = [value_pb2.Value(int_value=value)]
    if kind == "insert":
        return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=t, key_fields=kf, fields=f, records=[statement_pb2.InsertRecord(
                key_values=k, after_values=after) for k in kv]))
    if kind == "update":
        return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
            table=t, key_fields=kf, set_fields=f, records=[statement_pb2.UpdateRecord(
                key_values=k, after_values=after) for k in kv]))
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=t, key_fields=kf, records=[statement_pb2.DeleteRecord(key_values=k)
                                         for k in kv]))


def _txns(rng: random.Random, n_keys: int) -> list[transaction_pb2.Transaction]:
    out = []
    for t in range(rng.randint(1, 5)):
        origin = rng.choice([2, 2, 3, 4])  # 2: the source; 3, 4: forwarded by it
        stmts = [_stmt(rng.choice(["insert", "update", "update", "delete"]),
                       rng.choice(["t", "t", "u", "plain"]),
                       [rng.randrange(n_keys) for _ in range(rng.randint(1, 4))], t)
                 for _ in range(rng.randint(1, 3))]
        out.append(transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=origin, trans_id=t + 1), epoch=(1 << 32) | 7,
            author=origin, commit_timestamp_ns=100 + t, statements=stmts))
    return out


def _columns(schema: str, table: str) -> dict[str, int]:
    return {"id": _INT, "v": _INT}


_FUNCTIONS = [("NDB$EPOCH", "NDB$EPOCH"), ("NDB$EPOCH2", "NDB$EPOCH2"),
              ("NDB$EPOCH", "NDB$EPOCH2")]


@pytest.mark.parametrize("role", [Role.PRIMARY, Role.SECONDARY, Role.PASS])
@pytest.mark.parametrize(("fn_t", "fn_u"), _FUNCTIONS)
def test_c_and_python_judge_random_epochs_the_same(role, fn_t, fn_u):
    rng = random.Random(f"{role.value}{fn_t}{fn_u}")
    rules = RuleSet([ConflictRule("s.t", fn_t, ()), ConflictRule("s.u", fn_u, ())], BUILTIN)
    decided = 0
    for _ in range(300):
        n_keys = rng.randint(1, 12)
        txns = _txns(rng, n_keys)
        stored: dict[bytes, bytes] = {}  # row key -> cell
        overlay: dict[bytes, bytes | None] = {}  # rows of earlier entries of the batch
        meta: dict[bytes, tuple[int, int, int]] = {}
        for table in ("t", "u", "plain"):
            for k in range(n_keys):
                key = keys.row_key("s", table, [value_pb2.Value(int_value=k)])
                roll = rng.random()
                epoch = rng.choice([0, 5, 9, 12])
                author = rng.choice([0, 1, 2, 3])
                row = gateway_pb2.Row(epoch=epoch, author=author, fields=[
                    statement_pb2.FieldMetadata(name="v", type=_INT)],
                    values=[value_pb2.Value(int_value=k)]).SerializeToString()
                if roll < 0.35:
                    stored[key] = encode_cell(row, epoch, author, 1)
                elif roll < 0.5:
                    stored[key] = encode_cell(None, epoch, author, 1)  # a tombstone
                elif roll < 0.6:
                    overlay[key] = row
                elif roll < 0.65:
                    overlay[key] = None
                    meta[key] = (epoch, author, 1)

        def lookup(k: bytes, values: bool, stored=stored, overlay=overlay, meta=meta
                   ) -> Stored:  # as EpochApply._judge's
            if k in overlay:
                raw = overlay[k]
                if raw is None:
                    m = meta[k]
                    return Stored(False, {}, m[0], m[1], m[2])
                r = gateway_pb2.Row.FromString(raw)
                return Stored(True, {"v": r.values[0].int_value} if values else {},
                              r.epoch, r.author, r.commit_timestamp_ns)
            c = stored.get(k)
            if c is None:
                return Stored.absent()
            v = version_of(c)
            if v.value is None:
                return Stored(False, {}, v.epoch, v.author, v.commit_ts)
            r = gateway_pb2.Row.FromString(v.value)
            return Stored(True, {"v": r.values[0].int_value} if values else {}, v.epoch,
                          v.author, v.commit_ts)

        ctx = Context(1, role, {2: rng.choice([0, 6, 10]), 3: rng.choice([0, 11])})
        source = rng.choice([2, 0])
        want = judge_unit(txns, rules, ctx, lookup, 20, 7, None, _columns, source=source)
        got = judge_unit_fast(txns, rules, ctx, lookup, stored.get, overlay, 20, 7, None,
                              _columns, source=source)
        asked: list[bytes] = []

        def cells(ks: list[bytes], stored=stored, asked=asked) -> dict[bytes, bytes | None]:
            asked.extend(ks)
            return {k: stored.get(k) for k in ks}

        def no_cell(k: bytes) -> bytes | None:
            raise AssertionError("cell called with the batched cells given")

        batched = judge_unit_fast(txns, rules, ctx, lookup, no_cell, overlay, 20, 7, None,
                                  _columns, source=source, cells=cells)
        for one in (got, batched):
            assert one is not None
            assert one.transactions == want.transactions
            assert one.exceptions == want.exceptions
            assert one.refresh == want.refresh
            assert list(one.counters.items()) == list(want.counters.items())  # in order
            assert (one.in_conflict, one.dropped) == (want.in_conflict, want.dropped)
        assert not overlay.keys() & set(asked)  # the batch's rows are never the store's
        decided += bool(want.exceptions or want.dropped)
    assert decided > 30  # the epochs did meet conflicts and dropped records


@pytest.mark.parametrize("rule", [("NDB$EPOCH_TRANS", ()), ("NDB$MAX", ("v",)), ("LWW", ()),
                                  ("NDB$EPOCH2", ("v",))])
def test_functions_the_c_pass_cannot_express_are_left_to_python(rule):
    rules = RuleSet([ConflictRule("s.t", rule[0], rule[1])], BUILTIN, checked=False)
    txns = [transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=2, trans_id=1),
                                        statements=[_stmt("update", "t", [1], 1)])]
    assert judge_unit_fast(txns, rules, Context(1, Role.PRIMARY), lambda k, v: Stored(False),
                           lambda k: None, {}, 20, 7) is None
    assert judge_unit_fast(txns, RuleSet([ConflictRule("s.t", "NDB$EPOCH2", ())], BUILTIN),
                           Context(1, Role.NONE), lambda k, v: Stored(False),
                           lambda k: None, {}, 20, 7) is None


# The caller's lists emptied by the store's callback in the middle of the call: the row being
# judged must stay alive and the next row must not be read from the emptied list. Run in a
# child: before the fix the C code read the freed key and then the list's freed items (a crash
# or a corrupted heap, not an exception).
_LISTS_EMPTIED_BY_A_CALLBACK = """
from gateway.node import _judge
keys = [bytes([65, i]) * 16 for i in range(4)]  # the list holds the only reference of each
origins = [2] * 4
def cell(key):
    keys.clear()
    origins.clear()
    return None  # no such row: each update is rejected (ROW_DOES_NOT_EXIST)
try:
    _judge.epoch_verdicts(keys, bytes([2] * 4), origins, [4], {}, 2, True, 7, {}, None, cell)
except ValueError as e:
    print("refused:", e)
"""


def test_lists_changed_by_a_callback_are_refused_not_read_after_free():
    out = run_under_debug_allocator(_LISTS_EMPTIED_BY_A_CALLBACK)
    assert out.startswith("refused: keys or origins changed length"), out

def _entries(seed: int) -> list[Entry]:
    """Cluster 2's epochs over 40 keys, this cluster's own writes between them (so rows are
    in conflict), and reflections raising 2's max replicated epoch now and then."""
    rng = random.Random(seed)
    view = ReplicationState(1)
    out: list[Entry] = []
    trans = 0
    for n in range(1, 60):
        if rng.random() < 0.3:  # this cluster writes some rows
            trans += 1
            txn = transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=1, trans_id=trans), epoch=(3 << 32) | n,
                author=1, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=[_stmt("insert", "t", [rng.randrange(40)], -trans)])
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(txn)))
        items = []
        for _ in range(rng.randint(1, 3)):
            trans += 1
            stmts = [_stmt(rng.choice(["insert", "update", "delete"]), rng.choice(["t", "p"]),
                           [rng.randrange(40) for _ in range(rng.randint(1, 4))], trans)
                     for _ in range(rng.randint(1, 2))]
            items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=2, trans_id=trans), epoch=(1 << 32) | n,
                author=2, commit_timestamp_ns=1000 + trans, segment_id=1, end_segment=True,
                statements=stmts)))
        if rng.random() < 0.3 and n > 2:  # 2 reports having applied an epoch of 1's
            items.append(replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
                server_id=1, epoch=(3 << 32) | (n - 2), applied_by=2)))
        sealed = SealedEpoch((1 << 32) | n, items, last_log_index=n)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | n):
            part.derived_trans_id = 10_000 + n
            part.derived_commit_ts = 5_000 + n
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(part)))
    return out


@pytest.mark.parametrize(("function", "role"), [
    ("NDB$EPOCH2", Role.PRIMARY), ("NDB$EPOCH", Role.PRIMARY), ("NDB$EPOCH2", Role.SECONDARY),
])
def test_the_state_machine_writes_the_same_with_the_c_judgement(tmp_path, function, role):
    entries = _entries(len(function) * 7 + len(role.value))
    got = [run_recording(str(tmp_path / name), entries, function, in_c, tables="t", role=role)
           for name, in_c in (("c", True), ("python", False))]
    assert got[0] == got[1]
    counters = got[0][3].get("c", {})
    if role is Role.PRIMARY:
        assert counters.get(f"conflict_fn_{function[4:].lower()}", 0) > 0
