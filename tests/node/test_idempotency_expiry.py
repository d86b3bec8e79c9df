"""Idempotency records expire after the window, deterministically: outcomes and stored bytes
depend only on the log, not on how entries are grouped into ``apply`` calls."""

from __future__ import annotations

import random

import pytest

from gateway.node.state import keys, state_machine
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

S = 10**9  # one second in ns
WINDOW = 10 * S


def _entry(index: int, commit_ts: int, key: str, row: int, *, fast: bool = True) -> Entry:
    """A one-row insert (``fast``) or delete (general path) with idempotency key ``key``."""
    table = statement_pb2.TableMetadata(schema_name="s", table_name="t")
    kf = [statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)]
    if fast:
        stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=table, key_fields=kf,
            fields=[statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_INTEGER)],
            records=[statement_pb2.InsertRecord(key_values=[value_pb2.Value(int_value=row)],
                                                after_values=[value_pb2.Value(int_value=index)])]))
    else:
        stmt = statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
            table=table, key_fields=kf,
            records=[statement_pb2.DeleteRecord(key_values=[value_pb2.Value(int_value=row)])]))
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=index), epoch=1 << 32 | 1, author=1,
        start_timestamp_ns=commit_ts, commit_timestamp_ns=commit_ts, segment_id=1,
        end_segment=True, statements=[stmt])
    return Entry(term=1, index=index, type=EntryType.NORMAL, data=encode_transaction(txn, key))


def _sm(path) -> StoreStateMachine:  # type: ignore[no-untyped-def]
    return StoreStateMachine(str(path), idempotency_window_ns=WINDOW)


def test_a_retry_inside_the_window_is_a_duplicate_and_after_it_a_new_write(tmp_path):
    sm = _sm(tmp_path / "a")
    t0 = 1_700_000_000 * S
    [first] = sm.apply([_entry(2, t0, "k", 1)])
    assert not first.result.duplicate
    [again] = sm.apply([_entry(3, t0 + WINDOW - 1, "k", 1)])
    assert again.result.duplicate and again.result.log_index == 2
    assert sm.skipped(3)
    assert sm.idempotent_result("k", t0 + WINDOW) is not None
    assert sm.idempotent_result("k", t0 + WINDOW + 1) is None  # the leader's view: expired
    # Past the window the same key is a new write with its own result.
    [late] = sm.apply([_entry(4, t0 + WINDOW + 1, "k", 1)])
    assert not late.result.duplicate and late.result.log_index == 4
    assert not sm.skipped(4)
    sm.close()


def test_expired_records_are_deleted_and_a_reused_key_keeps_its_new_record(tmp_path):
    sm = _sm(tmp_path / "b")
    t0 = 1_700_000_000 * S
    sm.apply([_entry(i, t0 + i * S // 10, f"key-{i}", i) for i in range(2, 12)])
    assert len(list(sm.store.scan_prefix(b"i"))) == 10
    assert len(list(sm.store.scan_prefix(b"j"))) == 10
    # key-2 reused after it expired: a new record, and the old index entry must not take the
    # new record with it when it is collected.
    [reused] = sm.apply([_entry(20, t0 + WINDOW + 3 * S, "key-2", 99)])
    assert not reused.result.duplicate
    # Index 20's bound (t0 + 3 s) took key-2..key-11's old records but not the new key-2.
    assert {k for k, _ in sm.store.scan_prefix(b"i")} == {b"ikey-2"}
    assert len(list(sm.store.scan_prefix(b"j"))) == 1
    sm.apply([_entry(21, t0 + 2 * WINDOW + 4 * S, "other", 100)])
    # Index 21's bound (t0 + W + 4 s) is past key-2's new record (t0 + W + 3 s) as well.
    assert {k for k, _ in sm.store.scan_prefix(b"i")} == {b"iother"}
    assert len(list(sm.store.scan_prefix(b"j"))) == 1
    sm.close()


def test_a_retry_is_a_duplicate_wherever_the_first_record_is_stored(tmp_path):
    """``apply`` probes a batch's keys at once and looks up only those the store holds: a
    retry is still caught with its first record in a table, in the memtable or earlier in
    the same batch, on the fast path and the general one."""
    sm = _sm(tmp_path / "w")
    t0 = 1_700_000_000 * S
    sm.apply([_entry(2, t0, "in-a-table", 1)])
    sm.store.flush()
    assert sm.store.stats()["levels"][0] == 1
    sm.apply([_entry(3, t0 + 1, "in-the-memtable", 2)])
    assert sm.unrecorded(["in-a-table", "in-the-memtable", "new", "new"]) == {"new"}
    got = sm.apply([
        _entry(4, t0 + 2, "fresh-1", 3),
        _entry(5, t0 + 3, "in-a-table", 1),
        _entry(6, t0 + 4, "fresh-2", 4),
        _entry(7, t0 + 5, "in-the-memtable", 2, fast=False),
        _entry(8, t0 + 6, "fresh-1", 3, fast=False),
        _entry(9, t0 + 7, "fresh-3", 5),
    ])
    assert [(a.index, a.result.duplicate, a.result.log_index) for a in got] == [
        (4, False, 4), (5, True, 2), (6, False, 6), (7, True, 3), (8, True, 4), (9, False, 9)]
    [again] = sm.apply([_entry(10, t0 + 8, "fresh-2", 4, fast=False)])
    assert again.result.duplicate and again.result.log_index == 6
    assert sm.unrecorded(["fresh-1", "fresh-2", "fresh-3", "in-a-table"]) == set()
    sm.close()


def test_expiry_does_not_depend_on_apply_batch_boundaries(tmp_path):
    rng = random.Random(5)
    t = 1_700_000_000 * S
    entries = []
    for index in range(2, 600):
        t += rng.choice([1, S // 3, S, 3 * S])
        key = rng.choice(["", f"k{rng.randint(0, 40)}"])
        entries.append(_entry(index, t, key, rng.randint(0, 50), fast=rng.random() < 0.8))
    stores = []
    outcomes = []
    for name, sizes in (("one", [len(entries)]), ("small", [1, 2, 3, 7]),
                        ("mixed", [50, 1, 13, 200])):
        sm = _sm(tmp_path / name)
        out = []
        i = 0
        while i < len(entries):
            n = rng.choice(sizes)
            for a in sm.apply(entries[i:i + n]):
                res = a.result
                out.append((a.index, res.log_index if res else None,
                            res.duplicate if res else None, str(a.error or "")))
            i += n
        outcomes.append(out)
        stores.append(list(sm.store.scan_prefix(b"")))
        sm.close()
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert stores[0] == stores[1] == stores[2]
    dups = sum(1 for o in outcomes[0] if o[2])
    fresh_reuse = sum(1 for o in outcomes[0] if o[2] is False and o[1] == o[0])
    assert dups > 10 and fresh_reuse > 100
    # Every live record is inside the window of the last commit (up to the 1 s grain).
    last = max(int.from_bytes(k[1:9], "big") for k, _ in stores[0] if k.startswith(b"j"))
    for k, _ in stores[0]:
        if k.startswith(b"j"):
            assert int.from_bytes(k[1:9], "big") >= last - WINDOW - S


@pytest.mark.parametrize("max_skips", [100_000, 5])
def test_skipped_between_names_exactly_the_entries_skipped_one_by_one(tmp_path, monkeypatch,
                                                                      max_skips):
    """From memory for entries applied since the store was opened (however many), from the
    store for older ones, across a reopen."""
    monkeypatch.setattr(state_machine, "_MAX_SKIPS", max_skips)
    rng = random.Random(11)
    t = 1_700_000_000 * S

    def fill(sm: StoreStateMachine, indexes: range) -> None:
        nonlocal t
        for index in indexes:
            t += rng.choice([1, S])
            sm.apply([_entry(index, t, f"k{rng.randint(0, 20)}", index)])

    def check(sm: StoreStateMachine, hi: int) -> None:
        one_by_one = {i for i in range(2, hi) if sm.skipped(i)}
        assert len(one_by_one) > 20
        assert sm.skipped_between(2, hi) == one_by_one
        assert sm.skipped_between(50, 250) == {i for i in one_by_one if 50 <= i < 250}
        assert sm.skipped_between(hi, hi + 100) == set()

    sm = _sm(tmp_path / "s")
    fill(sm, range(2, 200))
    check(sm, 200)
    sm.close()
    sm = _sm(tmp_path / "s")  # reopened: everything so far comes from the store
    check(sm, 200)
    fill(sm, range(200, 400))
    check(sm, 400)
    sm.close()


def test_without_idempotency_keys_expiry_never_scans_the_store(tmp_path, monkeypatch):
    """A store scan freezes a large active memtable (a flush per scan): expiry must not scan
    once a second when no record can be due."""
    sm = _sm(tmp_path / "n")
    scans = []
    real = sm.store.scan
    monkeypatch.setattr(sm.store, "scan", lambda *a: scans.append(a) or real(*a))
    t = 1_700_000_000 * S
    for index in range(2, 200):
        t += 2 * WINDOW // 100
        sm.apply([_entry(index, t, "", index)])
    assert scans == []
    # One record: scanned for once it is due, then not again until another is written.
    sm.apply([_entry(200, t, "k", 1)])
    for index in range(201, 260):
        t += 2 * WINDOW // 100
        sm.apply([_entry(index, t, "", index)])
    assert len(scans) == 1 and sm.idempotent_result("k", 0) is None
    assert list(sm.store.scan_prefix(b"i")) == list(sm.store.scan_prefix(b"j")) == []
    sm.close()


def test_records_written_before_a_reopen_still_expire(tmp_path):
    sm = _sm(tmp_path / "r")
    t0 = 1_700_000_000 * S
    sm.apply([_entry(i, t0 + i * S, f"key-{i}", i) for i in range(2, 6)])
    sm.close()
    sm = _sm(tmp_path / "r")
    sm.apply([_entry(6, t0 + WINDOW + 4 * S, "", 6)])  # past key-2 and key-3's window
    assert {k for k, _ in sm.store.scan_prefix(b"i")} == {b"ikey-4", b"ikey-5"}
    sm.close()


@pytest.mark.parametrize("key", ["", "k", "é/ü", "x" * 300])
def test_an_expiry_index_key_parses_back_and_sorts_by_commit_time(key):
    for ts in (0, 1, 2**40 + 7, 2**64 - 1):
        jk = keys.idempotency_expiry_key(ts, key)
        assert keys.parse_idempotency_expiry_key(jk) == (ts, keys.idempotency_key(key))
        assert jk.startswith(keys.IDEMPOTENCY_EXPIRY_PREFIX)
        assert keys.idempotency_expiry_bound(ts) <= jk
        if ts < 2**64 - 1:
            assert jk < keys.idempotency_expiry_bound(ts + 1)
