"""Start-up checks that a node's durable state agrees with its recovered Raft log.

Every part of a node's state is derived from the Raft log: the store has applied the log up to
its applied index, every applier has applied it up to its position, and the hard state's
commit index says how far the log was committed. After damage (a WAL segment cut short, a lost
file) the recovered log may end *before* one of them. Starting anyway is silent data loss:
the leader would hand out the lost indexes again to new entries, the store and the appliers
(whose positions are past them) would skip those entries, and Status would report no lag
(issue 12). So a node whose store, applier position or commit index is ahead of its log,
beyond what its newest snapshot covers, refuses to start with one line saying what is
inconsistent and how to recover (``docs/node.md``, "Damage and recovery").

The checks are pure functions of numbers the caller reads; they raise `InconsistentStateError`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.node.state.gtid_use import consumed_trans_id
from gateway.node.storage.storage import compacted_log

if TYPE_CHECKING:
    from gateway.appliers.position import ApplierPosition, PositionStore
    from gateway.node.storage.storage import RaftLogStorage

log = logging.getLogger("gateway.node.state.consistency")

__all__ = [
    "RECOVER_HINT",
    "InconsistentStateError",
    "check_applier_position",
    "check_log_covers_state",
    "check_position_file",
    "check_target_trans_id",
    "last_logged_trans_id",
]

#: How to recover a node whose log lost entries (appended to every refusal).
RECOVER_HINT = ("recover by rejoining the cluster: wipe the data directory and add the node "
                "again (gateway cluster remove/add), or restore the data directory from a backup")


class InconsistentStateError(Exception):
    """The node's durable state is ahead of its recovered log; ``str()`` is one line."""


def check_log_covers_state(wal_dir: str, *, last_index: int, snapshot_index: int,
                           commit_index: int, store_applied: int,
                           replicated_positions: dict[str, int]) -> None:
    """Raise `InconsistentStateError` unless the recovered log (``last_index``, which already
    counts the newest snapshot) covers the hard state's ``commit_index``, the store's durable
    ``store_applied`` index and every replicated applier position (``name -> log index``).

    ``snapshot_index`` is named in the message: state up to it is covered by the snapshot
    even when the log holds no entries."""
    where = (f"{wal_dir}: the Raft log ends at index {last_index} (newest snapshot at "
             f"{snapshot_index})")
    if commit_index > last_index:
        raise InconsistentStateError(
            f"{where} but its hard state says index {commit_index} was committed: committed "
            f"entries {last_index + 1}..{commit_index} are lost (damaged or truncated WAL); "
            f"{RECOVER_HINT}")
    if store_applied > last_index:
        raise InconsistentStateError(
            f"{where} but the store applied up to index {store_applied}: entries "
            f"{last_index + 1}..{store_applied} are lost (damaged or truncated WAL); "
            f"{RECOVER_HINT}")
    for name, position in sorted(replicated_positions.items()):
        if position > last_index:
            raise InconsistentStateError(
                f"{where} but applier {name!r} (cluster scope) applied up to index "
                f"{position}: entries {last_index + 1}..{position} are lost (damaged or "
                f"truncated WAL); {RECOVER_HINT}")


def check_applier_position(name: str, position_file: str, position: int, *,
                           last_index: int, wal_dir: str) -> None:
    """Raise `InconsistentStateError` if applier ``name``'s saved ``position`` (from
    ``position_file``) is past the log's ``last_index``: it would skip the entries written at
    those indexes after the restart, which it never applied."""
    if position > last_index:
        raise InconsistentStateError(
            f"{position_file}: applier {name!r} applied up to index {position} but the Raft "
            f"log ({wal_dir}) ends at index {last_index}: entries {last_index + 1}..{position} "
            f"are lost (damaged or truncated WAL); {RECOVER_HINT}")


def check_position_file(positions: PositionStore, storage: RaftLogStorage, *,
                        report: bool = True) -> ApplierPosition:
    """Load the applier position in ``positions`` and check it against the log of
    ``storage``; return it. Damage in the file is logged (file and offset) when ``report``
    (the applier about to continue from it; the node's start-up check, which only refuses,
    passes False so the line is not logged twice); the position it falls back to (an older
    record, or 0) is used only while the log still holds every entry after it -- otherwise
    the applier would skip entries it never applied, and `InconsistentStateError` is raised.
    A position past the log's end raises it too (`check_applier_position`)."""
    position = positions.load()
    wal_dir = storage.wal.directory
    check_applier_position(positions.applier, str(positions.path), position.log_index,
                           last_index=storage.last_index(), wal_dir=wal_dir)
    if positions.damage is not None:
        first = storage.first_index()
        if position.log_index + 1 < first and compacted_log(first):
            raise InconsistentStateError(
                f"{positions.damage}: applier {positions.applier!r} falls back to position "
                f"{position.log_index} but the Raft log starts at index {first}: entries "
                f"{position.log_index + 1}..{first - 1} can no longer be applied; restore the "
                f"position file from a backup, or rebuild the applier's target and write its "
                f"position by hand (docs/node.md, \"Damage and recovery\")")
        if report:
            log.warning("%s: applier %r continues from position %d (entries after it are "
                        "applied again: at-least-once)", positions.damage,
                        positions.applier, position.log_index)
    return position


def last_logged_trans_id(storage: RaftLogStorage, durable_trans_id: int, server_id: int) -> int:
    """The largest trans id of cluster ``server_id`` that the node's state can still reach: the
    store's durable counter (``durable_trans_id``: what the store kept, snapshot included) or
    the largest one an entry of the recovered log consumes, whichever is larger. Every entry
    kind that consumes a trans id counts (``gtid_use.consumed``, what the leader hands trans
    ids out by): transactions, and replicated epochs carrying the reserved id of this
    cluster's derived conflict transaction. Reads the log backwards from its end until one
    entry consumes a trans id (the leader hands them out in log order)."""
    from gateway.raft import EntryType

    first, hi = storage.first_index(), _readable_end(storage) + 1
    while hi > first:
        lo = max(first, hi - 256)
        for e in reversed(storage.entries(lo, hi, 1 << 62)):
            if e.type != EntryType.NORMAL:
                continue
            try:
                tid = consumed_trans_id(e.data, server_id)
            except Exception:  # not an entry this check can read: keep looking
                continue
            if tid:
                return max(durable_trans_id, tid)
        hi = lo
    return durable_trans_id


def _readable_end(storage: RaftLogStorage) -> int:
    """The last log index whose entry the storage can read: its last index, or less when a
    WAL lost its tail under a snapshot that covers more (those entries are only in the
    snapshot, so in the store's counter). Binary search, a handful of reads."""
    from gateway.raft.errors import UnavailableError

    first, last = storage.first_index(), storage.last_index()

    def readable(i: int) -> bool:
        try:
            storage.entries(i, i + 1, 1 << 62)
        except UnavailableError:
            return False
        return True

    if last < first or readable(last):
        return last
    lo, hi = first - 1, last  # readable(lo) (or none), not readable(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if readable(mid):
            lo = mid
        else:
            hi = mid
    return lo


def check_target_trans_id(name: str, target: str, server_id: int, in_target: int,
                          in_log: int, wal_dir: str) -> None:
    """Raise `InconsistentStateError` if applier ``name``'s ``target`` holds a transaction of
    this cluster (trans id ``in_target``) that the log no longer reaches (``in_log``): the
    log lost acknowledged entries that the target had applied (a WAL cut after kill -9, whose
    commit markers went with it), and new writes would reuse those GTIDs."""
    if in_target > in_log:
        raise InconsistentStateError(
            f"{target}: applier {name!r} applied transaction {server_id}:{in_target} but the "
            f"Raft log ({wal_dir}) ends at transaction {server_id}:{in_log}: transactions "
            f"{server_id}:{in_log + 1}..{in_target} are lost (damaged or truncated WAL); "
            f"{RECOVER_HINT}")
