"""The leader's validation from wire bytes (``WireChecker``) gives the verdict and the error of
the full ``check_statements``, and entries assembled from serialized statements are the bytes
``encode_transaction`` gives."""

from __future__ import annotations

import random

import pytest

from gateway.client import row_insert, row_update
from gateway.node.state_machine import encode_transaction, encode_transaction_wire
from gateway.node.validation import (
    InvalidRequest,
    WireChecker,
    check_statements,
    frame_statements,
)
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2


def _outcome(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return ("ok", [(n, s.key_fields, dict(s.columns)) for n, s in fn(*args)])
    except InvalidRequest as exc:
        return ("err", str(exc), exc.field)


def _mutate(rng: random.Random, stmt: statement_pb2.Statement) -> None:
    if stmt.WhichOneof("kind") != "insert":
        return
    rec = stmt.insert.records[rng.randrange(len(stmt.insert.records))]
    choice = rng.randrange(7)
    if choice == 0:
        rec.key_values[0].null_value = value_pb2.NULL_VALUE
    elif choice == 1 and len(rec.after_values):
        rec.after_values[0].int_value = 5
    elif choice == 2 and len(rec.after_values):
        rec.after_values[0].null_value = value_pb2.NULL_VALUE  # allowed in a value column
    elif choice == 3:
        rec.after_values.add(string_value="extra")
    elif choice == 4:
        del rec.key_values[:]
    elif choice == 5:
        rec.key_values[0].Clear()
    else:
        rec.key_values[0].string_value = "x"  # wrong case for an int key


def test_wire_check_matches_check_statements():
    rng = random.Random(5)
    checker = WireChecker()
    schemas: dict = {}
    check_statements([row_insert("t.a", {"id": 1}, {"name": "x", "n": 2})], schemas)
    created = check_statements([row_insert("t.a", {"id": 1}, {"name": "x", "n": 2}),
                                row_insert("t.b", {"k": "a"}, {"v": b"x"})], schemas)
    schemas = dict(created)
    for _ in range(600):
        stmts = []
        for _ in range(rng.choice([1, 1, 2])):
            if rng.random() < 0.5:
                s = row_insert("t.a", {"id": rng.randint(-9, 9)},
                               {"name": rng.choice(["", "é", "a\0b"]), "n": rng.randint(0, 9)})
                for _ in range(rng.randrange(3)):
                    s.insert.records.add().CopyFrom(s.insert.records[0])
            elif rng.random() < 0.8:
                s = row_insert("t.b", {"k": rng.choice(["", "k"])}, {"v": b"\0"})
            elif rng.random() < 0.5:
                s = row_insert("t.c", {"k": 1}, {"k": 2})  # key column among the values
            else:
                s = row_update("t.a", {"id": 1}, {"n": 3})
            if rng.random() < 0.3:
                _mutate(rng, s)
            stmts.append(s)
        want = _outcome(check_statements, stmts, schemas)
        got = _outcome(checker.check, frame_statements(stmts), stmts, schemas)
        assert got == want, stmts


@pytest.mark.parametrize("idem", ["", "key-é"])
def test_entries_from_serialized_statements_are_byte_identical(idem):
    rng = random.Random(9)
    for _ in range(200):
        stmts = [row_insert("t.a", {"id": rng.randint(-5, 5)}, {"name": "x" * rng.randrange(300)})
                 for _ in range(rng.randint(1, 3))]
        sid, tid = rng.choice([0, 1, 2**32 - 1]), rng.choice([0, 1, 2**64 - 1])
        epoch, author = rng.choice([0, 3 << 32 | 1]), rng.choice([0, 1, 2**32 - 1])
        start, commit = rng.choice([0, 2**64 - 1, 10**18]), rng.choice([0, 10**18 + 1])
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=sid, trans_id=tid), epoch=epoch, author=author,
            start_timestamp_ns=start, commit_timestamp_ns=commit, segment_id=1,
            end_segment=True, statements=stmts)
        assert encode_transaction_wire(sid, tid, epoch, author, start, commit,
                                       frame_statements(stmts), idem) == \
            encode_transaction(txn, idem)
