"""A damaged tail of the dead-letter log is reported with its file and byte offset and never
loses a letter silently (issue 52, item 5): a separator cut short is completed, a letter cut
short is kept aside and counted; a later append never turns it into damage that refuses the
next start; and the letters on disk are counted across restarts."""

from __future__ import annotations

from gateway.appliers.deadletter import DeadLetterLog
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef


def _op(i: int) -> RowOp:
    return RowOp(OpKind.UPSERT, TableRef("shop", "items"), (Column("id", 1),), (i,),
                 gtid=Gtid(7, 100 + i), log_index=40 + i)


def _two_letters(tmp_path) -> DeadLetterLog:
    letters = DeadLetterLog(tmp_path, "sqlite")
    letters.add(_op(1), ValueError("one"), attempts=1)
    letters.add(_op(2), ValueError("two"), attempts=1)
    return letters


def test_a_dead_letter_log_cut_by_one_byte_keeps_every_letter(tmp_path):
    path = _two_letters(tmp_path).path
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    letters = DeadLetterLog(tmp_path, "sqlite")
    found = letters.recover_tail()
    assert found is not None and str(path) in found and f"byte {len(data) - 2}" in found
    assert "every letter kept" in found
    assert [x.message.error for x in letters.letters()] == ["one", "two"]
    assert path.read_bytes() == data
    assert letters.count() == 2


def test_a_dead_letter_cut_short_is_kept_aside_reported_and_counted(tmp_path):
    path = _two_letters(tmp_path).path
    data = path.read_bytes()
    path.write_bytes(data[:-9])
    letters = DeadLetterLog(tmp_path, "sqlite")
    found = letters.recover_tail()
    assert found is not None and str(path) in found and "byte " in found
    assert "cut short" in found and str(letters.torn_path) in found
    assert letters.torn_path.exists() and letters.torn_path.stat().st_size > 0
    assert [x.message.error for x in letters.letters()] == ["one"]
    assert letters.count() == 2  # the readable letter and the fragment


def test_an_append_after_a_torn_tail_never_makes_the_next_start_refuse(tmp_path):
    for cut in (1, 9):
        root = tmp_path / str(cut)
        path = _two_letters(root).path
        path.write_bytes(path.read_bytes()[:-cut])
        first = DeadLetterLog(root, "sqlite")
        first.recover_tail()
        first.add(_op(3), ValueError("three"), attempts=1)
        again = DeadLetterLog(root, "sqlite")
        assert again.recover_tail() is None  # intact: no damage before valid letters
        assert [x.message.error for x in again.letters()][-1] == "three"
        assert again.count() == 3


def test_the_letters_on_disk_are_counted_open_or_resolved(tmp_path):
    letters = _two_letters(tmp_path)
    letters.resolve(1, 2, "discarded by hand")
    assert DeadLetterLog(tmp_path, "sqlite").count() == 2
    assert DeadLetterLog(tmp_path / "none", "sqlite").count() == 0
