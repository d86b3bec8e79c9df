"""Offline check of a whole node data directory (``gateway log verify DATA_DIR``).

Checks everything a start reads, the way the start reads it, and changes nothing (the WAL is
recovered on a temporary copy):

- ``raft/wal``: ``meta`` present (beside segments); the segments recovered by the WAL's own
  recovery (every finding -- torn tail, torn batch, damaged seal -- is a problem: a start
  would cut it), every entry read back (a sealed segment's records are otherwise trusted by
  their footer), the hard state's commit index within the log;
- ``raft/snapshots``: ``CURRENT`` readable and present when the log was compacted, the newest
  snapshot's manifest and every file it lists with its size *and CRC-32C*, the log starting
  at most one past the snapshot;
- ``store``: ``MANIFEST`` present (when tables are), every manifest record and table block by
  checksum (``gateway store verify``);
- the log covers the state built from it: the hard state's commit index, the store's applied
  index and every applier position are at most the log's last index (``consistency``);
- ``appliers``: every position file and dead-letter log readable (a torn tail is a problem:
  a start falls back over it);
- the SQLite applier's database (``sqlite/gateway.db``), on a copy: its integrity check, that
  it is not new or empty under a saved position, that ``_gateway_applied_ranges`` holds no
  transaction the log does not reach, and that it holds the newest transaction its position
  says was applied (a database behind its position lost acknowledged rows).

Every problem is one line naming the file (relative to the data directory) and byte offset or
log index. ``verify_data_dir`` never raises on damaged data.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog
from gateway.appliers.position import ApplierPosition, PositionStore, PositionStoreError
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.errors import CorruptionError, InvalidArgumentError
from gateway.core.lsm.export import check_export_files, read_snapshot_manifest
from gateway.core.lsm.manifest import MANIFEST_NAME, read_manifest
from gateway.core.lsm.sstable_reader import SSTableReader
from gateway.core.lsm.verify import NotAStoreError, verify_store
from gateway.core.wal import FsyncPolicy, SegmentedWal, WalEntry, WalError, WalOptions
from gateway.node.state import keys
from gateway.node.state.consistency import InconsistentStateError, check_log_covers_state
from gateway.node.storage.snapshot_files import (
    SnapshotArchiveError,
    SnapshotMetadataError,
    _read_metadata,
    check_archive,
    check_snapshot_dir,
)
from gateway.v1 import replication_pb2, transaction_pb2

__all__ = ["DataDirReport", "is_data_dir", "verify_data_dir"]

_TXN = 1  # entry tags (docs/node.md, "Log entries")
_UNIT = 4
#: Where the SQLite applier keeps its database by default, relative to the data directory.
SQLITE_DB = os.path.join("sqlite", "gateway.db")

#: Shortens absolute paths under the data directory to relative ones in a message.
_Rel = Callable[[str], str]


@dataclass
class DataDirReport:
    """What `verify_data_dir` found: ``problems`` (damage, one line each) and ``summary``."""

    problems: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def is_data_dir(path: str) -> bool:
    """Whether ``path`` looks like a node's data directory (``raft/`` or ``store/`` in it)."""
    return os.path.isdir(os.path.join(path, "raft")) or os.path.isdir(os.path.join(path, "store"))


@dataclass
class _Log:
    """What the WAL check learned."""

    first: int = 1
    last: int = 0
    commit: int = 0
    #: Per origin server id: (log index, trans id) of every transaction read, in log order.
    txns: list[tuple[int, int, int, bool]] = field(default_factory=list)
    readable: bool = False


def verify_data_dir(data_dir: str) -> DataDirReport:
    """Check the data directory ``data_dir`` (see the module docstring)."""
    root = os.path.abspath(data_dir)
    report = DataDirReport()

    def rel(text: str) -> str:
        return text.replace(root + os.sep, "")

    wal = _check_wal(root, report, rel)
    snap_index = _check_snapshots(root, wal, report, rel)
    store_applied = _check_store(root, report, rel)
    positions = _check_appliers(root, wal, report, rel)
    last = max(wal.last, snap_index)
    if wal.readable:
        try:
            check_log_covers_state(
                "raft/wal", last_index=last, snapshot_index=snap_index,
                commit_index=wal.commit, store_applied=store_applied, replicated_positions={})
        except InconsistentStateError as exc:
            report.problems.append(rel(str(exc)))
    _check_sqlite(root, wal, positions.get("sqlite"), report, rel)
    return report


# -- the Raft log -------------------------------------------------------------------------------

def _check_wal(root: str, report: DataDirReport, rel: _Rel) -> _Log:
    out = _Log()
    directory = os.path.join(root, "raft", "wal")
    if not os.path.isdir(directory):
        report.problems.append("raft/wal: missing (the Raft log)")
        return out
    with tempfile.TemporaryDirectory(prefix="gateway-verify-") as tmp:
        copy = os.path.join(tmp, "wal")
        shutil.copytree(directory, copy)

        def original(text: str) -> str:
            return rel(text.replace(copy, directory))

        events: list[str] = []
        try:
            log = SegmentedWal(copy, options=WalOptions(fsync=FsyncPolicy.NEVER),
                               on_recovery_event=lambda e: events.append(original(str(e))))
        except (WalError, ValueError) as exc:
            report.problems.extend(f"WAL recovery: {e}" for e in events)
            report.problems.append(f"cannot open the Raft log: {original(str(exc))}")
            return out
        report.problems.extend(f"WAL recovery: {e} (a start would cut it)" for e in events)
        try:
            out.first, out.last = log.first_index(), log.last_index()
            out.commit = log.hard_state().commit
            lo = out.first
            while lo <= out.last:  # a sealed segment is trusted by its footer at open
                hi = min(out.last + 1, lo + 1024)
                for e in log.entries(lo, hi):
                    _note_transactions(e, out)
                lo = hi
            out.readable = True
        except WalError as exc:
            report.problems.append(f"Raft log: {original(str(exc))}")
        finally:
            log.close()
    segments = len([n for n in os.listdir(directory) if n.endswith(".wal")])
    report.summary.append(f"raft/wal: {segments} segments, entries {out.first}..{out.last}, "
                          f"commit {out.commit}")
    return out


def _note_transactions(e: WalEntry, out: _Log) -> None:
    """Record the GTIDs of the transactions entry ``e`` holds (plain or in a replicated
    epoch: the cluster's own conflict transactions live there too)."""
    if e.type != 0 or not e.data:
        return
    try:
        if e.data[0] == _TXN:
            txn = transaction_pb2.Transaction.FromString(e.data[1:])
            out.txns.append((e.index, txn.gtid.server_id, txn.gtid.trans_id, _has_rows(txn)))
        elif e.data[0] == _UNIT:
            unit = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
            for it in unit.items:
                if it.WhichOneof("item") == "transaction":
                    g = it.transaction.gtid
                    out.txns.append((e.index, g.server_id, g.trans_id, False))
    except Exception:  # not a transaction this check can read (the start reads it the same)
        return


def _has_rows(txn: transaction_pb2.Transaction) -> bool:
    return any(s.WhichOneof("kind") in ("insert", "update", "delete") for s in txn.statements)


# -- snapshots ----------------------------------------------------------------------------------

def _check_snapshots(root: str, wal: _Log, report: DataDirReport, rel: _Rel) -> int:
    directory = os.path.join(root, "raft", "snapshots")
    current = os.path.join(directory, "CURRENT")
    if not os.path.isfile(current):
        if wal.first > 2:
            report.problems.append(
                f"raft/snapshots/CURRENT: byte 0: missing, but the Raft log starts at index "
                f"{wal.first}: entries 1..{wal.first - 1} exist only in a snapshot")
        return 0
    try:
        meta = _read_metadata(current)
    except (SnapshotMetadataError, OSError) as exc:
        report.problems.append(rel(str(exc)))
        return 0
    snapdir = os.path.join(directory, f"{meta.index:020d}.snapdir")
    archive = os.path.join(directory, f"{meta.index:020d}.snap")
    try:
        if os.path.isdir(snapdir):
            check_snapshot_dir(snapdir)
            _, files = read_snapshot_manifest(snapdir)
            check_export_files(snapdir, files, checksums=True)
        elif os.path.exists(archive):
            check_archive(archive)
        elif meta.index > 1:
            report.problems.append(f"raft/snapshots: the snapshot at index {meta.index} named "
                                   f"by CURRENT is missing")
    except (SnapshotArchiveError, CorruptionError, InvalidArgumentError, OSError) as exc:
        report.problems.append(rel(str(exc)))
    if wal.readable and wal.first - 1 > meta.index:
        report.problems.append(
            f"raft/wal: the log starts at index {wal.first} but the newest snapshot is at "
            f"{meta.index}: entries {meta.index + 1}..{wal.first - 1} are in neither")
    report.summary.append(f"raft/snapshots: newest at index {meta.index}")
    return meta.index


# -- the store ----------------------------------------------------------------------------------

def _check_store(root: str, report: DataDirReport, rel: _Rel) -> int:
    path = os.path.join(root, "store")
    if not os.path.isdir(path):
        report.problems.append("store: missing (the store built from the Raft log)")
        return 0
    try:
        store = verify_store(path)
    except NotAStoreError:
        tables = sorted(n for n in os.listdir(path) if n.endswith(".sst"))
        if tables:
            report.problems.append(
                f"store/{MANIFEST_NAME}: byte 0: missing; {len(tables)} tables cannot be "
                f"placed without it (a start rebuilds the store from the newest snapshot and "
                f"the log)")
        return 0
    report.problems.extend(rel(p) for p in store.problems)
    report.summary.append(f"store: {store.tables} tables, {store.entries} entries, applied "
                          f"index {store.applied_index}")
    return store.applied_index


def _skip_markers(root: str) -> set[int] | None:
    """Indexes of the entries the state machine did not apply (``x`` keys) that the store's
    tables hold, read without opening the store; None when the store cannot be read."""
    path = os.path.join(root, "store")
    try:
        state, _, _ = read_manifest(os.path.join(path, MANIFEST_NAME))
    except (CorruptionError, OSError):
        return None
    prefix = keys.entry_outcome_key(0)[:1]
    out: set[int] = set()
    cache = BlockCache(0)
    for tables in state.levels:
        for number in tables:
            try:
                reader = SSTableReader(os.path.join(path, f"{number:06d}.sst"), number, cache)
            except (CorruptionError, OSError):
                return None
            try:
                for block_keys, _ in reader.chunks(prefix, prefix + b"\xff"):
                    for k in block_keys:
                        if k[:1] == prefix and len(k) == 9:
                            out.add(int.from_bytes(k[1:], "big"))
            except CorruptionError:
                return None
            finally:
                reader.close()
    return out


# -- appliers -----------------------------------------------------------------------------------

def _check_appliers(root: str, wal: _Log, report: DataDirReport, rel: _Rel
                    ) -> dict[str, ApplierPosition]:
    directory = os.path.join(root, "appliers")
    out: dict[str, ApplierPosition] = {}
    if not os.path.isdir(directory):
        return out
    for name in sorted(os.listdir(directory)):
        if name.endswith(".position"):
            store = PositionStore(directory, name[: -len(".position")])
            try:
                position = store.load()
            except PositionStoreError as exc:
                report.problems.append(rel(str(exc)))
                continue
            if store.damage is not None:
                report.problems.append(rel(store.damage) + (
                    f": applier {store.applier!r} falls back to position {position.log_index}"))
            out[store.applier] = position
            if wal.readable and position.log_index > max(wal.last, 0) and \
                    position.log_index > _snapshot_floor(root):
                report.problems.append(
                    f"appliers/{name}: applier {store.applier!r} applied up to index "
                    f"{position.log_index} but the Raft log ends at index {wal.last}")
        elif name.endswith(".deadletters"):
            letters = DeadLetterLog(directory, name[: -len(".deadletters")])
            try:
                damage = letters.check()
            except DeadLetterError as exc:
                damage = str(exc)
            if damage:
                report.problems.append(rel(damage))
    return out


def _snapshot_floor(root: str) -> int:
    try:
        return _read_metadata(os.path.join(root, "raft", "snapshots", "CURRENT")).index
    except (SnapshotMetadataError, OSError):
        return 0


def _dead_gtids(root: str) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    try:
        letters = DeadLetterLog(os.path.join(root, "appliers"), "sqlite").letters(
            include_closed=True)
    except (DeadLetterError, OSError):
        return out
    for letter in letters:
        op, txn = letter.operation(), letter.transaction()
        if op is not None:
            out.add((op.gtid.server_id, op.gtid.trans_id))
        elif txn is not None:
            out.add((txn.gtid.server_id, txn.gtid.trans_id))
    return out


# -- the SQLite applier's database --------------------------------------------------------------

def _check_sqlite(root: str, wal: _Log, position: ApplierPosition | None,
                  report: DataDirReport, rel: _Rel) -> None:
    db = os.path.join(root, SQLITE_DB)
    if not os.path.exists(db):
        if position is not None and position.log_index > 0:
            report.problems.append(f"{SQLITE_DB}: missing, but appliers/sqlite.position says "
                                   f"it applied up to index {position.log_index}")
        return
    with tempfile.TemporaryDirectory(prefix="gateway-verify-") as tmp:
        copy = os.path.join(tmp, "gateway.db")
        for suffix in ("", "-wal"):  # the database as SQLite would open it, on a copy
            if os.path.exists(db + suffix):
                shutil.copyfile(db + suffix, copy + suffix)
        try:
            conn = sqlite3.connect(copy)
            try:
                check = conn.execute("PRAGMA integrity_check").fetchone()
                if check is None or check[0] != "ok":
                    report.problems.append(f"{SQLITE_DB}: integrity check: "
                                           f"{check[0] if check else 'no answer'}")
                    return
                has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = "
                                   "'_gateway_applied_ranges'").fetchone()
                ranges = conn.execute("SELECT server_id, first, last FROM "
                                      "_gateway_applied_ranges").fetchall() if has else []
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            report.problems.append(f"{SQLITE_DB}: {exc}")
            return
    report.summary.append(f"{SQLITE_DB}: {len(ranges)} applied GTID ranges")
    if position is None or not wal.readable:
        return
    if not ranges and position.log_index > 0 and any(t[3] for t in wal.txns):
        report.problems.append(f"{SQLITE_DB}: new or empty, but appliers/sqlite.position says "
                               f"it applied up to index {position.log_index}")
        return
    held: dict[int, list[tuple[int, int]]] = {}
    for sid, first, last in ranges:
        held.setdefault(sid, []).append((first, last))
    in_log: dict[int, int] = {}
    for _, sid, tid, _ in wal.txns:
        in_log[sid] = max(in_log.get(sid, 0), tid)
    for sid, spans in sorted(held.items()):
        newest = max(last for _, last in spans)
        if sid in in_log and newest > in_log[sid]:
            report.problems.append(
                f"{SQLITE_DB}: _gateway_applied_ranges holds transaction {sid}:{newest} but "
                f"the Raft log ends at transaction {sid}:{in_log[sid]}: transactions "
                f"{sid}:{in_log[sid] + 1}..{newest} are lost from the log")
    _check_behind_position(root, wal, position, held, report)


def _check_behind_position(root: str, wal: _Log, position: ApplierPosition,
                           held: dict[int, list[tuple[int, int]]],
                           report: DataDirReport) -> None:
    """The newest transaction with rows at or below the position, that was neither
    dead-lettered nor left unapplied by the state machine, must be in the database."""
    candidates = [t for t in wal.txns if t[0] <= position.log_index and t[3]]
    if not candidates:
        return
    dead = _dead_gtids(root)
    skipped = _skip_markers(root)
    if skipped is None:
        return  # the store is damaged (reported above): nothing to tell skipped entries by
    for index, sid, tid, _ in reversed(candidates):
        if (sid, tid) in dead or index in skipped:
            continue
        if not any(first <= tid <= last for first, last in held.get(sid, [])):
            report.problems.append(
                f"{SQLITE_DB}: behind its position: appliers/sqlite.position says index "
                f"{position.log_index} was applied, but transaction {sid}:{tid} (index "
                f"{index}) is not in _gateway_applied_ranges (acknowledged rows lost)")
        return

