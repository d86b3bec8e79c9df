"""The leader's bookkeeping (``gateway.node.loop.sequencer``): one named test per rule, with time
passed in -- no node, no event loop, no clock."""

from __future__ import annotations

import pytest

from gateway.node.base.validation import TableSchema
from gateway.node.loop.sequencer import Seal, Sequencer, Stamp

TERM = 3
EPOCH_S = 0.125  # binary fractions: epoch boundaries fall exactly
T0 = 64.0  # monotonic seconds at the take-over
NOW = 1_700_000_000_000_000_000  # wall-clock ns


def _seq(trans: int = 0, ts: int = 0, pending: list[tuple[int, int]] | None = None,
         inherited: tuple[int, int] = (0, 0)) -> Sequencer:
    s = Sequencer.take_over(TERM, T0, EPOCH_S, trans, ts, pending or [], inherited)
    s.open_at(T0)
    return s


def _schema(column: str) -> TableSchema:
    return TableSchema((("id", 3),), {"id": 3, column: 9})


# -- leader change --------------------------------------------------------------------------------


def test_a_new_leader_continues_after_the_stores_last_trans_id() -> None:
    s = _seq(trans=41, ts=NOW)
    assert s.next_trans_id == 42
    assert s.stamp(NOW - 5).trans_id == 42


def test_a_new_leader_continues_after_trans_ids_in_its_log_not_yet_applied() -> None:
    s = _seq(trans=41, ts=NOW, pending=[(0, 0), (57, NOW + 9), (50, NOW + 3), (0, 0)])
    assert s.next_trans_id == 58
    assert s.last_commit_ts == NOW + 9


def test_a_new_leader_commits_after_the_newest_commit_time_in_its_log() -> None:
    s = _seq(trans=1, ts=NOW + 1000, pending=[(2, NOW + 2000)])
    assert s.stamp(NOW).commit_ts == NOW + 2001


def test_a_new_leader_counts_its_epochs_from_one_in_its_term() -> None:
    s = _seq()
    assert s.epoch_at(T0) == (TERM << 32) | 1
    assert s.epoch_at(T0 + 2.5 * EPOCH_S) == (TERM << 32) | 3
    assert s.open_epoch == (TERM << 32) | 1


def test_a_new_leader_seals_the_epoch_an_earlier_one_left_open_first() -> None:
    s = _seq(inherited=((2 << 32) | 7, 40))
    assert s.inherited_seal() == Seal((2 << 32) | 7, 40)
    s.inherited_sealed()
    assert s.inherited_seal() is None


def test_a_new_leader_with_nothing_inherited_has_no_inherited_seal() -> None:
    assert _seq().inherited_seal() is None


# -- stamps ---------------------------------------------------------------------------------------


def test_stamps_hand_out_consecutive_trans_ids_in_the_open_epoch() -> None:
    s = _seq(trans=9)
    got = [s.stamp(NOW + i) for i in range(3)]
    assert got == [Stamp(10, s.open_epoch, NOW), Stamp(11, s.open_epoch, NOW + 1),
                   Stamp(12, s.open_epoch, NOW + 2)]


def test_a_batch_stamp_reserves_what_as_many_single_stamps_at_that_time_would() -> None:
    for last_ts, now in ((NOW, NOW + 100), (NOW + 100, NOW)):  # clock ahead, clock behind
        one, batch = _seq(trans=9, ts=last_ts), _seq(trans=9, ts=last_ts)
        singles = [one.stamp(now) for _ in range(4)]
        first = batch.stamp_batch(4, now)
        assert [Stamp(first.trans_id + i, first.epoch, first.commit_ts + i)
                for i in range(4)] == singles
        assert (batch.next_trans_id, batch.last_commit_ts, batch.last_trans_in_epoch,
                batch.open_epoch_txns) == (one.next_trans_id, one.last_commit_ts,
                                           one.last_trans_in_epoch, one.open_epoch_txns)
        assert batch.stamp(now) == one.stamp(now)  # and what follows continues alike


def test_commit_times_increase_strictly_when_the_clock_stands_still_or_goes_back() -> None:
    s = _seq(ts=NOW)
    assert [s.stamp(t).commit_ts for t in (NOW, NOW - 50, NOW + 10)] == [NOW + 1, NOW + 2,
                                                                          NOW + 10]


def test_a_derived_trans_id_is_reserved_between_two_writes() -> None:
    s = _seq(trans=4, ts=NOW)
    assert s.stamp(NOW + 1).trans_id == 5
    assert s.reserve_derived(NOW + 1) == (6, NOW + 2)
    assert s.stamp(NOW + 1).trans_id == 7


def test_a_derived_trans_id_is_the_open_epochs_last_one_for_its_marker() -> None:
    s = _seq(trans=4)
    s.reserve_derived(NOW)
    s.unit_proposed(True)
    assert s.open_seal() == Seal(s.open_epoch, 5)


# -- epochs ---------------------------------------------------------------------------------------


def test_an_epoch_without_transactions_needs_no_marker() -> None:
    s = _seq()
    assert s.epoch_ended(T0 + EPOCH_S)
    assert s.open_seal() is None
    s.open_at(T0 + EPOCH_S)
    assert s.open_epoch == (TERM << 32) | 2


def test_an_epoch_with_transactions_is_sealed_with_its_last_trans_id() -> None:
    s = _seq(trans=0)
    first = s.open_epoch
    s.stamp(NOW)
    s.stamp(NOW)
    assert not s.epoch_ended(T0 + EPOCH_S / 2)
    assert s.epoch_ended(T0 + EPOCH_S)
    assert s.open_seal() == Seal(first, 2)
    s.sealed()
    s.open_at(T0 + EPOCH_S)
    assert s.open_epoch == first + 1
    assert s.open_seal() is None
    assert s.stamp(NOW).epoch == first + 1


def test_an_epoch_with_transactions_stays_open_until_its_marker_is_proposed() -> None:
    s = _seq()
    s.stamp(NOW)
    with pytest.raises(ValueError, match="no marker proposed"):
        s.open_at(T0 + EPOCH_S)
    assert s.stamp(NOW).epoch == (TERM << 32) | 1  # what comes meanwhile joins it


def test_a_replicated_epoch_without_transactions_needs_no_marker() -> None:
    s = _seq()
    s.unit_proposed(False)
    assert s.open_seal() is None


def test_the_time_to_the_epochs_end_counts_from_the_take_over() -> None:
    s = _seq()
    assert s.to_epoch_end(T0) == pytest.approx(EPOCH_S)
    assert s.to_epoch_end(T0 + 0.3) == pytest.approx(0.075)


# -- the schema shadow ----------------------------------------------------------------------------


def test_schemas_of_pending_proposals_shadow_the_stores() -> None:
    s = _seq()
    old, new, other = _schema("a.t"), _schema("a.t"), _schema("a.u")
    s.shadow("a.t", new)
    assert s.known_schemas({"a.t": old, "a.u": other}) == {"a.t": new, "a.u": other}


def test_known_schemas_is_a_new_mapping() -> None:
    s = _seq()
    applied = {"a.u": _schema("a.u")}
    got = s.known_schemas(applied)
    got["x.y"] = _schema("x.y")
    assert "x.y" not in applied


# -- take-back ------------------------------------------------------------------------------------


def test_take_back_returns_trans_ids_and_commit_times_of_a_refused_batch() -> None:
    s = _seq(trans=9, ts=NOW)
    s.stamp(NOW + 1)
    m = s.mark()
    s.stamp(NOW + 5)
    s.stamp(NOW + 6)
    s.take_back(m)
    assert s.next_trans_id == 11
    assert s.last_commit_ts == NOW + 1
    assert s.stamp(NOW + 7) == Stamp(11, s.open_epoch, NOW + 7)


def test_take_back_of_a_refused_batch_leaves_an_empty_epoch_unsealed() -> None:
    s = _seq()
    m = s.mark()
    s.stamp(NOW)
    s.take_back(m)
    assert s.open_seal() is None


def test_take_back_keeps_the_marker_of_what_was_proposed_before() -> None:
    s = _seq(trans=0)
    s.stamp(NOW)
    m = s.mark()
    s.stamp(NOW)
    s.take_back(m)
    assert s.open_seal() == Seal(s.open_epoch, 1)


def test_take_back_returns_a_reserved_derived_trans_id() -> None:
    s = _seq(trans=20, ts=NOW)
    m = s.mark()
    assert s.reserve_derived(NOW + 3) == (21, NOW + 3)
    s.take_back(m)
    assert s.reserve_derived(NOW + 4) == (21, NOW + 4)


def test_take_back_removes_schemas_the_refused_batch_created() -> None:
    s = _seq()
    m = s.mark()
    s.shadow("a.t", _schema("a.t"))
    s.take_back(m)
    assert s.schemas == {}


def test_take_back_restores_a_schema_the_refused_batch_replaced() -> None:
    s = _seq()
    before = _schema("a.t")
    s.shadow("a.t", before)
    m = s.mark()
    s.shadow("a.t", _schema("a.t"))
    s.shadow("a.t", _schema("a.t"))
    s.take_back(m)
    assert s.schemas["a.t"] is before


def test_take_back_keeps_the_term_start_and_the_open_epoch() -> None:
    s = _seq()
    later = T0 + 3 * EPOCH_S
    s.open_at(later)
    opened = s.open_epoch
    m = s.mark()
    s.stamp(NOW)
    s.take_back(m)
    assert s.open_epoch == opened
    assert s.epoch_at(later) == opened  # not counted from 1 again
