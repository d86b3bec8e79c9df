"""The values conflict functions take and give: a replicated row change, the row as stored
here, this cluster's standing, and the verdict.

Names follow MySQL Cluster's conflict handling (``op_type`` and ``cause`` of the exceptions
tables, the ``ndb_conflict_role`` values) so that its users find their way. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.core.sql_value import SqlValue

__all__ = ["Cause", "Change", "Context", "OpType", "Role", "Stored", "Verdict"]


class OpType(enum.IntEnum):
    """The operation an exceptions-table row records (MySQL's ``NDB$OP_TYPE`` order)."""

    WRITE_ROW = 1  # an insert
    UPDATE_ROW = 2
    DELETE_ROW = 3
    REFRESH_ROW = 4  # a primary's realignment of a secondary's row
    READ_ROW = 5  # a row a rejected transaction read (the _TRANS functions)


class Cause(enum.IntEnum):
    """Why a change was in conflict (MySQL's ``NDB$CFT_CAUSE`` order)."""

    ROW_DOES_NOT_EXIST = 1
    ROW_ALREADY_EXISTS = 2
    DATA_IN_CONFLICT = 3
    TRANS_IN_CONFLICT = 4


class Role(enum.Enum):
    """This cluster's part in epoch-based conflict handling (``ndb_conflict_role``)."""

    NONE = "NONE"  # not set: the epoch functions refuse to run
    PRIMARY = "PRIMARY"  # detects conflicts and realigns the secondaries
    SECONDARY = "SECONDARY"  # applies what the primary sends, refresh operations included
    PASS = "PASS"  # applies everything, detects nothing (a role change in progress)


@dataclass(frozen=True, slots=True)
class Change:
    """One replicated row change, as its origin cluster committed it.

    ``after``: the columns it writes (an insert: every non-key column it names; an update: the
    columns it sets; a delete: empty). ``before``: the before image of columns the origin
    logged (empty when none was logged). ``origin``: the cluster that wrote it (its author);
    ``origin_epoch`` and ``commit_ts_ns`` are the origin's."""

    op: OpType
    origin: int
    origin_epoch: int = 0
    commit_ts_ns: int = 0
    after: Mapping[str, SqlValue] = field(default_factory=dict)
    before: Mapping[str, SqlValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Stored:
    """The row as this cluster holds it. ``exists``: a live row (False: never written, or
    deleted). ``epoch``/``author``/``commit_ts_ns``: of its last change here -- this
    cluster's epoch at which it was applied, the origin cluster that wrote it, the origin's
    commit time -- kept for a deleted row too (its tombstone) while conflict checks may need
    it; all 0 when nothing is known (never written, or the tombstone was collected)."""

    exists: bool
    values: Mapping[str, SqlValue] = field(default_factory=dict)
    epoch: int = 0
    author: int = 0
    commit_ts_ns: int = 0

    @staticmethod
    def absent() -> Stored:
        """A row this cluster knows nothing about."""
        return _ABSENT


_ABSENT = Stored(False)


@dataclass(frozen=True, slots=True)
class Context:
    """This cluster when it applies a change: its id, its role, and for each peer cluster the
    newest epoch of this cluster that peer is known to have applied (the max replicated
    epoch, raised by the reflected apply-status rows; 0 when none)."""

    me: int
    role: Role = Role.NONE
    max_replicated: Mapping[int, int] = field(default_factory=dict)

    def max_replicated_epoch(self, peer: int) -> int:
        """The newest epoch of this cluster ``peer`` has applied (0: none known)."""
        return self.max_replicated.get(peer, 0)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a change. ``apply``: write it (``cause`` None), or not (``cause`` says
    why; the caller records it in the table's exceptions table). ``as_op``: the operation to
    apply when it differs from the change's (an insert over an existing row applied as an
    overwrite, ``UPDATE_ROW``). ``refresh``: this cluster (a primary) answers the conflict
    with a ``REFRESH_ROW`` carrying its current row, or its absence, to the secondaries.
    ``delete_delete``: a delete of a row already gone here (MySQL's delete-delete, counted in
    ``epoch_delete_delete_count``; a conflict under ``NDB$EPOCH``, agreement under
    ``NDB$EPOCH2``)."""

    apply: bool
    cause: Cause | None = None
    as_op: OpType | None = None
    refresh: bool = False
    delete_delete: bool = False

    @property
    def in_conflict(self) -> bool:
        return self.cause is not None


#: The verdict of a change without conflict.
APPLY = Verdict(True)
