"""An applier's position as its target durably holds it: the position file never claims more.

The dispatcher saves an applier's position (``PositionStore``, fsynced) once the applier
confirmed the operations it covers. A target that commits without syncing every commit --
SQLite with ``synchronous=NORMAL`` syncs its WAL only at checkpoints -- can then lose, in a
power cut, commits the position already claims: the node would start with no lag while
acknowledged rows are missing. So a target that can (optional methods, duck-typed like
``reset_target``):

- ``hold_position(position)``: records ``position`` in the target itself, durably, after
  every write it committed before the call (the SQLite applier: one row of
  ``_gateway_position``, committed with ``synchronous=FULL``, which syncs the WAL and with
  it every earlier commit). The dispatcher calls it (`hold`) before each save of the
  position file, so the order on disk is always: data, the target's record, the file;
- ``held_position()``: the position the target durably holds -- ``None`` when it cannot
  tell (a database from before these records, which still holds applied data).

At start `reconcile` compares the two. The target is the source of truth: the applier starts
from the position the target holds. When the file claims more (the target lost commits: a
lost or cut ``gateway.db-wal``, a database restored from an older copy, a wiped file) one
warning names both positions and says that the entries after the held one are applied again
from the log -- or the target is rebuilt from the store when the log no longer holds them
(``gateway.node.appliers.applier_rebuild``). Applying again is safe: appliers are idempotent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .contract import is_transient, is_unavailable
from .position import ApplierPosition, PositionStore

if TYPE_CHECKING:
    from .contract import Applier

__all__ = ["covers", "held", "hold", "reconcile"]

log = logging.getLogger("gateway.appliers.durable")


def hold(applier: Applier, position: ApplierPosition) -> bool:
    """Have ``applier``'s target record ``position`` durably, if it can (module docstring);
    call before saving ``position`` to the position file, and save it only if this returns
    True. False: the target is busy or unavailable for now (a transient error, logged): the
    file keeps its older position and the caller tries again later. Other errors raise."""
    fn = getattr(applier, "hold_position", None)
    if not callable(fn):
        return True
    try:
        fn(position)
    except Exception as exc:
        if not (is_transient(exc) or is_unavailable(exc)):
            raise
        log.warning("applier %s: cannot record position %d in its target yet (the position "
                    "file keeps the older one): %s", applier.name, position.log_index, exc)
        return False
    return True


def held(applier: Applier) -> ApplierPosition | None:
    """The position ``applier``'s target durably holds, or ``None`` if it cannot tell."""
    fn = getattr(applier, "held_position", None)
    return fn() if callable(fn) else None


def covers(have: ApplierPosition, claim: ApplierPosition) -> bool:
    """True if position ``have`` includes everything position ``claim`` says is applied.

    Positions of one applier only grow (the watermark absorbs the GTIDs applied above it),
    so a larger log index covers; at the same log index the applied GTIDs must be a subset."""
    if have.log_index != claim.log_index:
        return have.log_index > claim.log_index
    mine = list(have.applied.ranges())
    return all(any(s == sid and lo <= first and last <= hi for s, lo, hi in mine)
               for sid, first, last in claim.applied.ranges())


def reconcile(applier: Applier, positions: PositionStore, claimed: ApplierPosition,
              target: str) -> ApplierPosition:
    """The position ``applier`` starts from, given the ``claimed`` one of its position file:
    the one its target holds (saved to the file when they differ), or ``claimed`` when the
    target cannot tell. Logs one warning when the target holds less than the file claims."""
    have = held(applier)
    if have is None:
        return claimed
    if not covers(have, claimed):
        log.warning(
            "applier %s: %s holds up to log index %d but its position file %s says %d (a "
            "lost or cut write-ahead log, an older copy, or a wiped database): applying the "
            "entries after index %d again from the log (or rebuilding from the store if the "
            "log no longer holds them)", applier.name, target, have.log_index,
            positions.path, claimed.log_index, have.log_index)
    if have != claimed:
        positions.save(have)
    return have
