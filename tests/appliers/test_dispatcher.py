"""The dispatcher: parallel apply equals sequential apply, per-row order, CutHead positions,
restarts, retries, dead letters, barriers, backpressure and metrics."""

from __future__ import annotations

import random
import threading

import pytest

from gateway.appliers.contract import Capabilities, StoreUnavailableError, TransientApplyError
from gateway.appliers.dispatcher import (
    LAG_PROBE,
    Dispatcher,
    DispatcherConfig,
    partition_of,
    probe_commit_ns,
)
from gateway.appliers.source import MemorySource
from gateway.appliers.workers import RetryPolicy
from gateway.core import records
from gateway.core.rowops import Gtid, OpKind, statement_ops
from tests.appliers.fakes import ModelApplier
from tests.reducer.model import apply_all, delete, insert, sql, txn, update

FAST = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.002)


def workload(seed: int, n: int = 120, keys: int = 25, with_sql: bool = True) -> list:
    """Transactions as a master commits them: inserts of absent keys, updates and deletes of
    present ones, each transaction touching a few hot rows repeatedly."""
    rng = random.Random(seed)
    live: set[int] = set()
    txns = []
    for t in range(1, n + 1):
        stmts = []
        for _ in range(rng.randint(1, 6)):
            k, r = rng.randrange(keys), rng.random()
            if k not in live:
                stmts.append(insert("t", [{"id": k, "a": t, "b": f"v{t}"}]))
                live.add(k)
            elif r < 0.75:
                stmts.append(update("t", ["a"], [(k, [t])]))
            elif r < 0.97 or not with_sql:
                stmts.append(delete("t", [k]))
                live.discard(k)
            else:
                stmts.append(sql(f"-- {t}"))
        txns.append(txn(t, *stmts, commit_ts_ns=t))
    return txns


def sequential(txns: list) -> dict:
    ops = [op for i, t in enumerate(txns, 1) for op in statement_ops(t, i)]
    return apply_all({}, ops)


def config(**kw) -> DispatcherConfig:
    kw.setdefault("retry", FAST)
    kw.setdefault("save_interval", 0.0)
    return DispatcherConfig(**kw)


@pytest.mark.parametrize("threads", [1, 4, 8])
def test_parallel_reduced_apply_reaches_the_sequential_state_in_row_order(tmp_path, threads):
    txns = workload(threads)
    applier = ModelApplier()
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=threads))
    position = d.run()
    store, trace = sequential(txns)
    assert applier.store == store
    assert applier.trace == trace  # the state at every SQL barrier matches too
    for row, seen in applier.history.items():
        assert seen == sorted(seen), f"row {row} applied out of order"
    assert not applier.overlap  # no row was ever in two concurrent batches
    assert position.log_index == len(txns)
    assert position.applied == d.positions.load().applied
    assert list(position.applied.ranges()) == [(1, 1, len(txns))]


def test_window_mode_reaches_the_same_state_with_fewer_operations(tmp_path):
    txns = workload(5, with_sql=False)
    single, window = ModelApplier(), ModelApplier()
    d1 = Dispatcher(single, MemorySource(txns), tmp_path / "a", config=config())
    d2 = Dispatcher(window, MemorySource(txns), tmp_path / "b", config=config(window=16))
    d1.run()
    d2.run()
    assert single.store == window.store == sequential(txns)[0]
    assert d2.metrics.ops_out < d1.metrics.ops_out < d1.metrics.ops_in


def test_unreduced_mode_hands_over_every_record(tmp_path):
    txns = workload(6, with_sql=False)
    applier = ModelApplier()
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(reduce=False))
    d.run()
    total = sum(len(statement_ops(t)) for t in txns)
    assert d.metrics.applied_ops == d.metrics.ops_in == d.metrics.ops_out == total
    assert applier.store == sequential(txns)[0]


@pytest.mark.parametrize("seed", range(12))
def test_a_restart_from_any_saved_position_never_skips_or_reorders_a_row(tmp_path, seed):
    """Stop after a random number of batches, fall back to a random earlier saved position
    (a crash before the later saves), restart: the store must end as the sequential one."""
    rng = random.Random(seed)
    txns = workload(100 + seed, n=80)
    source = MemorySource(txns)
    applier = ModelApplier()
    stop_after = rng.randint(1, 40)
    d = Dispatcher(applier, source, tmp_path, config=config(threads=4, window=rng.choice(
        [1, 1, 3])))
    original_apply = applier.apply

    def apply_then_crash(ops):
        original_apply(ops)
        if applier.calls >= stop_after:
            d.stop()

    applier.apply = apply_then_crash  # type: ignore[method-assign]
    d.run()
    data = d.positions.path.read_bytes()
    saved = list(records.scan(data))
    keep = rng.randint(0, len(saved))
    d.positions.path.write_bytes(data[: saved[keep - 1].end + 2] if keep else b"")
    applier.apply = original_apply  # type: ignore[method-assign]
    d2 = Dispatcher(applier, source, tmp_path, config=config(threads=4))
    d2.run()
    assert applier.store == sequential(txns)[0]
    assert d2.position.log_index == len(txns)


def test_transient_errors_are_retried_with_backoff(tmp_path):
    def flaky(op, attempt):
        if attempt <= 2:
            raise TransientApplyError("store busy")

    applier = ModelApplier(fail=flaky)
    txns = workload(7, n=20, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path,
                   config=config(retry=RetryPolicy(4, 0.001, 2.0, 0.002)))
    d.run()
    assert applier.store == sequential(txns)[0]
    assert d.metrics.retries >= 2 and d.metrics.dead_letters == 0


def test_backoff_grows_exponentially_and_is_capped():
    policy = RetryPolicy(max_attempts=6, initial_backoff=0.1, multiplier=2.0, max_backoff=0.5)
    assert [policy.delay(a) for a in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_a_poison_operation_is_dead_lettered_and_its_neighbours_applied(tmp_path):
    seen = []

    def poison(op, attempt):
        if op.key == (3,):
            raise ValueError("constraint violated for id 3")

    applier = ModelApplier(fail=poison, capabilities=Capabilities(accepts_sql=True,
                                                                   max_batch=50))
    txns = [txn(1, insert("t", [{"id": k, "a": k} for k in range(8)]))]
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=1),
                   on_dead_letter=lambda *a: seen.append(a))
    position = d.run()
    assert sorted(k for (_, k) in applier.store) == [(k,) for k in range(8) if k != 3]
    (letter,) = d.dead_letters.letters()
    op = letter.operation()
    assert op.key == (3,) and op.gtid == Gtid(1, 1) and op.log_index == 1
    assert letter.message.error_type == "ValueError" and letter.message.attempts == 1
    assert "id 3" in letter.message.error
    assert d.metrics.dead_letters == 1 and seen[0][:2] == ("model", 1)
    assert position.log_index == 1  # a dead-lettered operation counts as done, not lost


def test_exhausted_transient_retries_dead_letter_after_max_attempts(tmp_path):
    def down(op, attempt):
        if op.key == (2,):
            raise TransientApplyError("timeout")

    applier = ModelApplier(fail=down)
    d = Dispatcher(applier, MemorySource([txn(1, insert("t", [{"id": 1}, {"id": 2}]))]),
                   tmp_path, config=config())
    d.run()
    (letter,) = d.dead_letters.letters()
    assert letter.message.attempts == FAST.max_attempts
    assert letter.message.error_type == "TransientApplyError"


def test_an_unavailable_store_is_retried_until_it_returns_never_dead_lettered(tmp_path):
    """A store that cannot be reached (``StoreUnavailableError``, or a ``ConnectionError``)
    is not the batch's fault: the dispatcher retries far past ``max_attempts`` while the
    metrics show it unavailable with the error, and applies everything once it returns."""
    down = threading.Event()
    down.set()
    seen: list[tuple[int, str]] = []

    def unreachable(op, attempt):
        if down.is_set():
            m = d.metrics
            seen.append((m.unavailable, m.unavailable_error()))
            if attempt >= 3 * FAST.max_attempts:
                down.clear()  # the store comes back
            if attempt % 2:
                raise StoreUnavailableError("cannot connect to store://10.0.0.9:1: refused")
            raise ConnectionRefusedError(111, "Connection refused")

    applier = ModelApplier(fail=unreachable)
    txns = workload(3, n=10, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=1))
    d.run()
    assert applier.store == sequential(txns)[0]
    assert d.metrics.dead_letters == 0 and d.metrics.retries >= 3 * FAST.max_attempts - 1
    assert any(u == 1 and "10.0.0.9:1" in e for u, e in seen)
    assert any(u == 1 and "ConnectionRefusedError" in e for u, e in seen)
    assert d.metrics.unavailable == 0 and d.metrics.unavailable_error() == ""


def test_sql_for_an_applier_without_sql_goes_to_the_dead_letter_log(tmp_path):
    applier = ModelApplier(capabilities=Capabilities(accepts_sql=False))
    d = Dispatcher(applier, MemorySource([txn(1, insert("t", [{"id": 1}]), sql("DROP x"))]),
                   tmp_path, config=config())
    d.run()
    (letter,) = d.dead_letters.letters()
    assert letter.operation().kind is OpKind.SQL
    assert letter.message.error_type == "UnsupportedOperationError"
    assert applier.store == {(("s", "t"), (1,)): {}}


def test_a_malformed_transaction_is_dead_lettered_whole_and_later_ones_applied(tmp_path):
    bad = txn(1, insert("t", [{"id": 1, "a": 1}]))
    bad.statements[0].insert.records[0].after_values.pop()
    good = txn(2, insert("t", [{"id": 2, "a": 2}]))
    applier = ModelApplier()
    d = Dispatcher(applier, MemorySource([bad, good]), tmp_path, config=config())
    position = d.run()
    (letter,) = d.dead_letters.letters()
    assert letter.transaction() == bad and letter.message.log_index == 1
    assert "0 values for 1 fields" in letter.message.error
    assert list(applier.store) == [(("s", "t"), (2,))]
    assert position.log_index == 2


def test_an_incomplete_segmented_transaction_holds_the_watermark(tmp_path):
    seg1 = txn(1, insert("t", [{"id": 1, "a": 1}]), end_segment=False)
    other = txn(2, insert("t", [{"id": 2, "a": 2}]))
    source = MemorySource([seg1, other])
    applier = ModelApplier()
    d = Dispatcher(applier, source, tmp_path, config=config())
    position = d.run()
    assert position.log_index == 0 and Gtid(1, 2) in position.applied
    assert list(applier.store) == [(("s", "t"), (2,))]
    source.append(txn(1, update("t", ["a"], [(1, [5])]), segment_id=2))
    d2 = Dispatcher(applier, source, tmp_path, config=config())
    position = d2.run()
    assert position.log_index == 3 and d2.metrics.skipped == 1  # (1,2) was not re-applied
    assert applier.store[(("s", "t"), (1,))] == {"a": 5}


def test_a_rolled_back_transaction_is_discarded(tmp_path):
    txns = [txn(1, insert("t", [{"id": 1}]), end_segment=False),
            txn(1, insert("t", [{"id": 2}]), segment_id=2, rollback=True)]
    applier = ModelApplier()
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config())
    assert d.run().log_index == 2
    assert applier.store == {} and d.metrics.rolled_back == 1


def test_a_second_run_applies_nothing_already_applied(tmp_path):
    txns = workload(8, n=30)
    applier = ModelApplier()
    Dispatcher(applier, MemorySource(txns), tmp_path, config=config()).run()
    calls = applier.calls
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config())
    d.run()
    assert applier.calls == calls and d.metrics.entries_read == 0


def test_bounded_queues_block_the_reader_instead_of_growing(tmp_path):
    depth = []
    gate = threading.Event()

    class Slow(ModelApplier):
        def apply(self, ops):
            gate.wait(0.002)
            depth.append(max(w.queue.qsize() for w in d._workers))
            super().apply(ops)

    applier = Slow(capabilities=Capabilities(max_batch=1))
    d = Dispatcher(applier, MemorySource(workload(9, n=60, with_sql=False)), tmp_path,
                   config=config(threads=2, queue_size=3))
    d.run()
    assert max(depth) <= 3


def _follow(d: Dispatcher) -> threading.Event:
    """Start ``d.run(follow=True)`` on a thread; the event is set when it returns."""
    done = threading.Event()
    threading.Thread(target=lambda: (d.run(follow=True), done.set()), daemon=True).start()
    return done


def _applied_soon(d: Dispatcher, index: int) -> bool:
    """Whether ``d`` applies through ``index`` within 10 s -- far less than the poll
    intervals and lingers of the tests below, so True means it did not wait for them."""
    for _ in range(1000):
        if d.position.log_index >= index:
            return True
        threading.Event().wait(0.01)
    return False


def test_a_following_run_reads_announced_entries_without_waiting_for_its_poll(tmp_path):
    """``notify`` wakes a caught-up ``run(follow=True)``: with a two-minute poll interval,
    announced entries are applied at once and ``stop`` ends the run at once."""
    source = MemorySource(workload(3, n=5, with_sql=False))
    applier = ModelApplier()
    d = Dispatcher(applier, source, tmp_path, config=config(poll_interval=120.0))
    done = _follow(d)
    assert _applied_soon(d, 5)
    for t in range(6, 9):  # one at a time, the run idle in between
        source.append(txn(t, insert("t", [{"id": 100 + t, "a": t}]), commit_ts_ns=t))
        d.notify()
        assert _applied_soon(d, t), f"entry {t} waited for the poll"
    assert {"a": 8} in applier.store.values()
    d.stop()
    assert done.wait(10)


def test_after_catching_up_a_following_run_lingers_so_a_trickle_is_applied_together(tmp_path):
    """An idle run applies an announced entry at once, then waits ``linger`` before reading
    again: entries announced meanwhile one by one reach the applier as one batch, not one
    call each (a store commit per log append)."""
    source = MemorySource([])
    applier = ModelApplier()
    # window=16: a read's transactions go to the applier as one unit -- one call -- however
    # the worker thread is scheduled (with one-transaction windows a worker that wakes between
    # them makes two calls of one read under load).
    d = Dispatcher(applier, source, tmp_path,
                   config=config(poll_interval=120.0, linger=5.0, threads=1, window=16))
    done = _follow(d)
    source.append(txn(1, insert("t", [{"id": 1, "a": 1}]), commit_ts_ns=1))
    d.notify()
    assert _applied_soon(d, 1)  # at once, though the poll interval is two minutes
    calls = applier.calls
    for t in range(2, 6):  # 50 ms apart, inside the linger that reading entry 1 began
        threading.Event().wait(0.05)
        source.append(txn(t, insert("t", [{"id": t, "a": t}]), commit_ts_ns=t))
        d.notify()
    assert _applied_soon(d, 5)
    assert applier.calls == calls + 1
    d.stop()
    assert done.wait(10)


def test_an_entry_appended_while_the_position_is_saved_still_gathers_in_the_linger(tmp_path):
    """Whether a run caught up is judged by its read: an entry appended after that read --
    here while the position is saved, which a busy disk's fsync makes slow -- waits out the
    linger with the ones after it instead of being read alone at once."""
    source = MemorySource([])
    applier = ModelApplier()
    d = Dispatcher(applier, source, tmp_path,  # window=16: one call per read (test above)
                   config=config(poll_interval=120.0, linger=5.0, threads=1, window=16))
    saving = threading.Event()
    read_entry_1 = threading.Event()
    save, read = d.positions.save, source.read

    def noting_read(start, count):
        got = read(start, count)
        if got and got[-1].index == 1:
            read_entry_1.set()
        return got

    def slow_save(position):  # the first save after the run read entry 1 alone is slow
        if read_entry_1.is_set() and source.last_index() == 1 and not saving.is_set():
            saving.set()
            threading.Event().wait(0.5)
        save(position)

    source.read = noting_read
    d.positions.save = slow_save
    done = _follow(d)
    source.append(txn(1, insert("t", [{"id": 1, "a": 1}]), commit_ts_ns=1))
    d.notify()
    assert saving.wait(10)  # the run read entry 1 and is saving
    for t, gap in ((2, 0.1), (3, 0.5), (4, 0.05)):  # 2 during that save, 3 and 4 after it
        threading.Event().wait(gap)
        source.append(txn(t, insert("t", [{"id": t, "a": t}]), commit_ts_ns=t))
        d.notify()
    assert _applied_soon(d, 4)
    assert applier.calls == 2
    d.stop()
    assert done.wait(10)


def test_entries_without_transactions_do_not_make_a_following_run_linger(tmp_path):
    """The node's own entries (epoch markers, positions) give the applier nothing: reading
    them must not delay the next write by ``linger``."""
    source = MemorySource([])
    d = Dispatcher(ModelApplier(), source, tmp_path,
                   config=config(poll_interval=120.0, linger=60.0, threads=1))
    done = _follow(d)
    for index, item in enumerate([None, None, txn(3, insert("t", [{"id": 1, "a": 1}]),
                                                  commit_ts_ns=3)], 1):
        source.append(item)
        d.notify()
        assert _applied_soon(d, index), f"entry {index} waited"
    d.stop()
    assert done.wait(10)


def test_metrics_count_reduction_lag_and_are_published(tmp_path):
    published = []
    txns = [txn(1, insert("t", [{"id": 1, "a": 1}]), update("t", ["a"], [(1, [2])]))]
    d = Dispatcher(ModelApplier(), MemorySource(txns), tmp_path, config=config(),
                   publish_metrics=lambda s, m: published.append((s, m)))
    d.run()
    snap = d.metrics.snapshot()
    assert (snap["ops_in"], snap["ops_out"], snap["applied_ops"]) == (2, 1, 1)
    assert snap["lag_entries"] == 0 and snap["lag_seconds"] == 0 and snap["watermark"] == 1
    assert published[-1] == ("model", snap)


def test_lag_counts_committed_entries_not_yet_applied(tmp_path):
    source = MemorySource(workload(10, n=10, with_sql=False))
    d = Dispatcher(ModelApplier(), source, tmp_path, config=config())
    d.run(max_index=4)
    assert d.metrics.lag_entries == 6 and d.metrics.watermark == 4
    assert d.metrics.lag_seconds > 0  # commit timestamps of the workload are in 1970


def test_lag_seconds_counts_from_the_first_transaction_behind_entries_without_one(tmp_path):
    """Entries that hold no transaction (epoch markers, configuration) before the next
    transaction must not make a lagging applier read 0 seconds."""
    first = txn(1, insert("t", [{"id": 1, "a": 1}]))
    later = txn(2, insert("t", [{"id": 2, "a": 1}]), commit_ts_ns=5)
    source = MemorySource([first, None, None, later])
    d = Dispatcher(ModelApplier(), source, tmp_path, config=config())
    d.run(max_index=1)
    assert d.metrics.lag_entries == 3 and d.metrics.watermark == 1
    assert d.metrics.lag_seconds > 0  # entry 4's commit time is in 1970


def test_the_lag_probe_reads_only_up_to_the_first_transaction(tmp_path):
    """The lag's probe of unread entries reads them one at a time and stops at the first
    holding a transaction: a replicated epoch's entry is parsed when read, and reading
    ``LAG_PROBE`` at once parsed up to 64 epochs at every tick for one timestamp."""
    later = txn(2, insert("t", [{"id": 2, "a": 1}]), commit_ts_ns=5)
    entries = [None, None, later] + [txn(n, insert("t", [{"id": n}])) for n in range(3, 80)]
    source = MemorySource(entries)
    asked: list[tuple[int, int]] = []
    real = source.read

    def read(from_index: int, max_entries: int) -> list:
        asked.append((from_index, max_entries))
        return real(from_index, max_entries)

    source.read = read  # type: ignore[method-assign]
    assert probe_commit_ns(source, 1) == 5
    assert asked == [(1, 1), (2, 1), (3, 1)]
    asked.clear()
    assert probe_commit_ns(MemorySource([None] * (LAG_PROBE + 1) + [later]), 1) is None
    assert probe_commit_ns(source, len(entries) + 1) is None  # nothing there yet
    assert asked == [(len(entries) + 1, 1)]


def test_a_non_idempotent_applier_gets_its_position_saved_after_every_transaction(tmp_path):
    txns = [txn(n, insert("t", [{"id": n}])) for n in range(1, 6)]
    applier = ModelApplier(capabilities=Capabilities(idempotent=False, max_batch=1))
    d = Dispatcher(applier, MemorySource(txns), tmp_path,
                   config=config(save_interval=3600, threads=1))
    d.run()
    saved = list(records.scan(d.positions.path.read_bytes()))
    assert len(saved) >= len(txns)


def test_partition_is_a_stable_function_of_table_and_key():
    (a,) = statement_ops(txn(1, update("t", ["a"], [(7, [1])])))
    (b,) = statement_ops(txn(9, delete("t", [7])))
    assert partition_of(a, 8) == partition_of(b, 8)
    assert partition_of(a, 8) == 1  # crc32 of the row id: the same in every process


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="threads"):
        DispatcherConfig(threads=0)
    with pytest.raises(ValueError, match="max_batch"):
        Capabilities(max_batch=0)
    with pytest.raises(ValueError, match="linger"):
        DispatcherConfig(linger=-1)


def test_a_later_transaction_on_a_row_is_not_recorded_before_an_earlier_one_completes(tmp_path):
    """T1 updates rows r and s, T2 updates r again. s is stuck on its worker while r's two
    updates are applied; a crash then must not leave T2 recorded (skipped on restart) while
    T1 is replayed over it: that would reorder row r."""
    def part(k):
        (op,) = statement_ops(txn(1, update("t", ["a"], [(k, [0])])))
        return partition_of(op, 2)

    r = 0
    s = next(k for k in range(1, 50) if part(k) != part(r))
    stuck = threading.Event()
    r_done = threading.Event()

    class Stuck(ModelApplier):
        def apply(self, ops):
            if any(op.key == (s,) for op in ops) and not stuck.is_set():
                stuck.wait(5)
                raise TransientApplyError("stuck")  # abandoned by stop()
            super().apply(ops)
            if len(self.history.get((("s", "t"), (r,)), [])) == 3:  # insert + 2 updates
                r_done.set()

    txns = [txn(1, insert("t", [{"id": r, "a": 0}, {"id": s, "a": 0}])),
            txn(2, update("t", ["a"], [(r, [1]), (s, [1])])),
            txn(3, update("t", ["a"], [(r, [2])]))]
    applier = Stuck(capabilities=Capabilities(accepts_sql=True, max_batch=1))
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=2))
    runner = threading.Thread(target=d.run)
    runner.start()
    assert r_done.wait(5)
    d.stop()
    stuck.set()
    runner.join()
    saved = d.positions.load()
    assert Gtid(1, 3) not in saved.applied  # it depends on (1,2), which is incomplete
    Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=2)).run()
    assert applier.store[(("s", "t"), (r,))] == {"a": 2}
    assert applier.store[(("s", "t"), (s,))] == {"a": 1}


class _EntriesSource:
    """Given ``CommittedEntry``s (replicated epochs included), read in fixed-size batches."""

    def __init__(self, entries: list) -> None:
        self.entries = entries

    def read(self, from_index: int, max_entries: int) -> list:
        return self.entries[from_index - 1:from_index - 1 + max_entries]

    def last_index(self) -> int:
        return len(self.entries)


@pytest.mark.parametrize("read_batch", [1, 3, 64])
@pytest.mark.parametrize("columns", [False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_a_read_batch_mixing_every_kind_of_entry_applies_as_entry_by_entry(
        tmp_path, read_batch, columns, lazy):
    """Empty entries, a transaction already applied, segments interleaved with whole
    transactions, a rollback and replicated epochs in one read batch: the store, the counters
    and the position are those of reading one entry at a time -- with the transactions parsed
    by the source, or (``lazy``) read as the node's source reads them: whole ones admitted
    from their head and bytes, their message parsed only if something needs it."""
    from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore
    from gateway.appliers.source import CommittedEntry, WireTransactions
    from gateway.node.appliers.feed import transaction_entry
    from gateway.node.appliers.feed_wire import unit_wires
    from gateway.v1 import replication_pb2

    def entry(i: int, x):  # type: ignore[no-untyped-def]
        if x is None or not lazy:
            return CommittedEntry(i, x)
        got = transaction_entry(i, b"\x01" + x.SerializeToString())
        assert (got.head is not None) == (x.segment_id == 1 and x.end_segment
                                          and not x.HasField("rollback"))
        return got

    def entries() -> list:
        t = [txn(1, insert("t", [{"id": 1, "a": 1}])),                     # 1, applied before
             None,                                                          # 2
             txn(2, insert("t", [{"id": 2, "a": 2}]), end_segment=False),  # 3
             txn(3, insert("t", [{"id": 3, "a": 3}])),                     # 4
             txn(2, update("t", ["a"], [(2, [20])]), segment_id=2),        # 5
             txn(4, insert("t", [{"id": 4}]), rollback=True),              # 6, rolled back
             None,                                                          # 7: replicated
             txn(5, insert("t", [{"id": 5, "a": 5}])),                     # 8
             txn(6, insert("t", [{"id": 6, "a": 6}]))]                     # 9
        out = [entry(i, x) for i, x in enumerate(t, 1)]
        rep = (txn(7, insert("t", [{"id": 7, "a": 7}])), txn(1, update("t", ["a"], [(3, [9])])))
        for r in rep:
            r.gtid.server_id = 2
        out[6] = CommittedEntry(7, None, rep)
        if lazy:  # as the node's source reads an epoch: its transactions' bytes, unparsed
            unit = replication_pb2.ReplicatedEpoch(items=[
                replication_pb2.ReplicatedItem(transaction=r) for r in rep],
                segment_id=1, end_segment=True)
            wires = unit_wires(7, unit.SerializeToString(), 0)
            assert isinstance(wires, WireTransactions) and wires == rep
            out[6] = CommittedEntry(7, None, wires)
        return out

    caps = Capabilities(columns=True) if columns else Capabilities()
    applier = ModelApplier(capabilities=caps)
    PositionStore(tmp_path, applier.name).save(ApplierPosition(0, GtidSet([Gtid(1, 1)])))
    d = Dispatcher(applier, _EntriesSource(entries()), tmp_path,
                   config=config(read_batch=read_batch))
    position = d.run()
    assert position.log_index == 9
    assert {k[1][0]: v.get("a") for k, v in applier.store.items()} == {
        2: 20, 3: 9, 5: 5, 6: 6, 7: 7}
    snap = d.metrics.snapshot()
    assert (snap["entries_read"], snap["skipped"], snap["rolled_back"]) == (9, 1, 1)
    assert all(Gtid(1, t) in position.applied for t in (1, 2, 3, 5, 6))
    assert Gtid(1, 4) not in position.applied and Gtid(2, 7) in position.applied
