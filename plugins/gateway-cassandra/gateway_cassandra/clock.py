"""Write timestamps: every Cassandra write carries one derived from the log, never the clock.

Cassandra keeps, per cell, the write with the highest timestamp (a tombstone wins a tie). If
every write of an operation carries a timestamp that grows with the operation's position in the
log, then the store converges to the log's final state whatever order the writes arrive in:
parallel workers, a retried batch, or a replay after a crash that applies old operations again
after newer ones all lose to the newer writes. The formula::

    sequence  = (log_index * 2**16 + min(statement, 2**16 - 1)) * 2**8 + min(sub, 2**8 - 1)
    timestamp = sequence * 2 + phase

- ``log_index`` is the operation's log index (the commit point of its transaction), so a later
  transaction always wins; ``statement`` (1-based, within the transaction) orders writes of
  one transaction;
- ``sub`` counts earlier writes to the same row from the same ``(log_index, statement)`` --
  only a statement that touches a row twice, as key-shifting updates do (``id = id + 1`` moves
  row 2 to 3 after moving 3 to 4). ``RowClock`` keeps it per row in memory; the dispatcher
  hands a row's operations over in order, so a replay of the transaction counts the same way;
- ``phase`` is 0 for the row tombstone that clears a row before an UPSERT writes exactly its
  columns, and 1 for every other write (inserts, updates, deletes), so the clearing never
  removes the write that follows it.

``log_index`` may reach 2**38 (2.7e11 entries) before the timestamp leaves the signed 64-bit
range. The values are far below wall-clock microseconds: tables the applier writes belong to
the gateway, and a client writing them with ``now()`` timestamps would win every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from gateway import (
    RowOp,
)

__all__ = ["MAX_LOG_INDEX", "RowClock", "write_timestamp"]

_STATEMENT_BITS = 16
_SUB_BITS = 8
MAX_LOG_INDEX = (2**63 - 1) >> (_STATEMENT_BITS + _SUB_BITS + 1)
"""The largest log index the timestamp formula can encode."""


def write_timestamp(log_index: int, statement: int, sub: int = 0, phase: int = 1) -> int:
    """The write timestamp of the formula in the module docstring. Raises ``ValueError`` for a
    log index beyond ``MAX_LOG_INDEX`` or a phase other than 0 or 1."""
    if not 0 <= log_index <= MAX_LOG_INDEX:
        raise ValueError(f"log index {log_index} is outside 0..{MAX_LOG_INDEX}")
    if phase not in (0, 1):
        raise ValueError(f"phase must be 0 or 1, not {phase}")
    statement = min(max(statement, 0), (1 << _STATEMENT_BITS) - 1)
    sub = min(max(sub, 0), (1 << _SUB_BITS) - 1)
    sequence = (((log_index << _STATEMENT_BITS) | statement) << _SUB_BITS) | sub
    return (sequence << 1) | phase


class RowClock:
    """Hands out ``sub`` for each write to a row (see the module docstring); thread-safe.

    Remembers the last ``(log_index, statement)`` written per row for the ``capacity`` most
    recently written rows. Handing the same operation over again (a retry of the batch) returns
    the ``sub`` it had, so a retry does not move its own writes past later ones.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[Hashable, tuple[int, int, int, RowOp]] = OrderedDict()
        self._lock = threading.Lock()

    def sub(self, row: Hashable, op: RowOp) -> int:
        """The ``sub`` of ``op``'s write to ``row`` (a row other than ``op.row_id`` for the
        target of a MOVE)."""
        with self._lock:
            last = self._rows.get(row)
            sub = 0
            if last is not None and (last[0], last[1]) == (op.log_index, op.statement):
                sub = last[2] if last[3] == op else last[2] + 1
            self._rows[row] = (op.log_index, op.statement, sub, op)
            self._rows.move_to_end(row)
            if len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
            return sub
