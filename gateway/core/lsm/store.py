"""``LSMStore``: the row store of a gateway node (memtable, SSTables, manifest, compaction).

Write path: a write is encoded into a *cell* (value plus epoch/author/commit timestamp,
:mod:`.format`), optionally appended to the store's own WAL, and stored in the active memtable.
When the memtable's byte budget is used up it is frozen and a background thread flushes it to
a level-0 SSTable while writes go on into a fresh memtable; a second thread compacts.

Durability: in a gateway node the Raft log is the write-ahead log. Writes carry their log
index; a flush records the highest index it covers in the manifest, and
:attr:`LSMStore.durable_applied_index` is what survives any crash: on restart the node replays
the log from there (replaying is idempotent: a row's state after replay is the same). With
``wal=True`` (standalone use) every batch is first appended to a record-stream WAL; with
``wal_sync=True`` an acknowledged write survives any crash.

Reads see the newest cell in: the active memtable, the frozen memtables (newest first), then
the tables of the current :class:`~.version.Version`. They take no lock; writers and the
background threads publish state in an order that keeps every read complete (see ``_rotate``
and ``_install``).

Thread-safety: all public methods may be called from any thread. Writes are serialised by one
lock; a write batch becomes visible atomically.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, NoReturn

from gateway.core.fileio import FileLock, FileSystem, local_fs
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.compaction import (
    Compaction,
    LeveledPolicy,
    TombstoneFloor,
    run_compaction,
)
from gateway.core.lsm.errors import (
    BackgroundError,
    CorruptionError,
    InvalidArgumentError,
    StoreClosedError,
    StoreLockedError,
)
from gateway.core.lsm.format import (
    FLAG_TOMBSTONE,
    TOMBSTONE,
    RowVersion,
    StoredRow,
    check_metadata,
    encode_cell,
    encode_cells,
    entry_of,
    prefix_end,
    version_of,
)
from gateway.core.lsm.manifest import MANIFEST_NAME, Edit, Manifest, VersionState, read_manifest
from gateway.core.lsm.memtable import ENTRY_OVERHEAD, Memtable
from gateway.core.lsm.memtable_log import MemtableLogWriter, replay_memtable_log
from gateway.core.lsm.read_snapshot import ReadSnapshot
from gateway.core.lsm.sstable_reader import SSTableReader
from gateway.core.lsm.sstable_writer import SSTableWriter, TableMeta
from gateway.core.lsm.version import Version

__all__ = ["LSMStore", "WriteBatch"]

_FILE_RE = re.compile(r"^(\d{6,})\.(sst|wal)$")
log = logging.getLogger("gateway.core.lsm")


def _keep_no_tombstone() -> TombstoneFloor:
    return (1 << 64, {})
#: A snapshot copies an active memtable this small instead of freezing it.
SNAPSHOT_COPY_LIMIT = 1024


def table_name(number: int) -> str:
    """File name of table ``number``."""
    return f"{number:06d}.sst"


def wal_name(number: int) -> str:
    """File name of WAL ``number``."""
    return f"{number:06d}.wal"


class _ClosedDict(dict[bytes, bytes]):
    """Stands in for the memtable of a closed store so the lock-free read path fails cleanly."""

    def get(self, *args: object) -> NoReturn:
        raise StoreClosedError("the store is closed")


_PLAIN = encode_cell(b"")  # the header of a cell without metadata


def _key(key: object) -> bytes:
    if type(key) is bytes:
        return key
    if isinstance(key, bytearray | memoryview):
        return bytes(key)
    raise InvalidArgumentError(f"keys and values must be bytes, not {type(key).__name__}")


class WriteBatch:
    """Operations applied atomically by :meth:`LSMStore.write_batch` (later ops win per key)."""

    def __init__(self) -> None:
        self.ops: list[tuple[bytes, bytes | None, int, int, int]] = []

    def put(
        self, key: bytes, value: bytes, *, epoch: int = 0, author: int = 0, commit_ts: int = 0
    ) -> None:
        """Add a put of ``key`` = ``value`` with its row metadata."""
        self.ops.append((key, value, epoch, author, commit_ts))

    def delete(self, key: bytes, *, epoch: int = 0, author: int = 0, commit_ts: int = 0) -> None:
        """Add a delete of ``key`` (the tombstone keeps the metadata)."""
        self.ops.append((key, None, epoch, author, commit_ts))

    def __len__(self) -> int:
        return len(self.ops)


class LSMStore:
    """A log-structured merge store in directory ``path``.

    Options: ``memtable_bytes`` (budget of the active memtable, approximate CPython bytes),
    ``cache_bytes`` (block cache: checked block payloads), ``block_bytes`` (data block target),
    ``target_file_bytes`` (compaction output size), ``base_level_bytes``,
    ``level_multiplier`` and ``l0_compaction_trigger`` (leveled policy; the defaults move as
    many bytes per level-0 compaction as level 1 holds, RocksDB's proportions -- see
    docs/lsm.md), ``l0_stop_trigger`` (writes wait while level 0 holds this many tables),
    ``max_immutable`` (frozen memtables waiting for flush before writes wait),
    ``busy_hold`` and ``busy_bytes_per_second`` (foreground first: while writes come in at
    ``busy_bytes_per_second`` or more, a due compaction waits until its level's pressure
    reaches ``busy_hold`` -- 12 level-0 tables with the defaults -- or the writes pause;
    ``busy_hold=1.0`` compacts as soon as a level is due, LevelDB's rule; see docs/lsm.md),
    ``drop_table_pages`` (flushes and compactions give the page cache's copy of the data
    blocks they write back to the OS as they sync them, like RocksDB's direct I/O for flush
    and compaction: reads fetch them from disk into the block cache; docs/lsm.md, "Page
    cache"),
    ``wal``/``wal_sync`` (own write-ahead log), ``background`` (threads; ``False`` runs flush
    and compaction inline, deterministically, for tests), ``paranoid_checks`` (verify every
    block of every table at open), ``fs`` (file layer, for fault injection).

    Raises :class:`CorruptionError` if a table or the manifest is damaged (naming file and byte
    offset) and :class:`StoreLockedError` if another store has the directory open.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        memtable_bytes: int = 32 << 20,
        *,
        cache_bytes: int = 64 << 20,
        block_bytes: int = 4096,
        target_file_bytes: int = 32 << 20,
        base_level_bytes: int = LeveledPolicy.base_level_bytes,
        level_multiplier: int = LeveledPolicy.multiplier,
        l0_compaction_trigger: int = LeveledPolicy.l0_trigger,
        l0_stop_trigger: int = 20,
        max_immutable: int = 2,
        busy_hold: float = 1.5,
        busy_bytes_per_second: int = 1 << 20,
        drop_table_pages: bool = True,
        wal: bool = False,
        wal_sync: bool = False,
        background: bool = True,
        paranoid_checks: bool = False,
        fs: FileSystem | None = None,
    ) -> None:
        if memtable_bytes <= 0 or block_bytes <= 0 or target_file_bytes <= 0 or max_immutable < 1:
            raise InvalidArgumentError("sizes must be positive and max_immutable >= 1")
        if not busy_hold >= 1.0 or busy_bytes_per_second < 0:  # ``not >=`` refuses NaN
            raise InvalidArgumentError("busy_hold must be >= 1.0 and busy_bytes_per_second >= 0")
        self.path = os.fspath(path)
        self._fs: FileSystem = fs or local_fs()
        self._memtable_bytes = memtable_bytes
        self._block_bytes = block_bytes
        self._target_file_bytes = target_file_bytes
        self._l0_stop = max(l0_stop_trigger, l0_compaction_trigger + 1)
        self._max_immutable = max_immutable
        self._policy = LeveledPolicy(l0_compaction_trigger, base_level_bytes, level_multiplier)
        self._busy_hold = busy_hold
        self._busy_rate = busy_bytes_per_second
        self._drop_table_pages = drop_table_pages
        #: Memtable bytes of the memtables frozen so far (with the active one's: all written).
        self._frozen_bytes = 0
        #: ``compact()`` calls waiting: while any does, due compactions are not held.
        self._compact_requests = 0
        #: ``(default, {author: floor})``: tombstones of deletes in epochs above the floor of
        #: their author are kept when compaction could drop them (conflict checks still need
        #: the delete's epoch and author); read by the compaction thread each time it merges.
        #: Default: keep none.
        self.tombstone_floor: Callable[[], TombstoneFloor] = _keep_no_tombstone
        self._wal_enabled = wal
        self._wal_sync = wal_sync
        self._background = background
        self._cache = BlockCache(cache_bytes)
        self._write_lock = threading.RLock()
        self._version_lock = threading.RLock()
        self._bg_cond = threading.Condition(threading.Lock())
        self._closed = False
        self._closing = False
        self._bg_error: BaseException | None = None
        self._pins = 0
        self._deferred: list[str] = []
        self._readers: dict[int, SSTableReader] = {}
        #: CRC-32C of whole table files by number, for tables opened from disk (those the store
        #: writes carry theirs: ``SSTableReader.file_crc``), computed once by the first
        #: snapshot export that includes the table (tables never change; exports run one at a
        #: time).
        self.table_crcs: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        self._wal: MemtableLogWriter | None = None
        self._imm: tuple[Memtable, ...] = ()
        #: ``(active memtable, its approximate_bytes, a frozen copy of it)`` (``_frozen_copy``).
        self._small_copy: tuple[Memtable, int, Memtable] | None = None
        self._dir_lock: FileLock | None = None
        #: The directory held tables or logs but no ``MANIFEST``: the store was started empty
        #: (logged as a warning); its owner must rebuild it.
        self.manifest_rebuilt = False
        self._fs.makedirs(self.path)
        self._lock_dir()
        try:
            self._open(paranoid_checks)
        except BaseException:
            self._release()
            raise
        if background:
            for target, name in ((self._flush_loop, "flush"), (self._compaction_loop, "compact")):
                t = threading.Thread(target=target, name=f"lsm-{name}", daemon=True)
                t.start()
                self._threads.append(t)
            self._kick()

    # --- opening ------------------------------------------------------------------------------

    def _lock_dir(self) -> None:
        try:
            self._dir_lock = self._fs.lock(os.path.join(self.path, "LOCK"))
        except BlockingIOError:
            raise StoreLockedError(
                f"{self.path}: another LSMStore has this directory open"
            ) from None

    def _open(self, paranoid: bool) -> None:
        fs, path = self._fs, self.path
        manifest_path = os.path.join(path, MANIFEST_NAME)
        fs.discard(manifest_path + ".tmp")  # an install that never reached its rename
        if fs.exists(manifest_path):
            state, data, edits = read_manifest(manifest_path, fs)
            self._manifest = Manifest(fs, path, state, data, edits)
        else:
            found = [n for n in fs.listdir(path) if n.endswith(".sst") and _FILE_RE.match(n)]
            if found:
                # Without the manifest nothing says which tables are live, in which level,
                # or up to which log index they hold: the store starts empty (its owner
                # rebuilds it: a node from its newest snapshot and log) and the files it
                # cannot use are removed below as orphans. Never silently.
                self.manifest_rebuilt = True
                log.warning("%s: missing; started an empty store and removed the %d tables it "
                            "cannot place (%s)", manifest_path, len(found), ", ".join(found))
            self._manifest = Manifest.create(fs, path, VersionState())
        state = self._manifest.state
        try:
            for tables in state.levels:
                for number in tables:
                    reader = SSTableReader(
                        os.path.join(path, table_name(number)), number, self._cache, fs=fs
                    )
                    self._readers[number] = reader
                    if paranoid:
                        reader.verify_all()
        except FileNotFoundError as e:
            self._close_readers()
            raise CorruptionError(
                str(e.filename), 0, "table named by the manifest is missing"
            ) from None
        except BaseException:
            self._close_readers()
            raise
        self._version = self._build_version()
        live = state.live_numbers()
        wals: list[int] = []
        highest = state.next_file - 1
        for name in fs.listdir(path):
            m = _FILE_RE.match(name)
            if not m:
                continue
            number = int(m.group(1))
            highest = max(highest, number)
            if m.group(2) == "sst" and number not in live:
                fs.discard(os.path.join(path, name))  # orphan of an interrupted flush/compaction
            elif m.group(2) == "wal":
                if number < state.wal_number:
                    fs.discard(os.path.join(path, name))
                else:
                    wals.append(number)
        self._next_file = highest + 1
        self._applied_index = state.applied_index
        self._mem = Memtable()
        if wals:
            self._recover_wals(wals)
        if self._wal_enabled:
            self._mem.wal_number = self._new_wal()

    def _recover_wals(self, numbers: list[int]) -> None:
        """Replay WAL files into a memtable and flush it, so recovery leaves no WAL behind."""
        mem = Memtable()
        for number in numbers:
            for log_index, keys, cells in replay_memtable_log(
                os.path.join(self.path, wal_name(number)), self._fs
            ):
                mem.apply(dict(zip(keys, cells, strict=False)))
                mem.max_log_index = max(mem.max_log_index, log_index)
        self._applied_index = max(self._applied_index, mem.max_log_index)
        self._flush_memtable(mem, next_wal=max(numbers) + 1)
        for number in numbers:
            self._fs.discard(os.path.join(self.path, wal_name(number)))

    def _build_version(self) -> Version:
        state = self._manifest.state
        levels = [[self._readers[n] for n in tables] for tables in state.levels]
        return Version(levels, state.applied_index)

    def _new_file_number(self) -> int:
        with self._version_lock:
            number = self._next_file
            self._next_file += 1
            return number

    def _new_wal(self) -> int:
        number = self._new_file_number()
        if self._wal is not None:
            self._wal.close()
        self._wal = MemtableLogWriter(
            self._fs, os.path.join(self.path, wal_name(number)), number, self._wal_sync
        )
        self._fs.sync_dir(self.path)  # the file must exist after a crash before it holds writes
        return number

    # --- properties ---------------------------------------------------------------------------

    def _is_closed(self) -> bool:
        return self._closed

    @property
    def applied_index(self) -> int:
        """Highest log index written to the store (durable or not)."""
        return self._applied_index

    @property
    def durable_applied_index(self) -> int:
        """Highest log index whose writes survive a crash without the store's own WAL."""
        return self._manifest.state.applied_index

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring and tests: tables and bytes per level, cache, memtables,
        memtable bytes written since open (``written_bytes``) and whether a due compaction
        is waiting for the writes to pause (``compaction_held``)."""
        v = self._version
        return {
            "levels": [len(lvl) for lvl in v.levels],
            "level_bytes": [v.level_bytes(i) for i in range(len(v.levels))],
            "memtable_bytes": self._mem.approximate_bytes,
            "immutable_memtables": len(self._imm),
            "immutable_bytes": sum(m.approximate_bytes for m in self._imm),
            "cache_bytes": self._cache.used_bytes,
            "applied_index": self._applied_index,
            "durable_applied_index": self.durable_applied_index,
            "written_bytes": self._written_bytes(),
            "compaction_held": self._held,
        }

    # --- writes -------------------------------------------------------------------------------

    def put(
        self,
        key: bytes,
        value: bytes,
        *,
        epoch: int = 0,
        author: int = 0,
        commit_ts: int = 0,
        log_index: int = 0,
    ) -> None:
        """Store ``value`` for ``key`` with its row metadata (epoch, author, commit timestamp).

        ``log_index`` is the Raft index of the entry this write applies (0 = none).
        """
        if type(key) is not bytes or type(value) is not bytes:
            key, value = _key(key), _key(value)
        if epoch or author or commit_ts:
            self._check_meta(epoch, author, commit_ts)
            cell = encode_cell(value, epoch, author, commit_ts)
        else:
            cell = b"\x00" + value
        with self._write_lock:
            if self._bg_error is not None or self._closed:
                self._raise_unwritable()
            if self._wal is not None:
                self._wal.append([key], [cell], log_index)
            mem = self._mem
            if mem._views:
                mem.preserve((key,))
            mem.data[key] = cell
            mem.approximate_bytes += len(key) + len(cell) + ENTRY_OVERHEAD
            if log_index:
                mem.max_log_index = self._applied_index = max(log_index, self._applied_index)
            if mem.approximate_bytes >= self._memtable_bytes:
                self._rotate()

    def delete(
        self, key: bytes, *, epoch: int = 0, author: int = 0, commit_ts: int = 0, log_index: int = 0
    ) -> None:
        """Delete ``key`` (writes a tombstone carrying the metadata)."""
        batch = WriteBatch()
        batch.delete(key, epoch=epoch, author=author, commit_ts=commit_ts)
        self.write_batch(batch, log_index=log_index)

    def write_batch(
        self, ops: WriteBatch | Iterable[tuple[Any, ...]], *, log_index: int = 0
    ) -> None:
        """Apply ``ops`` atomically: readers and crashes see all of them or none.

        ``ops`` is a :class:`WriteBatch` or an iterable of tuples ``(key, value)`` or
        ``(key, value, epoch, author, commit_ts)``; ``value=None`` deletes.
        """
        items = ops.ops if isinstance(ops, WriteBatch) else ops
        # The usual batch (the state machine's: a list of 5-tuples of bytes and ints in range)
        # is encoded in one call (format.encode_cells, in C when built); anything else -- and
        # what must be refused -- takes the general loop (_cells).
        batch = encode_cells(items)
        if batch is None:
            batch = self._cells(items)
        with self._write_lock:
            if self._bg_error is not None or self._closed:
                self._raise_unwritable()
            if self._wal is not None and (batch or log_index):
                self._wal.append(list(batch), list(batch.values()), log_index)
            mem = self._mem
            mem.apply(batch)
            if log_index:
                mem.max_log_index = self._applied_index = max(log_index, self._applied_index)
            if mem.approximate_bytes >= self._memtable_bytes:
                self._rotate()

    def mark_applied(self, log_index: int) -> None:
        """Record that log entries up to ``log_index`` are applied (entries without row writes)."""
        self.write_batch((), log_index=log_index)

    @staticmethod
    def _cells(items: Iterable[tuple[Any, ...]]) -> dict[bytes, bytes]:
        """The cells of ``items`` keyed by key (``write_batch``'s general path: 2-tuples,
        bytes-like keys and values, metadata to check); raises ``InvalidArgumentError``."""
        batch: dict[bytes, bytes] = {}
        # Ops of one batch mostly share their metadata (every row of a transaction): the cell
        # header of the last metadata seen is reused (same bytes as ``encode_cell``; checked
        # and packed again whenever the metadata, or the type of one of its numbers, changes).
        last_meta: tuple[Any, ...] | None = None
        live_head = dead_head = b""
        for op in items:
            if len(op) == 5:
                key, value, epoch, author, commit_ts = op
                if not (epoch or author or commit_ts):
                    cell = None
                elif (epoch, author, commit_ts) == last_meta and type(epoch) is int \
                        and type(author) is int and type(commit_ts) is int:
                    cell = live_head if value is not None else dead_head
                else:
                    LSMStore._check_meta(epoch, author, commit_ts)
                    dead_head = encode_cell(None, epoch, author, commit_ts)
                    live_head = encode_cell(b"", epoch, author, commit_ts)
                    last_meta = (epoch, author, commit_ts)
                    cell = live_head if value is not None else dead_head
            elif len(op) == 2:
                key, value = op
                cell = None
            else:
                raise InvalidArgumentError(
                    f"a batch op is (key, value[, epoch, author, commit_ts]), not {op!r}"
                )
            if type(key) is not bytes:
                key = _key(key)
            if value is None:
                batch[key] = TOMBSTONE if cell is None else cell
            else:
                if type(value) is not bytes:
                    value = _key(value)
                batch[key] = (_PLAIN if cell is None else cell) + value
        return batch

    @staticmethod
    def _check_meta(epoch: int, author: int, commit_ts: int) -> None:
        try:
            check_metadata(epoch, author, commit_ts)
        except (ValueError, TypeError) as e:
            raise InvalidArgumentError(str(e)) from None

    def _raise_unwritable(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")
        raise BackgroundError("a background flush or compaction failed") from self._bg_error

    def _rotate(self) -> None:
        """Freeze the active memtable and start a new one (caller holds the write lock).

        Publication order keeps lock-free reads complete: the frozen table joins ``_imm``
        before the new active table replaces it.
        """
        if self._background:
            with self._bg_cond:
                while (
                    (
                        len(self._imm) >= self._max_immutable
                        or len(self._version.level0) >= self._l0_stop
                    )
                    and self._bg_error is None
                    and not self._closing
                ):
                    self._bg_cond.wait(0.5)
        if self._bg_error is not None:
            self._raise_unwritable()
        wal_number = self._new_wal() if self._wal_enabled else 0
        old = self._mem
        self._frozen_bytes += old.approximate_bytes
        self._imm = (*self._imm, old)
        self._mem = Memtable(wal_number)
        self._small_copy = None  # (it would keep the frozen table alive)
        if self._background:
            self._kick()
        else:
            self._flush_pending()
            self._compact_pending()

    # --- reads --------------------------------------------------------------------------------

    def _cell(self, key: bytes) -> bytes | None:
        cell = self._mem.data.get(key)
        if cell is None:
            for mem in reversed(self._imm):
                cell = mem.data.get(key)
                if cell is not None:
                    return cell
            return self._version.get(key)
        return cell

    def cell(self, key: bytes) -> bytes | None:
        """The newest cell of ``key`` (bytes) as the store keeps it -- flags byte, metadata,
        value: ``format.version_of`` reads it --, or None when the store holds nothing for
        it. For readers that parse the metadata themselves (``node._judge``)."""
        return self._cell(key)

    def cells(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        """``{k: cell(k) for k in keys}`` (bytes keys; repeats answered once), answered for
        the whole list at once: the memtables by dictionary lookups, then the tables for the
        keys still unanswered in one pass (``Version.cells``). For a reader about to look up
        many keys one by one (the epoch judgement)."""
        get = self._mem.data.get
        out = {k: get(k) for k in keys}
        rest = [k for k, c in out.items() if c is None]
        for mem in reversed(self._imm):  # newest first, as ``_cell``
            if not rest:
                break
            data = mem.data
            still = []
            for k in rest:
                cell = data.get(k)
                if cell is None:
                    still.append(k)
                else:
                    out[k] = cell
            rest = still
        if rest:
            out.update(self._version.cells(rest))  # the keys it leaves out stay None
        return out

    def holds_any(self, keys: list[bytes]) -> bool:
        """True when the store holds anything -- a row or a retained tombstone -- for some
        key of ``keys`` (bytes): ``get_version(k) is not None`` for any ``k``, answered for
        the whole list at once (memtables by set disjointness, tables by bloom filter)."""
        if not self._mem.data.keys().isdisjoint(keys):
            return True
        for mem in self._imm:
            if not mem.data.keys().isdisjoint(keys):
                return True
        return self._version.holds_any(keys)

    def held_cells(self, keys: list[bytes]) -> dict[bytes, bytes | None] | None:
        """None when ``holds_any(keys)`` is False; else ``cells(keys)``. For a reader that
        asks whether the keys are fresh and, when they are not, needs their cells: the
        tables are probed once for both answers (the memtables by set disjointness first, as
        ``holds_any``)."""
        if not self._mem.data.keys().isdisjoint(keys) or any(
                not mem.data.keys().isdisjoint(keys) for mem in self._imm):
            return self.cells(keys)
        found = self._version.cells(keys)
        if not found:
            return None
        out: dict[bytes, bytes | None] = dict.fromkeys(keys)
        out.update(found)
        return out

    def held(self, keys: list[bytes]) -> set[bytes]:
        """The keys of ``keys`` (bytes) the store holds anything for -- a row or a retained
        tombstone: ``{k for k in keys if get_version(k) is not None}``, answered for the whole
        list at once (memtables by dictionary lookups, tables by bloom filter in one pass, as
        :meth:`holds_any`). What a caller needs before looking up many keys that are mostly
        absent: only those returned can be found."""
        out = self._mem.data.keys() & keys
        for mem in self._imm:
            out |= mem.data.keys() & keys
        rest = [k for k in keys if k not in out] if out else keys
        out.update(self._version.held(rest))
        return out

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None`` if absent or deleted."""
        cell = self._mem.data.get(key)
        if cell is None:
            if type(key) is not bytes:
                key = _key(key)
            for mem in reversed(self._imm):
                cell = mem.data.get(key)
                if cell is not None:
                    break
            else:
                cell = self._version.get(key)
                if cell is None:
                    return None
        flags = cell[0]
        if flags == 0:
            return cell[1:]
        if flags & FLAG_TOMBSTONE:
            return None
        return cell[21:]

    def get_entry(self, key: bytes) -> StoredRow | None:
        """The value of ``key`` with its epoch, author and commit timestamp, or ``None``."""
        cell = self._cell(_key(key))
        return None if cell is None else entry_of(cell)

    def get_version(self, key: bytes) -> RowVersion | None:
        """The newest version of ``key``, a delete included (``value`` None, with the
        delete's metadata while its tombstone is retained: see ``tombstone_floor``); None
        when the store holds nothing for ``key``."""
        cell = self._cell(_key(key))
        return None if cell is None else version_of(cell)

    def __contains__(self, key: bytes) -> bool:
        return self.get(key) is not None

    def snapshot(self) -> ReadSnapshot:
        """A point-in-time view (get, get_entry, scan) that stays valid while compaction runs.

        Close it (or use it as a context manager) to let deleted files go.
        """
        with self._write_lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            mem = self._mem
            if len(mem.data) <= SNAPSHOT_COPY_LIMIT:
                frozen = [self._frozen_copy(mem)] if mem.data else []
            else:
                if self._bg_error is not None:
                    self._raise_unwritable()
                self._rotate()
                frozen = []
            with self._version_lock:
                mems = frozen + list(reversed(self._imm))
                return ReadSnapshot(self._is_closed, mems, self._version)

    def _frozen_copy(self, mem: Memtable) -> Memtable:
        """A frozen copy of the small active memtable ``mem`` for a snapshot: the same copy
        for every snapshot until ``mem`` is written again (every write grows its
        ``approximate_bytes``), so scans of a store that is not being written sort it once,
        not once per scan. Caller holds the write lock."""
        got = self._small_copy
        if got is not None and got[0] is mem and got[1] == mem.approximate_bytes:
            return got[2]
        copy = mem.copy()
        self._small_copy = (mem, mem.approximate_bytes, copy)
        return copy

    def _range_snapshot(self, start: bytes | None, end: bytes | None) -> ReadSnapshot:
        """A point-in-time view for reading ``[start, end)`` only (the scans' own, never
        handed out: outside the range its gets may miss what the active memtable held).

        Unlike :meth:`snapshot` it never freezes the active memtable: a large one gives a
        view of its pairs in the range (``Memtable.view``), so a scan under write load
        neither sorts the whole table on the caller's thread nor makes a level-0 table (and
        the compaction behind it), nor waits for a flush when memtables are backed up."""
        with self._write_lock:
            if self._closed:
                raise StoreClosedError("the store is closed")
            mem = self._mem
            view = None
            frozen = []
            if len(mem.data) > SNAPSHOT_COPY_LIMIT:
                view = mem.view(start, end)
            elif mem.data:
                frozen = [self._frozen_copy(mem)]
            with self._version_lock:
                mems = frozen + list(reversed(self._imm))
                return ReadSnapshot(self._is_closed, mems, self._version, view)

    def scan(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Live ``(key, value)`` pairs with ``start <= key < end`` in key order (``None`` = open).

        The iterator reads a snapshot of the range taken when it is created; taking it does
        not freeze the active memtable (``_range_snapshot``).
        """
        snap = self._range_snapshot(start, end)
        return snap._scan_owned(start, end)

    def scan_framed(self, start: bytes | None, end: bytes | None, key: bytes, limit: int,
                    max_bytes: int, shape_fields: bytes = b""
                    ) -> tuple[bytes, int, bool, bytes | None]:
        """``ReadSnapshot.scan_framed`` over a snapshot of the range taken now (as
        :meth:`scan` takes it): the live values framed as a repeated protobuf field,
        ``(framed, count, more, shape)``."""
        with self._range_snapshot(start, end) as snap:
            return snap.scan_framed(start, end, key, limit, max_bytes, shape_fields)

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Live pairs whose key starts with ``prefix``, in key order."""
        return self.scan(prefix, prefix_end(prefix))

    def scan_entries(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, StoredRow]]:
        """Like :meth:`scan` but yields ``(key, StoredRow)`` with the row metadata."""
        snap = self._range_snapshot(start, end)
        return snap._scan_entries_owned(start, end)

    # --- flush --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Freeze the active memtable and wait until it and every memtable frozen before it
        are in tables.

        Afterwards :attr:`durable_applied_index` is at least the :attr:`applied_index` of the
        moment of the call (equal to it if nothing was written meanwhile). Writes that go on
        concurrently land in newer memtables and are not waited for: under sustained writes
        (which freeze new memtables all the time) a flush still ends.
        """
        with self._write_lock:
            if self._bg_error is not None or self._closed:
                self._raise_unwritable()
            if self._mem.data or self._mem.max_log_index > self.durable_applied_index:
                self._rotate()
            # Memtables are flushed oldest first, so once the newest frozen one has left
            # ``_imm`` every one frozen before it has too.
            target = self._imm[-1] if self._imm else None
        if target is not None:
            self._wait(lambda: all(m is not target for m in self._imm))

    def compact(self) -> None:
        """Flush, then wait until no level needs compaction (due compactions are not held for
        writes going on meanwhile)."""
        self.flush()
        if not self._background:
            return
        with self._bg_cond:
            self._compact_requests += 1
            self._bg_cond.notify_all()
        try:
            self._wait(
                lambda: (
                    self._policy.pick(self._version, self._manifest.state.pointers) is None
                    and not self._busy
                )
            )
        finally:
            with self._bg_cond:
                self._compact_requests -= 1

    def _wait(self, done: Callable[[], bool]) -> None:
        if not self._background:
            return
        with self._bg_cond:
            while not done():
                if self._bg_error is not None:
                    self._raise_unwritable()
                if self._closed:
                    raise StoreClosedError("the store is closed")
                self._bg_cond.wait(0.1)

    def _kick(self) -> None:
        with self._bg_cond:
            self._bg_cond.notify_all()

    def _flush_loop(self) -> None:
        while True:
            with self._bg_cond:
                while not self._imm and not self._closing:
                    self._bg_cond.wait()
                if not self._imm:
                    return
            try:
                self._flush_one()
            except BaseException as e:
                self._fail(e)
                return
            self._kick()

    def _flush_pending(self) -> None:
        while self._imm:
            self._flush_one()

    def _flush_one(self) -> None:
        mem = self._imm[0]
        next_wal = self._imm[1].wal_number if len(self._imm) > 1 else self._mem.wal_number
        self._flush_memtable(mem, next_wal=next_wal, pop=True)
        if mem.wal_number:
            self._fs.discard(os.path.join(self.path, wal_name(mem.wal_number)))

    def _flush_memtable(self, mem: Memtable, *, next_wal: int, pop: bool = False) -> None:
        """Write ``mem`` as a level-0 table and install it; ``pop`` drops it from ``_imm``."""
        keys, cells = mem.sorted_items()
        edit = Edit(applied_index=mem.max_log_index or None, wal_number=next_wal or None)
        reader = None
        if keys:
            number = self._new_file_number()
            path = os.path.join(self.path, table_name(number))
            writer = SSTableWriter(self._fs, path, number, self._block_bytes,
                                   drop_cache=self._drop_table_pages)
            try:
                writer.add(keys, cells)
                meta = writer.finish()
            except BaseException:
                writer.abandon()
                raise
            self._fs.sync_dir(self.path)
            reader = SSTableReader(path, number, self._cache, fs=self._fs,
                                   file_crc=writer.file_crc)
            edit.add.append((0, meta))
        self._install(edit, {reader.number: reader} if reader else {}, pop_imm=pop)

    def _install(
        self, edit: Edit, new_readers: dict[int, SSTableReader], *, pop_imm: bool = False
    ) -> None:
        """Make ``edit`` durable in the manifest, then publish the new version.

        The new version is published before the flushed memtable leaves ``_imm``, so a
        lock-free reader always finds the data in one or the other.
        """
        with self._version_lock:
            edit.next_file = self._next_file
            self._manifest.install(edit)
            self._readers.update(new_readers)
            for _, number in edit.remove:
                if not any(number == m.number for _, m in edit.add):
                    self._readers.pop(number, None)
            self._version = self._build_version()
            if pop_imm:
                self._imm = self._imm[1:]

    # --- compaction ---------------------------------------------------------------------------

    _busy = False
    _held = False  # a due compaction waits for the writes to pause (stats' compaction_held)

    def _compaction_loop(self) -> None:
        while True:
            with self._bg_cond:
                go = self._await_compaction()
                self._held = False
                if not go:
                    self._busy = False
                    return
                self._busy = True
            try:
                self._compact_once()
            except InterruptedError:
                return
            except BaseException as e:
                self._fail(e)
                return
            self._kick()

    #: Seconds over which the write rate is judged when a due compaction may be held.
    _BUSY_WINDOW = 0.25

    def _written_bytes(self) -> int:
        """Memtable bytes written since open (frozen memtables' and the active one's)."""
        return self._frozen_bytes + self._mem.approximate_bytes

    def _await_compaction(self) -> bool:
        """Wait (holding ``_bg_cond``) until a compaction should start: True, or False when
        the store is closing; ``_held`` is True while a due one waits (the caller clears it).

        Foreground first: a level that is due (pressure >= 1) but below ``busy_hold`` waits
        while the store takes writes at ``busy_bytes_per_second`` or more, measured over
        windows of ``_BUSY_WINDOW`` seconds from memtable bytes -- under sustained writes it
        starts at ``busy_hold`` (level 0: 12 tables, not 8), and a burst's merge moves into
        the pause after it. A ``compact()`` caller, and the level reaching ``busy_hold``, end
        the hold at once, as does level 0 reaching ``l0_stop_trigger`` (writers wait there).
        """
        sample: tuple[float, int] | None = None  # (when, bytes written then) of this hold
        while not self._closing:
            top = max(self._policy.scores(self._version))
            if top < 1.0:
                sample = None
                self._busy = self._held = False
                self._bg_cond.notify_all()
                self._bg_cond.wait()
                continue
            if (top >= self._busy_hold or self._compact_requests
                    or len(self._version.level0) >= self._l0_stop):  # writers wait: never hold
                return True
            now, written = time.monotonic(), self._written_bytes()
            if sample is None:
                sample = (now, written)
            elif now - sample[0] >= self._BUSY_WINDOW:
                if written - sample[1] <= self._busy_rate * (now - sample[0]):
                    return True  # the writes paused
                sample = (now, written)
            self._busy, self._held = False, True
            self._bg_cond.notify_all()
            self._bg_cond.wait(max(0.01, self._BUSY_WINDOW - (now - sample[0])))
        return False

    def _compact_pending(self) -> None:
        while self._compact_once():
            pass

    def _compact_once(self) -> bool:
        c = self._policy.pick(self._version, self._manifest.state.pointers)
        if c is None:
            return False
        if c.is_move:
            t = c.inputs[0]
            edit = Edit(
                remove=[(c.level, t.number)],
                add=[(c.output_level, t.meta)],
                pointers={c.level: c.pointer},
            )
            self._install(edit, {})
            return True
        outputs = run_compaction(
            c,
            self._fs,
            self._allocate_table,
            block_bytes=self._block_bytes,
            target_file_bytes=self._target_file_bytes,
            should_stop=lambda: self._closing,
            tombstone_floor=self.tombstone_floor(),
            drop_cache=self._drop_table_pages,
        )
        self._fs.sync_dir(self.path)
        readers = {
            meta.number: SSTableReader(path, meta.number, self._cache, fs=self._fs,
                                       file_crc=crc)
            for meta, path, crc in outputs
        }
        edit = self._compaction_edit(c, [meta for meta, _, _ in outputs])
        self._install(edit, readers)
        self._delete_obsolete(c.inputs + c.overlaps)
        return True

    def _allocate_table(self) -> tuple[int, str]:
        number = self._new_file_number()
        return number, os.path.join(self.path, table_name(number))

    @staticmethod
    def _compaction_edit(c: Compaction, outputs: list[TableMeta]) -> Edit:
        remove = [(c.level, t.number) for t in c.inputs] + [
            (c.output_level, t.number) for t in c.overlaps
        ]
        pointers = {c.level: c.pointer} if c.level > 0 else {}
        return Edit(add=[(c.output_level, m) for m in outputs], remove=remove, pointers=pointers)

    def _delete_obsolete(self, tables: list[SSTableReader]) -> None:
        """Unlink tables that left the version. Open mappings (snapshots) keep working."""
        with self._version_lock:
            for t in tables:
                t.retire()
                if self._pins:
                    self._deferred.append(t.path)
                else:
                    self._fs.discard(t.path)

    @contextlib.contextmanager
    def _pinned(self) -> Iterator[None]:
        """Defer file deletion (snapshot export links the files of a version)."""
        with self._version_lock:
            self._pins += 1
        try:
            yield
        finally:
            with self._version_lock:
                self._pins -= 1
                if not self._pins:
                    for path in self._deferred:
                        self._fs.discard(path)
                    self._deferred = []

    def _fail(self, error: BaseException) -> None:
        with self._bg_cond:
            if self._bg_error is None:
                self._bg_error = error
            self._bg_cond.notify_all()

    # --- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background threads, flush the memtable (best effort) and release files.

        Idempotent. After a background failure nothing more is written.
        """
        if self._closed:
            return
        try:
            with self._write_lock:
                if self._bg_error is None and (
                    self._mem.data
                    or self._imm
                    or self._mem.max_log_index > self.durable_applied_index
                ):
                    with contextlib.suppress(BackgroundError):
                        self._rotate()
            if self._background and self._bg_error is None:
                self._wait(lambda: not self._imm)
        finally:
            self._stop_threads()
            self._release()

    def _stop_threads(self) -> None:
        """Tell the background threads to finish and wait for them."""
        with self._bg_cond:
            self._closing = True
            self._bg_cond.notify_all()
        for t in self._threads:
            t.join()

    def _release(self) -> None:
        self._closed = True
        self._small_copy = None
        self._mem = Memtable()
        self._mem.data = _ClosedDict()
        self._imm = ()
        if self._wal is not None:
            with contextlib.suppress(Exception):
                self._wal.close()
        self._close_readers()
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    def _close_readers(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers = {}

    def __enter__(self) -> LSMStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def abandon(self) -> None:
        """Drop the store without flushing (a simulated process crash in tests)."""
        self._stop_threads()
        self._release()


__all__ += ["TOMBSTONE", "prefix_end"]
