"""The leader's validation from wire bytes (``WireChecker``) gives the verdict and the error of
the full ``check_statements`` -- also for the values whose type has a rule (DOUBLE, UUID, DATE,
TIME, DATETIME on the wire path; DECIMAL, JSON through the full check) -- and entries assembled
from serialized statements are the bytes ``encode_transaction`` gives."""

from __future__ import annotations

import random

import pytest

from gateway.client import row_insert, row_update
from gateway.node.base.validation import InvalidRequest, check_statements
from gateway.node.state.wire import (
    WireChecker,
    encode_transaction,
    encode_transaction_wire,
    frame_statements,
)
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
V = value_pb2.Value


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


#: A table with a column of every type whose values have a rule, and per column the values
#: the random statements draw from (valid and invalid).
_TYPED_KEY = [("k", FT.FIELD_TYPE_DOUBLE)]
_TYPED_COLS = [("d", FT.FIELD_TYPE_DOUBLE), ("u", FT.FIELD_TYPE_UUID), ("dt", FT.FIELD_TYPE_DATE),
               ("tm", FT.FIELD_TYPE_TIME), ("ts", FT.FIELD_TYPE_DATETIME)]
#: Types whose rules only the full check applies (a table with them never takes the wire path).
_TEXT_COLS = [("j", FT.FIELD_TYPE_JSON), ("m", FT.FIELD_TYPE_DECIMAL)]
_DRAWS = {
    "k": [V(double_value=1.5), V(double_value=0.0), V(double_value=-0.0),
          V(double_value=float("nan")), V(double_value=float("inf")), V(int_value=1)],
    "d": [V(double_value=2.0), V(double_value=-0.0), V(double_value=float("nan")),
          V(double_value=float("-inf")), V(null_value=value_pb2.NULL_VALUE)],
    "u": [V(bytes_value=bytes(16)), V(bytes_value=bytes(15)), V(bytes_value=bytes(17)),
          V(bytes_value=b""), V(null_value=value_pb2.NULL_VALUE)],
    "dt": [V(string_value="2024-02-29"), V(string_value="2023-02-29"),
           V(string_value="2024-13-45"), V(string_value="2024-1-1"), V(string_value="")],
    "tm": [V(string_value="23:59:59.5"), V(string_value="24:00:00"),
           V(string_value="12:00:00."), V(string_value="12:00:00.1234567890")],
    "ts": [V(string_value="2024-01-01T00:00:00"), V(string_value="2024-01-01 00:00:00"),
           V(string_value="2024-01-01T00:00:60"), V(string_value="2024-01-01Tx")],
    "j": [V(string_value='{"a": 1}'), V(string_value="{bad"), V(string_value="NaN")],
    "m": [V(decimal_value="-12.50"), V(decimal_value="1e5"), V(decimal_value="-0")],
}


def _typed_insert(rng: random.Random, cols: list = _TYPED_COLS, table: str = "typed",
                  valid: bool = False) -> statement_pb2.Statement:
    body = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="t", table_name=table),
        key_fields=[statement_pb2.FieldMetadata(name=n, type=t) for n, t in _TYPED_KEY],
        fields=[statement_pb2.FieldMetadata(name=n, type=t) for n, t in cols])
    for _ in range(1 if valid else rng.randint(1, 3)):
        rec = body.records.add()
        rec.key_values.append(_DRAWS["k"][0] if valid else rng.choice(_DRAWS["k"][:2])
                              if rng.random() < 0.7 else rng.choice(_DRAWS["k"]))
        for n, _ in cols:  # mostly valid, so that valid records take the wire path
            rec.after_values.append(_DRAWS[n][0] if valid or rng.random() < 0.8
                                    else rng.choice(_DRAWS[n]))
    return statement_pb2.Statement(insert=body)


def test_wire_check_matches_check_statements_on_typed_values():
    rng = random.Random(11)
    checker = WireChecker()
    firsts = [_typed_insert(rng, valid=True),
              _typed_insert(rng, _TEXT_COLS, "textual", valid=True)]
    schemas = dict(check_statements(firsts, {}))
    fast = 0
    for _ in range(800):
        stmts = [_typed_insert(rng)] if rng.random() < 0.7 else \
            [_typed_insert(rng, _TEXT_COLS, "textual")]
        want = _outcome(check_statements, stmts, schemas)
        got = _outcome(checker.check, frame_statements(stmts), stmts, schemas)
        assert got == want, stmts
        fast += checker._fast(frame_statements(stmts), schemas) is not None
    assert fast > 50  # the valid records of known shape did take the wire path


def test_wire_check_refuses_what_the_full_check_refuses_after_learning_the_shape():
    checker = WireChecker()
    good = _typed_insert(random.Random(0), valid=True)
    schemas = dict(check_statements([good], {}))
    checker.check(frame_statements([good]), [good], schemas)  # learns the shape
    assert checker._fast(frame_statements([good]), schemas) is not None
    for col, bad in [(None, V(double_value=float("nan"))), (None, V(double_value=-0.0)),
                     (0, V(double_value=float("nan"))), (1, V(bytes_value=bytes(15))),
                     (2, V(string_value="2024-13-45")), (3, V(string_value="24:00:00")),
                     (4, V(string_value="2024-01-01 00:00:00"))]:
        s = statement_pb2.Statement()
        s.CopyFrom(good)
        target = s.insert.records[0].key_values[0] if col is None \
            else s.insert.records[0].after_values[col]
        target.CopyFrom(bad)
        assert checker._fast(frame_statements([s]), schemas) is None
        with pytest.raises(InvalidRequest):
            checker.check(frame_statements([s]), [s], schemas)


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


def test_a_shape_learned_against_a_replaced_schema_object_is_learned_again(monkeypatch):
    """Two requests that create the same table concurrently give two equal schema objects;
    the leader keeps the later. The shape learned with the earlier one must not send every
    later write of that shape to the full check for good."""
    from gateway.node.state import wire
    full = []
    real = wire.check_statements

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        full.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(wire, "check_statements", counting)
    stmts = [row_insert("t.a", {"id": 1}, {"name": "x"})]
    raw = frame_statements(stmts)
    first = dict(real(stmts, {}))  # the schema the first creating request made
    second = dict(real(stmts, {}))  # an equal one, made by a concurrent request
    assert first["t.a"] is not second["t.a"]
    checker = WireChecker()
    assert checker.check(raw, stmts, first) == []  # checked in full, shape learned
    assert checker.check(raw, stmts, first) == [] and len(full) == 1  # from the bytes
    assert checker.check(raw, stmts, second) == [] and len(full) == 2  # schema replaced
    for _ in range(3):
        assert checker.check(raw, stmts, second) == []
    assert len(full) == 2  # learned again: from the bytes, not the full check each time
