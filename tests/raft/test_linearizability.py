"""The checker accepts linearizable histories and rejects known non-linearizable ones."""

from __future__ import annotations

import pytest

from gateway.raft.linearizability import (
    CAS,
    GET,
    PUT,
    InvalidHistoryError,
    Operation,
    check_history,
)


def op(client, kind, key, call, ret, value=None, expected=None, output=None) -> Operation:
    return Operation(client, kind, key, call, ret, value, expected, output)


def test_sequential_history_is_linearizable() -> None:
    h = [
        op(1, PUT, "k", 1, 2, "a"),
        op(1, GET, "k", 3, 4, output="a"),
        op(2, CAS, "k", 5, 6, "b", "a", True),
        op(2, GET, "k", 7, 8, output="b"),
    ]
    assert check_history(h).ok is True


def test_concurrent_read_may_see_old_or_new_value() -> None:
    for seen in ("a", "b"):
        h = [
            op(1, PUT, "k", 1, 2, "a"),
            op(1, PUT, "k", 3, 6, "b"),
            op(2, GET, "k", 4, 5, output=seen),
        ]
        assert check_history(h).ok is True


def test_stale_read_is_rejected() -> None:
    h = [
        op(1, PUT, "k", 1, 2, "a"),
        op(1, PUT, "k", 3, 4, "b"),
        op(2, GET, "k", 5, 6, output="a"),  # called after put(b) returned
    ]
    r = check_history(h)
    assert r.ok is False and r.key == "k"
    assert any(o.kind == GET for o in r.stuck)


def test_lost_update_is_rejected() -> None:
    # two CAS from the same old value both succeed: one update is lost
    h = [
        op(1, PUT, "k", 1, 2, "0"),
        op(1, CAS, "k", 3, 5, "1", "0", True),
        op(2, CAS, "k", 4, 6, "2", "0", True),
    ]
    assert check_history(h).ok is False


def test_acknowledged_write_lost_is_rejected() -> None:
    h = [
        op(1, PUT, "k", 1, 2, "a"),
        op(2, GET, "k", 3, 4, output=None),
    ]
    assert check_history(h).ok is False


def test_read_of_never_written_value_is_rejected() -> None:
    assert check_history([op(1, GET, "k", 1, 2, output="ghost")]).ok is False


def test_unknown_write_may_take_effect_late() -> None:
    h = [
        op(1, PUT, "k", 1, None, "a"),  # timed out
        op(2, GET, "k", 5, 6, output=None),
        op(2, GET, "k", 7, 8, output="a"),
    ]
    assert check_history(h).ok is True


def test_unknown_write_may_never_take_effect() -> None:
    h = [op(1, PUT, "k", 1, None, "a"), op(2, GET, "k", 5, 6, output=None)]
    assert check_history(h).ok is True


def test_unknown_write_cannot_take_effect_before_its_call() -> None:
    h = [
        op(2, GET, "k", 1, 2, output="a"),
        op(1, PUT, "k", 3, None, "a"),
    ]
    assert check_history(h).ok is False


def test_unknown_cas_takes_effect_only_if_expected_matches() -> None:
    h = [
        op(1, PUT, "k", 1, 2, "x"),
        op(2, CAS, "k", 3, None, "y", "nope"),
        op(1, GET, "k", 10, 11, output="y"),
    ]
    assert check_history(h).ok is False


def test_keys_are_checked_independently() -> None:
    h = [
        op(1, PUT, "a", 1, 2, "1"),
        op(1, PUT, "b", 3, 4, "2"),
        op(2, GET, "b", 5, 6, output="2"),
        op(2, GET, "a", 7, 8, output=None),  # stale on key a only
    ]
    r = check_history(h)
    assert r.ok is False and r.key == "a"


def test_failed_cas_must_see_a_different_value() -> None:
    h = [op(1, PUT, "k", 1, 2, "v"), op(2, CAS, "k", 3, 4, "w", "v", False)]
    assert check_history(h).ok is False


def test_call_at_the_same_timestamp_as_a_return_is_concurrent_with_it() -> None:
    # Coarse clocks give equal timestamps: the read called when the write returned may be
    # ordered before it (as Porcupine does). This history was "not linearizable" before.
    h = [op(1, PUT, "x", 0, 5, value="a"), op(2, GET, "x", 5, 6, output=None)]
    assert check_history(h).ok is True


def test_call_strictly_after_a_return_is_still_ordered_after_it() -> None:
    h = [op(1, PUT, "x", 0, 5, value="a"), op(2, GET, "x", 6, 7, output=None)]
    assert check_history(h).ok is False


def test_operations_with_identical_timestamps_are_concurrent() -> None:
    h = [op(1, PUT, "x", 3, 3, value="a"), op(2, PUT, "x", 3, 3, value="b"),
         op(3, GET, "x", 4, 4, output="a")]
    assert check_history(h).ok is True


def test_return_before_call_is_rejected_naming_the_operation() -> None:
    h = [op(1, PUT, "x", 0, 5, value="a"), op(2, GET, "x", 9, 8, output="a")]
    with pytest.raises(InvalidHistoryError) as err:
        check_history(h)
    assert "client 2: get(x)" in str(err.value) and "[9, 8]" in str(err.value)
