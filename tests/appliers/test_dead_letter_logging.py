"""Every dead letter is logged at warning level with what an operator needs (applier, table,
key, GTID, log index, error), rate-limited with a count of what was not logged."""

from __future__ import annotations

import logging

import pytest

from gateway.appliers.deadletter import DeadLetterLog
from gateway.core.ratelimit import LogRateLimiter
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2


def _op(i: int) -> RowOp:
    return RowOp(OpKind.UPSERT, TableRef("shop", "items"), (Column("id", 1),), (i,),
                 gtid=Gtid(7, 100 + i), log_index=40 + i)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "gateway.deadletter" and r.levelno == logging.WARNING]


def test_a_dead_letter_is_logged_with_table_key_gtid_and_error(tmp_path, caplog):
    letters = DeadLetterLog(tmp_path, "sqlite")
    with caplog.at_level(logging.WARNING):
        letter = letters.add(_op(3), ValueError("column 'x' has no type"), attempts=5)
    (line,) = _warnings(caplog)
    assert f"dead letter #{letter} of applier sqlite" in line
    assert "shop.items key (3,)" in line and "gtid 7:103" in line and "log index 43" in line
    assert "ValueError: column 'x' has no type" in line


def test_a_dead_lettered_transaction_names_its_gtid_tables_and_index(tmp_path, caplog):
    txn = transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=2, trans_id=9))
    txn.statements.add().insert.CopyFrom(statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="shop", table_name="orders")))
    with caplog.at_level(logging.WARNING):
        DeadLetterLog(tmp_path, "rabbit").add(txn, RuntimeError("bad segment"), attempts=0,
                                              log_index=77)
    (line,) = _warnings(caplog)
    assert "transaction gtid 2:9 (tables shop.orders) at log index 77" in line
    assert "RuntimeError: bad segment" in line


def test_a_flood_of_dead_letters_is_rate_limited_and_counted(tmp_path, caplog):
    letters = DeadLetterLog(tmp_path, "sqlite")
    with caplog.at_level(logging.WARNING):
        for i in range(50):
            letters.add(_op(i), ValueError("nope"), attempts=1)
    lines = _warnings(caplog)
    assert 10 <= len(lines) < 15  # the burst, then about one a second
    assert len(letters.letters()) == 50  # every letter is kept, only the log lines are limited
    assert "more dead letters of this applier not logged" not in "".join(lines[:10])


def test_the_next_logged_line_counts_the_suppressed_ones():
    now = [0.0]
    limiter = LogRateLimiter(burst=2, per_seconds=2.0, clock=lambda: now[0])
    assert limiter.admit() == (True, 0)
    assert limiter.admit() == (True, 0)
    assert limiter.admit() == (False, 0)
    assert limiter.admit() == (False, 0)
    now[0] += 1.0  # one token back
    assert limiter.admit() == (True, 2)
    assert limiter.admit() == (False, 0)


def test_rate_limiter_rejects_nonsense_settings():
    with pytest.raises(ValueError):
        LogRateLimiter(burst=0)
