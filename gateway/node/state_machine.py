"""``StoreStateMachine``: committed Raft entries applied to the node's LSM store.

What applying an entry does (identically on every replica, from the entry's bytes alone):

- a transaction entry (tag ``TRANSACTION`` + ``Transaction``, whose ``idempotency_key`` field
  carries the client's key):
  1. if it carries an idempotency key whose record exists for another log index, it is a
     duplicate: nothing is applied, the entry is marked ``x<index>`` and the first result is
     returned with ``duplicate=True``;
  2. its statements are checked against the first-seen schemas (``validation``); a rejected
     entry is marked ``x<index>`` and nothing of it is applied;
  2b. its conditions, if any (a conditional write), are checked against the rows as they
     stand (``conditions.refusal``); a refused entry is marked ``x<index>`` (``refused: ...``),
     nothing of it is applied, and its result is recorded under its idempotency key, so a
     retry gets the same refusal (a duplicate of a refused entry is refused alike);
  3. otherwise every row is written (``r`` keys, value = serialized ``Row`` with the epoch,
     author, commit timestamp, GTID and log index; the store cell carries epoch, author and
     commit timestamp too), new schemas are recorded (``s``), and the result is recorded under
     the idempotency key (``i``) with an expiry index entry (``j`` + commit ts + key);
- an applier position entry (tag ``APPLIER_POSITION`` + ``gateway.v1.ApplierPosition``, proposed
  by the leader for its cluster-scoped appliers) is recorded under ``m applier:<name>`` (the
  entry's message bytes) unless the recorded position of that applier has a larger
  ``log_index`` -- so a stale proposal of an old leader committed late never moves a position
  back; an entry that does not parse or names no applier changes nothing;
- a replicated epoch (tag ``REPLICATED_EPOCH`` + ``gateway.v1.ReplicatedEpoch``, proposed by a
  replication channel's runner on the leader; docs/replication.md): a segment that is not the
  last is staged (``m seg:<channel>:<n>``; segment 1 drops what an earlier, abandoned unit of
  the channel staged); the last one reassembles the unit and applies it all or nothing. It is
  refused (``x<index>``, nothing applied) when ``ReplicationState.refusal`` says so, a
  conflict rule cannot run or its exceptions cannot be written (``epoch_guards``); a
  transaction that fails the schema check is quarantined (``m qt:``), the rest applies.
  Otherwise every transaction's rows are written with its
  origin GTID, author and commit timestamp and this cluster's ``local_epoch`` (the row's
  last change *here*, what conflict detection compares), without touching this cluster's
  GTID counter, clock or idempotency records; the origin watermarks (``m w:<origin>``) and
  apply-status rows (``m as:<server_id>:<applied_by>``) are raised;
- a channel command (tag ``CHANNEL_COMMAND``) adds, replaces or removes a channel definition
  (``m ch:<name>``); a conflict command (``CONFLICT_COMMAND``) sets or unsets a conflict rule
  (``m cr:<table pattern>``) or sets this cluster's conflict role (``m role``); an alarm
  command (``ALARM_COMMAND``) raises or clears a node's NOSPACE alarm (``m alarm:<node>``,
  ``gateway.node.alarms``);
- any other entry (leader no-op, epoch marker, configuration change) only advances the
  applied index.

Idempotency records expire: a record counts for an entry committed at ``T`` only if its own
commit timestamp is at least ``T - idempotency_window`` (24 h by default), so a retry is
recognised for a day after the first attempt committed. At the end of every ``apply`` the
records older than ``floor((T_last - window) / 1 s)`` seconds (``T_last``: the largest commit
timestamp applied so far) are deleted together with their index entries. Both rules depend
only on the log, never on how entries were grouped into ``apply`` calls or on the clock, so
replicas stay byte-equal and expiry never changes an outcome.

One ``apply`` call is one atomic store batch whose log index is the last entry's, so the
store's applied index never covers half a Ready. The store is not fsynced: the Raft log is its
write-ahead log and a restart replays from ``durable_applied_index`` (replay is deterministic,
so it rewrites the same bytes).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping

from google.protobuf.message import DecodeError

from gateway.conflict import (
    BUILTIN,
    ConflictConfigError,
    ConflictRule,
    Context,
    FunctionSpec,
    Role,
    RoleNotSetError,
    RuleSet,
    Stored,
)
from gateway.conflict.rules import rule_from_proto, rule_to_proto
from gateway.core.fileio import local_fs
from gateway.core.lsm import LSMStore, export_snapshot, import_snapshot
from gateway.core.lsm.format import prefix_end
from gateway.core.messages import TypeTag
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, join_segments, transactions
from gateway.v1 import (
    applier_pb2,
    gateway_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
)

from . import keys
from .alarms import apply_alarm_command, load_alarms
from .conditions import refusal, refusal_marker, refusal_of_marker
from .conflict_apply import (
    UnitJudgement,
    derived_transaction,
    fresh_insert_keys,
    judge_unit,
    refresh_statement,
    ruled_statements,
    stored_of_row,
)
from .epoch_guards import (
    check_ruled_shapes,
    derived_problem,
    emptied,
    quarantine_op,
)
from .errors import PreconditionFailed
from .snapshot_files import unpack_dir
from .validation import (
    InvalidRequest,
    TableSchema,
    check_statements,
    qualified_name,
)
from .wire import (
    decode_entry,
    encode_transaction,
    insert_header_span,
    insert_rows,
    meta_parts,
    parse_txn,
    retag_record,
    row_tail,
    split_insert,
    write_result,
)

__all__ = ["Applied", "ConflictFunctionMissingError", "StoreStateMachine"]

_MAX_SKIPS = 100_000
_J_END = prefix_end(keys.IDEMPOTENCY_EXPIRY_PREFIX)  # past every expiry index key
_U64 = struct.Struct(">Q")
#: Default idempotency window: a retry is recognised for this long after the first commit.
IDEMPOTENCY_WINDOW_NS = 24 * 3600 * 10**9
_EXPIRY_GRAIN_NS = 10**9
_TXN = TypeTag.TRANSACTION
_POS = TypeTag.APPLIER_POSITION
_UNIT = TypeTag.REPLICATED_EPOCH
_CHANNEL = TypeTag.CHANNEL_COMMAND
_CONFLICT = TypeTag.CONFLICT_COMMAND
_ALARM = TypeTag.ALARM_COMMAND
_MISSING = object()
_NONE: frozenset[bytes] = frozenset()
log = logging.getLogger(__name__)


def _seg_key(channel: str, segment_id: int) -> bytes:
    """Where a staged segment of a replicated epoch of ``channel`` is kept."""
    return keys.meta_key(f"seg:{channel}:{segment_id}")


class Applied:
    """The outcome of one applied transaction entry (``result`` or ``error`` is set).

    ``wire``: the serialized ``WriteResult``; ``result`` is parsed from it on first use, so a
    replica with nobody waiting for the entry never builds the message."""

    __slots__ = ("_result", "error", "index", "term", "wire")

    def __init__(self, index: int, term: int, result: gateway_pb2.WriteResult | None = None,
                 error: InvalidRequest | PreconditionFailed | None = None,
                 wire: bytes | None = None) -> None:
        self.index = index
        self.term = term
        self._result = result
        self.error = error
        self.wire = wire

    @property
    def result(self) -> gateway_pb2.WriteResult | None:
        if self._result is None and self.wire is not None:
            self._result = gateway_pb2.WriteResult.FromString(self.wire)
        return self._result


def _schema_to_row(name: str, schema: TableSchema) -> bytes:
    # Split at the first dot: the leader refuses dots in schema and table names (a name
    # without one is a schema-less table of an old log).
    schema_name, dot, table = name.partition(".")
    if not dot:
        schema_name, table = "", schema_name
    row = gateway_pb2.Row(table=statement_pb2.TableMetadata(schema_name=schema_name,
                                                            table_name=table))
    for n, t in schema.key_fields:
        row.key_fields.add(name=n, type=t)  # type: ignore[arg-type]
    key_names = {n for n, _ in schema.key_fields}
    for n, t in schema.columns.items():
        if n not in key_names:
            row.fields.add(name=n, type=t)  # type: ignore[arg-type]
    return row.SerializeToString()


def _schema_from_row(row: gateway_pb2.Row) -> TableSchema:
    key_fields = tuple((f.name, f.type) for f in row.key_fields)
    cols = dict(key_fields)
    cols.update((f.name, f.type) for f in row.fields)
    return TableSchema(key_fields, cols)


#: The counters that hold an epoch (the newest wins), not a count.
_LAST_EPOCHS = frozenset({"last_conflict_epoch", "last_stable_epoch"})


class ConflictFunctionMissingError(RuntimeError):
    """A replicated epoch meets a conflict rule whose function this node lacks (a plugin it
    did not load). Applying it here without the function could make this node differ from
    the others, so ``apply`` raises and the node stops with this message."""


class StoreStateMachine:
    """The LSM store of a node (``DATA/store``) and the rules for applying entries to it."""

    def __init__(self, data_dir: str, *, memtable_bytes: int = 32 << 20,
                 idempotency_window_ns: int = IDEMPOTENCY_WINDOW_NS,
                 cluster_id: int = 0, verify_tables: bool = False) -> None:
        """``idempotency_window_ns`` is part of the replicated rules: every replica of a
        cluster must use the same value (the node always uses the default). ``cluster_id``:
        this cluster's id (the GTID server_id of its own writes), needed to apply replicated
        epochs. ``verify_tables``: check every block of every table on open (the store's
        ``paranoid_checks``), so a damaged block refuses the open with its file and offset
        instead of failing a read or a compaction later. A failed open closes the store."""
        self.cluster_id = cluster_id
        if idempotency_window_ns <= 0:
            raise ValueError("idempotency_window_ns must be positive")
        self.window_ns = idempotency_window_ns
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, "store")
        self._memtable_bytes = memtable_bytes
        staged = self.path + ".new"
        if os.path.isdir(staged):
            if os.path.isdir(self.path):
                shutil.rmtree(staged)  # an interrupted restore; the snapshot is re-imported
            else:
                self._install_staged(staged)
        self.store = LSMStore(self.path, memtable_bytes, paranoid_checks=verify_tables)
        #: The conflict functions rules may name: the built-ins, and what ``load_functions``
        #: (set by the node: the plugins' functions) adds when a rule names another.
        self.conflict_functions: Mapping[str, FunctionSpec] = BUILTIN
        self.load_functions: Callable[[], Mapping[str, FunctionSpec]] | None = None
        try:
            self._load()
        except BaseException:
            self.store.close()  # a damaged block met by the load: release the directory
            raise

    def _load(self) -> None:
        self.store.tombstone_floor = self._tombstone_floor
        #: (floor, marks): the entries above ``floor`` this object marked skipped, ascending
        #: (``skipped_between``). Replaced whole, never mutated but by ``append``, so a reader
        #: on another thread takes one consistent pair.
        self._skips: tuple[int, list[int]] = (self.store.applied_index, [])
        self._marked: list[int] = []  # entries the running ``apply`` marks skipped (_mark)
        #: Idempotency record keys the store held nothing for when the running ``apply``
        #: began (``_parse_batch``): ``_first_result`` does not look them up.
        self._unrecorded: set[bytes] | frozenset[bytes] = _NONE
        self._expired_to = 0  # expiry index entries below this commit ts are gone
        #: No expiry index entry in the store has a commit ts below this (None: there are
        #: none), so ``_expire`` scans only when one may be due -- not once a second on the
        #: apply path for nothing when no write carries an idempotency key (a scan of a large
        #: active memtable sorts the keys written since the previous scan).
        self._oldest_expiry: int | None = None
        for k, _ in self.store.scan_prefix(keys.IDEMPOTENCY_EXPIRY_PREFIX):
            self._oldest_expiry = keys.parse_idempotency_expiry_key(k)[0]
            break
        self._heads: dict[bytes, tuple[bytes, bytes, bytes]] = {}
        self.schemas: dict[str, TableSchema] = {}
        for k, v in self.store.scan_prefix(b"s"):
            self.schemas[k[1:].decode()] = _schema_from_row(gateway_pb2.Row.FromString(v))
        #: Replicated positions of cluster-scoped appliers by name (read by other threads: the
        #: mapping is only ever updated item by item).
        self.applier_positions: dict[str, applier_pb2.ApplierPosition] = {}
        prefix = keys.applier_position_key("")
        for k, v in self.store.scan_prefix(prefix):
            self.applier_positions[k[len(prefix):].decode()] = \
                applier_pb2.ApplierPosition.FromString(v)
        #: Origin watermarks and apply-status table (read by other threads: replaced, never
        #: mutated, by apply).
        self.replication = ReplicationState(self.cluster_id)
        for k, v in self.store.scan_prefix(keys.meta_key("w:")):
            self.replication.watermarks[int(k[len(keys.meta_key("w:")):])] = \
                _U64.unpack(v)[0]
        for k, v in self.store.scan_prefix(keys.meta_key("as:")):
            sid, by = k[len(keys.meta_key("as:")):].split(b":")
            self.replication.apply_status[(int(sid), int(by))] = _U64.unpack(v)[0]
        #: Channel definitions by name (replaced, never mutated, by apply).
        self.channels: dict[str, replication_pb2.ChannelDefinition] = {}
        for k, v in self.store.scan_prefix(keys.meta_key("ch:")):
            self.channels[k[len(keys.meta_key("ch:")):].decode()] = \
                replication_pb2.ChannelDefinition.FromString(v)
        #: Conflict rules by table pattern and this cluster's role (``m cr:<pattern>``,
        #: ``m role``; replaced, never mutated, by apply).
        self.conflict_rules: dict[str, ConflictRule] = {}
        for _k, v in self.store.scan_prefix(keys.meta_key("cr:")):
            rule = rule_from_proto(replication_pb2.ConflictRule.FromString(v))
            self.conflict_rules[rule.pattern] = rule
        raw_role = self.store.get(keys.meta_key("role"))
        self.conflict_role = Role(raw_role.decode()) if raw_role else Role.NONE
        self._rules_cache: tuple[dict[str, ConflictRule], RuleSet] | None = None
        #: Transactions each channel's epochs applied (with rows: not those quarantined or
        #: rejected whole) since this process started; the runner shows its own share.
        self.channel_txns: dict[str, int] = {}
        #: (rule, table) -> the table shape the rule was last found to fit (epoch_guards)
        self._shapes_checked: dict[tuple[object, str], TableSchema] = {}
        #: MySQL's conflict counters per channel (``m cc:<channel>:<name>``), durable;
        #: replaced, never mutated, by apply.
        self.conflict_counters: dict[str, dict[str, int]] = {}
        for k, v in self.store.scan_prefix(keys.meta_key("cc:")):
            channel, name = k[len(keys.meta_key("cc:")):].decode().rsplit(":", 1)
            self.conflict_counters.setdefault(channel, {})[name] = _U64.unpack(v)[0]
        self._staged: dict[str, list[replication_pb2.ReplicatedEpoch]] = {}
        for _k, v in self.store.scan_prefix(keys.meta_key("seg:")):
            unit = replication_pb2.ReplicatedEpoch.FromString(v)
            self._staged.setdefault(unit.channel, []).append(unit)
        for units in self._staged.values():
            units.sort(key=lambda u: u.segment_id)
        #: Raised NOSPACE alarms by node id (``alarms``; replaced, never mutated, by apply).
        self.alarms = load_alarms(self.store.scan_prefix)
        raw = self.store.get(keys.meta_key("last_trans_id"))
        self.last_trans_id = _U64.unpack(raw)[0] if raw else 0
        raw = self.store.get(keys.meta_key("last_commit_ts"))
        self.last_commit_ts = _U64.unpack(raw)[0] if raw else 0

    # -- observation ----------------------------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self.store.applied_index

    @property
    def durable_applied_index(self) -> int:
        return self.store.durable_applied_index

    def get_row(self, schema: str, table: str, key_values: list) -> gateway_pb2.Row | None:
        """The stored row of ``schema.table`` with primary key ``key_values``, or ``None``."""
        raw = self.store.get(keys.row_key(schema, table, key_values))
        return None if raw is None else gateway_pb2.Row.FromString(raw)

    def scan_rows(self, schema: str, table: str, start: list, end: list
                  ) -> Iterator[gateway_pb2.Row]:
        """Rows of one table with ``start <= key < end`` (empty lists are open ends)."""
        prefix = keys.table_prefix(schema, table)
        lo = prefix + keys.encode_key(start)
        hi = prefix + keys.encode_key(end) if end else prefix_end(prefix)
        for _, v in self.store.scan(lo, hi):
            yield gateway_pb2.Row.FromString(v)

    def skipped(self, index: int) -> bool:
        """Whether entry ``index`` was deliberately not applied (duplicate or rejected)."""
        return self.store.get(keys.entry_outcome_key(index)) is not None

    def skipped_between(self, lo: int, hi: int) -> set[int]:
        """The applied entries in ``[lo, hi)`` for which ``skipped`` holds (thread-safe).

        For readers of many consecutive entries: entries applied since the store was opened
        (or restored) are answered from memory -- ``apply`` remembers the outcome marks it
        writes -- and only older ones are looked up in the store one by one."""
        floor, known = self._skips
        out = {i for i in range(lo, min(hi, floor + 1)) if self.skipped(i)} if lo <= floor \
            else set()
        out.update(known[bisect_left(known, max(lo, floor + 1)):bisect_left(known, hi)])
        return out

    def refusal_at(self, index: int) -> PreconditionFailed | None:
        """The refusal of entry ``index`` if it is a refused conditional write, else None."""
        return refusal_of_marker(self.store.get(keys.entry_outcome_key(index)))

    def _refusal_at(self, index: int, overlay: dict[bytes, bytes | None]
                    ) -> PreconditionFailed | None:
        """:meth:`refusal_at` as the running ``apply`` sees it (its own marks included)."""
        return refusal_of_marker(self._get(keys.entry_outcome_key(index), overlay))

    def idempotent_result(self, key: str, now_ns: int) -> gateway_pb2.WriteResult | None:
        """The recorded result of the write with idempotency key ``key``, if one was applied
        and is still inside the idempotency window at wall-clock time ``now_ns``."""
        raw = self.store.get(keys.idempotency_key(key))
        if raw is None:
            return None
        res = gateway_pb2.WriteResult.FromString(raw)
        return res if res.commit_timestamp_ns >= now_ns - self.window_ns else None

    def unrecorded(self, idems: list[str]) -> set[str]:
        """The keys of ``idems`` (idempotency keys, not empty) the store holds no record for
        -- live, expired or deleted -- so that ``idempotent_result`` of each is None: one
        batched probe (``LSMStore.held``) for a request of many keyed writes, instead of a
        lookup per write."""
        if not idems:
            return set()
        by_record = {keys.idempotency_key(k): k for k in idems}
        return {by_record[ik] for ik in self._unheld(list(by_record))}

    def _unheld(self, ikeys: list[bytes]) -> set[bytes]:
        """The idempotency record keys of ``ikeys`` the store holds nothing for (one
        ``LSMStore.held`` probe): the leader's ``unrecorded``, and ``apply``'s per batch."""
        return set(ikeys).difference(self.store.held(ikeys))

    def _first_result(self, ik: bytes, overlay: dict[bytes, bytes | None], commit_ts: int
                      ) -> gateway_pb2.WriteResult | None:
        """The live idempotency record under store key ``ik`` for an entry committed at
        ``commit_ts`` (None if absent or expired)."""
        raw = None if ik in self._unrecorded and ik not in overlay else self._get(ik, overlay)
        if raw is None:
            return None
        first = gateway_pb2.WriteResult.FromString(raw)
        return first if first.commit_timestamp_ns >= commit_ts - self.window_ns else None

    def _record_result(self, idem: str, result: bytes, commit_ts: int, ops: list,
                       overlay: dict[bytes, bytes | None]) -> None:
        ik = keys.idempotency_key(idem)
        overlay[ik] = result
        ops.append((ik, result, 0, 0, 0))
        jk = keys.idempotency_expiry_key(commit_ts, idem)
        if self._oldest_expiry is None or commit_ts < self._oldest_expiry:
            self._oldest_expiry = commit_ts
        overlay[jk] = b""
        ops.append((jk, b"", 0, 0, 0))

    def _expire(self, ops: list, overlay: dict[bytes, bytes | None]) -> None:
        """Delete the idempotency records (and index entries) older than the expiry bound of
        ``last_commit_ts`` -- those in the store and those this batch wrote."""
        bound = (self.last_commit_ts - self.window_ns) // _EXPIRY_GRAIN_NS * _EXPIRY_GRAIN_NS
        if bound <= self._expired_to:
            return
        if self._oldest_expiry is None or self._oldest_expiry >= bound:
            self._expired_to = bound  # nothing below the bound, in the store or this batch
            return
        lo = keys.idempotency_expiry_bound(self._expired_to)
        hi = keys.idempotency_expiry_bound(bound)
        found: set[bytes] = set()
        later: list[bytes] = []  # the first entry not due, in the store and in this batch
        for k, _ in self.store.scan(lo, _J_END):
            if k >= hi:
                later.append(k)
                break
            found.add(k)
        for k, v in overlay.items():
            if v is None or not lo <= k < _J_END:
                continue
            if k < hi:
                found.add(k)
            else:
                later.append(k)
        for jk in sorted(found):
            if overlay.get(jk, _MISSING) is None:
                continue  # already deleted in this batch
            ts, ik = keys.parse_idempotency_expiry_key(jk)
            raw = self._get(ik, overlay)
            # A key reused after expiry has a newer record (and index entry): keep it.
            if raw is not None and gateway_pb2.WriteResult.FromString(raw) \
                    .commit_timestamp_ns == ts:
                overlay[ik] = None
                ops.append((ik, None, 0, 0, 0))
            overlay[jk] = None
            ops.append((jk, None, 0, 0, 0))
        self._expired_to = bound
        self._oldest_expiry = keys.parse_idempotency_expiry_key(min(later))[0] if later \
            else None

    # -- apply ----------------------------------------------------------------------------------

    def apply(self, entries: list[Entry]) -> list[Applied]:
        """Apply committed ``entries`` atomically; return outcomes of transaction entries."""
        if not entries:
            return []
        ops: list[tuple[bytes, bytes | None, int, int, int]] = []
        overlay: dict[bytes, bytes | None] = {}
        out: list[Applied] = []
        self._marked = []
        parsed = self._parse_batch(entries)
        for e, p in zip(entries, parsed, strict=True):
            if e.type != EntryType.NORMAL or not e.data or e.data[0] != _TXN:
                if e.type == EntryType.NORMAL and e.data:
                    tag = e.data[0]
                    if tag == _POS:
                        self._apply_position(e.data, ops)
                    elif tag == _UNIT:
                        done = self._apply_unit(e, ops, overlay)
                        if done is not None:
                            out.append(done)
                    elif tag == _CHANNEL:
                        self._apply_channel(e.data, ops)
                    elif tag == _CONFLICT:
                        self._apply_conflict_command(e.data, ops)
                    elif tag == _ALARM:
                        alarms = apply_alarm_command(self.alarms, e.data, ops)
                        if alarms is not None:
                            self.alarms = alarms
                continue
            done = self._apply_fast(e, p, ops, overlay)
            if done is None:
                txn, idem = decode_entry(e.data)
                assert txn is not None
                done = self._apply_txn(e, txn, idem, ops, overlay)
            out.append(done)
        self._expire(ops, overlay)
        ops.append((keys.meta_key("last_trans_id"), _U64.pack(self.last_trans_id), 0, 0, 0))
        ops.append((keys.meta_key("last_commit_ts"), _U64.pack(self.last_commit_ts), 0, 0, 0))
        if self._marked:
            self._remember_skips(self._marked)
        self.store.write_batch(ops, log_index=entries[-1].index)
        return out

    def _parse_batch(self, entries: list[Entry]) -> list[tuple | None]:
        """``parse_txn`` of every transaction entry of an ``apply`` batch (None for the others
        and for what needs the general path), and ``_unrecorded`` set to the idempotency
        record keys of those transactions the store holds nothing for: one batched probe
        (``LSMStore.held``, bloom filters tested for all keys at once) instead of a lookup
        per keyed write -- fresh keys are the common case, and a miss costs a lookup in every
        memtable and level. The store does not change until the batch is written, and keys
        this batch records are read from its overlay first, so the set holds for the
        whole batch."""
        parsed: list[tuple | None] = []
        ikeys: list[bytes] = []
        for e in entries:
            data = e.data
            p = parse_txn(data) if e.type == EntryType.NORMAL and data and data[0] == _TXN \
                else None
            parsed.append(p)
            if p is not None and p[6]:
                ikeys.append(keys.idempotency_key(p[6]))
        self._unrecorded = self._unheld(ikeys) if ikeys else _NONE
        return parsed

    def _mark(self, ops: list, index: int, outcome: bytes) -> None:
        """Record that entry ``index`` is deliberately not applied (``skipped``), with
        ``outcome`` saying why, in this ``apply``'s ``ops``."""
        ops.append((keys.entry_outcome_key(index), outcome, 0, 0, 0))
        self._marked.append(index)

    def _remember_skips(self, marked: list[int]) -> None:
        """Add the entries ``marked`` by this ``apply`` (so above every index remembered) to
        the skip index, before the store makes them applied."""
        floor, known = self._skips
        if len(known) + len(marked) > _MAX_SKIPS:  # many duplicates: older ones from the store
            self._skips = (self.store.applied_index, [])
            floor, known = self._skips
        for index in sorted(set(marked)):
            if index > floor and (not known or index > known[-1]):
                known.append(index)

    def _apply_position(self, data: bytes, ops: list) -> None:
        """Record an applier position entry (see the module docstring)."""
        try:
            pos = applier_pb2.ApplierPosition.FromString(data[1:])
        except DecodeError:
            return
        if not pos.applier:
            return
        current = self.applier_positions.get(pos.applier)
        if current is not None and current.log_index > pos.log_index:
            return
        self.applier_positions[pos.applier] = pos
        ops.append((keys.applier_position_key(pos.applier), data[1:], 0, 0, 0))

    # -- replication ----------------------------------------------------------------------------

    def _apply_channel(self, data: bytes, ops: list) -> None:
        """Add, replace or remove a channel definition; an entry that does not parse or names
        no channel changes nothing."""
        try:
            cmd = replication_pb2.ChannelCommand.FromString(data[1:])
        except DecodeError:
            return
        name = cmd.definition.name
        if not name:
            return
        channels = dict(self.channels)
        key = keys.meta_key(f"ch:{name}")
        if cmd.remove:
            channels.pop(name, None)
            ops.append((key, None, 0, 0, 0))
            for seg in self._staged.pop(name, []):
                ops.append((_seg_key(name, seg.segment_id), None, 0, 0, 0))
        else:
            channels[name] = cmd.definition
            ops.append((key, cmd.definition.SerializeToString(), 0, 0, 0))
        self.channels = channels

    def _apply_conflict_command(self, data: bytes, ops: list) -> None:
        """Set or unset a conflict rule, or set the role; an entry that does not parse, or
        names an unknown role, changes nothing (the API checks before proposing)."""
        try:
            cmd = replication_pb2.ConflictCommand.FromString(data[1:])
        except DecodeError:
            return
        if cmd.HasField("set") and cmd.set.table:
            rule = rule_from_proto(cmd.set)
            rules = dict(self.conflict_rules)
            rules[rule.pattern] = rule
            self.conflict_rules = rules
            ops.append((keys.meta_key(f"cr:{rule.pattern}"),
                        rule_to_proto(rule).SerializeToString(), 0, 0, 0))
        elif cmd.unset:
            rules = dict(self.conflict_rules)
            if rules.pop(cmd.unset, None) is not None:
                self.conflict_rules = rules
                ops.append((keys.meta_key(f"cr:{cmd.unset}"), None, 0, 0, 0))
        elif cmd.role:
            try:
                role = Role(cmd.role)
            except ValueError:
                return
            self.conflict_role = role
            ops.append((keys.meta_key("role"), role.value.encode(), 0, 0, 0))

    def _apply_unit(self, e: Entry, ops: list, overlay: dict[bytes, bytes | None]
                    ) -> Applied | None:
        """Apply a replicated-epoch entry (see the module docstring); None for a staged
        segment."""
        try:
            seg = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
        except DecodeError as exc:
            self._mark(ops, e.index, b"rejected: replicated epoch does not parse")
            return Applied(e.index, e.term, error=InvalidRequest("entry", str(exc)))
        staged = self._staged.get(seg.channel, [])
        if seg.segment_id <= 1 and staged:
            for old in staged:  # an earlier unit of this channel was abandoned mid-way
                ops.append((_seg_key(seg.channel, old.segment_id), None, 0, 0, 0))
            staged = []
        if not seg.end_segment:
            if staged and (staged[-1].segment_id + 1 != seg.segment_id
                           or staged[-1].source_epoch != seg.source_epoch):
                staged = []
            self._staged[seg.channel] = [*staged, seg]
            ops.append((_seg_key(seg.channel, seg.segment_id), e.data[1:], 0, 0, 0))
            return None
        self._staged.pop(seg.channel, None)
        for old in staged:
            ops.append((_seg_key(seg.channel, old.segment_id), None, 0, 0, 0))
        if staged or seg.segment_id > 1:
            expect = list(range(1, seg.segment_id))
            if [u.segment_id for u in staged] != expect or any(
                    u.source_epoch != seg.source_epoch for u in staged):
                return self._refuse_unit(e, ops, "segments of the replicated epoch "
                                         "are missing", seg)
        unit = join_segments([*staged, seg])
        reason = self.replication.refusal(unit)
        if reason is not None:
            return self._refuse_unit(e, ops, reason, unit)
        txns = transactions(unit.items)
        schemas = dict(self.schemas)
        created: list[tuple[str, TableSchema]] = []
        quarantined: list[tuple[bytes, bytes, int, int, int]] = []
        for t_no, txn in enumerate(txns):
            if not txn.statements:
                continue  # rejected whole by conflicts upstream: its GTID travels, no rows
            try:
                got = check_statements(txn.statements, schemas, rows=False)
            except InvalidRequest as exc:
                # a schema clash with this cluster (the table first written with other
                # columns here): kept aside with its cause, the rest of the epoch applies
                g = txn.gtid
                cause = f"transaction {g.server_id}:{g.trans_id}: {exc}"
                log.warning("channel %s: epoch %d of cluster %d: %s: quarantined (gateway "
                            "channel quarantine %s)", unit.channel, unit.source_epoch,
                            unit.source_id, cause, unit.channel)
                quarantined.append(quarantine_op(unit, txn, cause))
                txns[t_no] = emptied(txn)
                continue
            for name, schema in got:
                schemas[name] = schema
            created += got
        judged = None
        # the stored rows of insert-only transactions, built from their wire bytes (C): their
        # keys serve the judgement, and they are written as they are unless it drops records
        pre: list[list | None] = [
            self._replicated_rows(t, e.index, (unit.local_epoch, t.author,
                                               t.commit_timestamp_ns)) for t in txns]
        counters: dict[str, int] = {}
        fresh = self._all_fresh(txns, pre, overlay) if self.conflict_rules and txns else None
        if self.conflict_rules and txns:
            try:
                check_ruled_shapes(txns, self._ruleset(), schemas, self._shapes_checked)
            except ConflictConfigError as exc:
                return self._refuse_unit(e, ops, f"conflict rules: {exc}", unit)
        if fresh:  # judged rows, all applied as they came
            pass
        elif self.conflict_rules and txns and fresh is None:
            try:
                judged = self._judge(unit, txns, ops, overlay, pre, schemas)
                problem = None if not (judged.exceptions or judged.refresh) else \
                    "found conflicts but its leader reserved no GTID for them (rules set " \
                    "meanwhile): proposed again" if not unit.derived_trans_id else \
                    derived_problem(judged.exceptions, schemas)
                if problem is not None:  # never drop the exceptions and the refresh
                    return self._refuse_unit(e, ops, problem, unit)
            except (ConflictConfigError, RoleNotSetError) as exc:
                missing = self._missing_function(txns)
                if missing is not None:  # another node may have it: stop, never diverge
                    raise ConflictFunctionMissingError(
                        f"log index {e.index}: a conflict rule names the function {missing}, "
                        f"which no loaded plugin registers on this node; load the plugin "
                        f"that provides it (on every node of the cluster) and restart, or "
                        f"unset the rule (gateway conflicts unset)") from None
                return self._refuse_unit(e, ops, f"conflict rules: {exc}", unit)
            pre = [p if t is o else None for p, t, o in zip(pre, judged.transactions, txns,
                                                             strict=True)]
            txns = judged.transactions
            counters = {k: v for k, v in judged.counters.items() if v}
        self._record_schemas(created, ops)
        if unit.derived_trans_id:
            self.last_trans_id = max(self.last_trans_id, unit.derived_trans_id)
            self.last_commit_ts = max(self.last_commit_ts, unit.derived_commit_ts)
        for txn, built in zip(txns, pre, strict=True):
            meta = (unit.local_epoch, txn.author, txn.commit_timestamp_ns)
            rows = built if built is not None else self._replicated_rows(txn, e.index, meta)
            if rows is not None:
                ops += rows
                for op in rows:
                    overlay[op[0]] = op[1]
                continue
            g = txn.gtid
            gtid = gtid_pb2.Gtid(server_id=g.server_id, trans_id=g.trans_id)
            self._write_statements(txn, e.index, gtid, meta, ops, overlay)
        if judged is not None and (judged.exceptions or judged.refresh or judged.dropped):
            self._derive(unit, judged, e.index, ops, overlay)
        elif quarantined:
            self._record_outcome(unit, txns, None, e.index, ops)
        if quarantined:
            ops += quarantined
            counters["quarantined_trans_count"] = len(quarantined)
        state = self.replication.copy()
        origins, pairs = state.apply(unit)
        if self.conflict_rules and "last_conflict_epoch" not in counters:
            stable = self._stable_epoch(unit, state)
            if stable:
                counters["last_stable_epoch"] = stable
        if counters:
            self._count_conflicts(unit.channel, counters, ops)
        for o in origins:
            ops.append((keys.meta_key(f"w:{o}"), _U64.pack(state.watermarks[o]), 0, 0, 0))
        for sid, by in pairs:
            ops.append((keys.meta_key(f"as:{sid}:{by}"),
                        _U64.pack(state.apply_status[(sid, by)]), 0, 0, 0))
        self.replication = state
        self.channel_txns[unit.channel] = self.channel_txns.get(unit.channel, 0) + sum(
            1 for t in txns if t.statements)
        return Applied(e.index, e.term, result=gateway_pb2.WriteResult(
            epoch=unit.local_epoch, log_index=e.index))

    def functions(self, need: str | None = None) -> Mapping[str, FunctionSpec]:
        """The conflict functions known here; when ``need`` is not one of them, the plugins'
        are loaded first (once; ``load_functions`` may raise, naming what failed)."""
        if need is not None and need not in self.conflict_functions \
                and self.load_functions is not None:
            self.conflict_functions = self.load_functions()
            self.load_functions = None
        return self.conflict_functions

    def _ruleset(self) -> RuleSet:
        rules = self.conflict_rules
        if self._rules_cache is None or self._rules_cache[0] is not rules:
            for r in rules.values():
                self.functions(r.function)
            self._rules_cache = (rules, RuleSet(rules.values(), self.conflict_functions,
                                                checked=False))
        return self._rules_cache[1]

    def _missing_function(self, txns: list[transaction_pb2.Transaction]) -> str | None:
        """The function of a rule judging one of ``txns``' tables that this node does not
        have (a plugin it did not load), or None."""
        rules = self._ruleset()
        for txn in txns:
            for _, rule in ruled_statements(txn, rules):
                if rule.function not in rules.functions:
                    return rule.function
        return None

    def _all_fresh(self, txns: list[transaction_pb2.Transaction], pre: list[list | None],
                   overlay: dict[bytes, bytes | None]) -> list[bytes] | None:
        """The keys of the epoch's judged transactions when its judged changes are all
        inserts of keys this cluster holds nothing for (see ``fresh_insert_keys``; empty:
        nothing to judge): every rule applies them, so the epoch is applied as it came
        without judging it row by row -- the same outcome, at the cost of one batched
        existence check. None: the epoch must be judged."""
        got = fresh_insert_keys(txns, self._ruleset(), self.conflict_role,
                                [None if p is None else [r[0] for r in p] for p in pre])
        if got is None:
            return None
        if (len(set(got)) == len(got) and overlay.keys().isdisjoint(got)
                and not self.store.holds_any(got)):
            return got
        return None

    def _judge(self, unit: replication_pb2.ReplicatedEpoch,
               txns: list[transaction_pb2.Transaction], ops: list,
               overlay: dict[bytes, bytes | None], pre: list[list | None],
               schemas: Mapping[str, TableSchema] | None = None) -> UnitJudgement:
        """Judge a replicated epoch's transactions with the conflict rules (see
        ``conflict_apply``) against the rows as they stand before it; raises
        ``ConflictConfigError`` / ``RoleNotSetError`` for rules that cannot run here.
        ``schemas``: the tables' shapes with those the entry creates (default: recorded)."""
        known_shapes = self.schemas if schemas is None else schemas
        rep = self.replication
        ctx = Context(self.cluster_id, self.conflict_role,
                      {p: rep.max_replicated_epoch(p) for p in rep.peers()})
        deleted: dict[bytes, tuple[int, int, int]] | None = None

        def lookup(k: bytes, values: bool) -> Stored:
            nonlocal deleted
            raw = overlay.get(k, _MISSING)
            if raw is _MISSING:
                v = self.store.get_version(k)
                if v is None:
                    return Stored.absent()
                return stored_of_row(v.value, (v.epoch, v.author, v.commit_ts), values)
            if raw is None:  # deleted by an earlier entry of this batch: its metadata
                if deleted is None:
                    deleted = {op[0]: (op[2], op[3], op[4]) for op in ops if op[1] is None}
                return stored_of_row(None, deleted.get(k))
            return stored_of_row(raw, None, values)  # type: ignore[arg-type]

        def columns(schema: str, table: str) -> Mapping[str, int]:
            known = known_shapes.get(f"{schema}.{table}")
            return known.columns if known is not None else {}

        return judge_unit(txns, self._ruleset(), ctx, lookup, unit.local_epoch,
                          unit.source_epoch, [None if p is None else [r[0] for r in p]
                                              for p in pre], columns,
                          source=unit.source_id)

    def _derive(self, unit: replication_pb2.ReplicatedEpoch, judged: UnitJudgement,
                index: int, ops: list, overlay: dict[bytes, bytes | None]) -> None:
        """Write this cluster's derived transaction for a judged epoch (exception rows, and
        refreshes of the rows as they now stand), count the conflicts, and record what the
        entry finally holds (``m dx:<index>``: the accepted transactions, then the derived
        one) for the change feed and the appliers."""
        me = self.cluster_id
        stmts = list(judged.exceptions)
        for k, table, kf, kv in judged.refresh:
            stmts.append(refresh_statement(table, kf, kv, self._get(k, overlay)))
        derived = None
        if stmts:  # checked by ``derived_problem`` before anything of the entry was written
            derived = derived_transaction(me, unit.derived_trans_id, unit.local_epoch,
                                          unit.derived_commit_ts, stmts)
            self._record_schemas(check_statements(derived.statements, self.schemas,
                                                  rows=False), ops)
        if derived is not None:
            self._write_statements(derived, index, derived.gtid, (
                unit.local_epoch, me, unit.derived_commit_ts), ops, overlay)
        self._record_outcome(unit, judged.transactions, derived, index, ops)

    @staticmethod
    def _record_outcome(unit: replication_pb2.ReplicatedEpoch,
                        accepted: list[transaction_pb2.Transaction],
                        derived: transaction_pb2.Transaction | None, index: int,
                        ops: list) -> None:
        """Record what entry ``index`` finally holds (``m dx:<index>``): its transactions as
        applied (``accepted``, in order), then this cluster's ``derived`` one."""
        outcome = replication_pb2.ReplicatedEpoch()
        outcome.CopyFrom(unit)
        del outcome.items[:]
        it_accepted = iter(accepted)
        for it in unit.items:
            if it.WhichOneof("item") == "transaction":
                outcome.items.add(transaction=next(it_accepted))
            else:
                outcome.items.append(it)
        if derived is not None:
            outcome.items.add(transaction=derived)
        ops.append((keys.meta_key(f"dx:{index}"), outcome.SerializeToString(), 0, 0, 0))

    def _stable_epoch(self, unit: replication_pb2.ReplicatedEpoch,
                      state: ReplicationState) -> int:
        """MySQL's ``last_stable_epoch`` after an epoch of ``unit``'s channel without a
        conflict: the source's max replicated epoch once it reached the channel's last
        conflict epoch (an epoch of this cluster that looped back with no conflict found or
        corrected since it was logged), else 0 (not stable yet: unchanged)."""
        mre = state.max_replicated_epoch(unit.source_id)
        got = self.conflict_counters.get(unit.channel, {})
        if mre and mre >= got.get("last_conflict_epoch", 0) \
                and mre > got.get("last_stable_epoch", 0):
            return mre
        return 0

    def _count_conflicts(self, channel: str, got: dict[str, int], ops: list) -> None:
        """Add one epoch's conflict counters of ``channel`` to the durable ones
        (``m cc:<channel>:<name>``); ``last_conflict_epoch`` and ``last_stable_epoch`` keep
        the newest epoch, the others add up (``conflict_fn_epoch`` is a count)."""
        counters = dict(self.conflict_counters.get(channel, {}))
        for name, n in got.items():
            counters[name] = max(counters.get(name, 0), n) if name in _LAST_EPOCHS \
                else counters.get(name, 0) + n
            ops.append((keys.meta_key(f"cc:{channel}:{name}"), _U64.pack(counters[name]),
                        0, 0, 0))
        self.conflict_counters = {**self.conflict_counters, channel: counters}

    def unit_outcome(self, index: int) -> replication_pb2.ReplicatedEpoch | None:
        """What the replicated epoch applied at log ``index`` finally holds when conflict
        rules changed it (accepted transactions, then this cluster's derived one); None
        when it was applied as it came."""
        raw = self.store.get(keys.meta_key(f"dx:{index}"))
        return None if raw is None else replication_pb2.ReplicatedEpoch.FromString(raw)

    def forget_outcomes(self, through: int) -> int:
        """Delete what ``unit_outcome`` records for entries at log index ``through`` or
        below (``m dx:<index>``), once the log no longer holds them (its compaction): no
        reader can ask for those entries any more. A local clean-up, not replicated (every
        node compacts its own log); returns how many were deleted."""
        prefix = keys.meta_key("dx:")
        gone = [k for k, _ in self.store.scan_prefix(prefix)
                if int(k[len(prefix):]) <= through]
        if gone:
            self.store.write_batch([(k, None) for k in gone])
        return len(gone)

    def _refuse_unit(self, e: Entry, ops: list, reason: str,
                     unit: replication_pb2.ReplicatedEpoch) -> Applied:
        what = f"epoch {unit.source_epoch} of cluster {unit.source_id} (channel " \
               f"{unit.channel!r})"
        self._mark(ops, e.index, f"rejected: {what}: {reason}".encode())
        return Applied(e.index, e.term, error=InvalidRequest("channel", f"{what}: {reason}"))

    def _insert_head(self, hdr: bytes) -> tuple[bytes, bytes, bytes] | None:
        """``(row key prefix, Row fields 1-2, Row field 4)`` of an insert statement whose
        table, key fields and fields serialize to ``hdr``, when the table's first-seen schema
        exists and the statement is compatible with it (cached: a recorded schema never
        changes, and the cache is cleared when the store is replaced); None otherwise (the
        general path creates the schema or rejects the entry)."""
        got = self._heads.get(hdr)
        if got is not None:
            return got
        try:
            body = statement_pb2.InsertStatement.FromString(hdr)
        except Exception:  # anything unusual takes the general path
            return None
        body.records.add()  # the statement has records (the schema check needs one)
        stmt = statement_pb2.Statement(insert=body)
        name = qualified_name(body.table)
        if name not in self.schemas:
            return None
        try:
            if check_statements([stmt], self.schemas, rows=False):
                return None
        except InvalidRequest:
            return None
        split = split_insert(hdr)
        if split is None:
            return None
        head, mid, _ = split
        got = (keys.table_prefix(body.table.schema_name, body.table.table_name), head, mid)
        if len(self._heads) >= 4096:
            self._heads.clear()
        self._heads[hdr] = got
        return got

    def _apply_fast(self, e: Entry, parsed: tuple | None, ops: list,
                    overlay: dict[bytes, bytes | None]) -> Applied | None:
        """Apply a transaction entry made only of inserts into known tables straight from its
        wire bytes: per statement one cached header (row key prefix, serialized table, key
        fields and fields), per record the key encoded from the value bytes and the stored
        ``Row`` assembled from byte slices -- byte for byte what the general path
        (:meth:`_apply_txn`) writes. ``parsed``: ``parse_txn(e.data)``. Returns None, having
        changed nothing but the (idempotent) high-water marks, when the entry needs the
        general path."""
        data = e.data
        if parsed is None:
            return None
        sid, tid, epoch, author, commit_ts, stmts, idem = parsed
        index = e.index
        if not stmts:
            return None  # the general path rejects it
        _, tail, result = meta_parts(sid, tid, epoch, author, commit_ts, index)
        rows = self._wire_rows(data, stmts, tail, (epoch, author, commit_ts))
        if rows is None:
            return None
        self.last_trans_id = max(self.last_trans_id, tid)
        self.last_commit_ts = max(self.last_commit_ts, commit_ts)
        if idem:
            first = self._first_result(keys.idempotency_key(idem), overlay, commit_ts)
            if first is not None and first.log_index != index:
                self._mark(ops, index, b"duplicate")
                refused = self._refusal_at(first.log_index, overlay)
                if refused is not None:  # a retry of a refused conditional write
                    return Applied(index, e.term, error=refused)
                first.duplicate = True
                return Applied(index, e.term, result=first)
        ops += rows
        for op in rows:
            overlay[op[0]] = op[1]
        if idem:
            self._record_result(idem, result, commit_ts, ops, overlay)
        return Applied(index, e.term, wire=result)

    def _wire_rows(self, data: bytes, stmts: list[tuple[int, int]], tail: bytes,
                   meta: tuple[int, int, int]) -> list[tuple[bytes, bytes, int, int, int]] | None:
        """The store operations of a transaction payload ``data`` whose statements (spans
        ``stmts``) are all inserts into known tables, with row metadata ``meta`` = (epoch,
        author, commit ts) and ``tail`` from ``meta_parts``; None when one needs the general
        path (nothing is changed)."""
        rows: list[tuple[bytes, bytes, int, int, int]] = []
        try:
            for s_start, s_end in stmts:
                span = insert_header_span(data, s_start, s_end)
                if span is None:  # not an insert whose header precedes its records
                    return None
                b_start, first_rec = span
                info = self._insert_head(data[b_start:first_rec])
                if info is None:
                    return None
                prefix, head, mid = info
                got = insert_rows(data, first_rec, s_end, prefix, head, mid, tail, *meta)
                if got is None:
                    return None
                rows += got
        except (IndexError, ValueError, struct.error):
            return None
        return rows

    def _replicated_rows(self, txn: transaction_pb2.Transaction, index: int,
                         meta: tuple[int, int, int]
                         ) -> list[tuple[bytes, bytes, int, int, int]] | None:
        """``_wire_rows`` for a replicated (origin) transaction: its GTID, ``meta`` = (this
        cluster's epoch, origin author, origin commit ts); None: the general path."""
        data = encode_transaction(txn)
        parsed = parse_txn(data)
        if parsed is None or not parsed[5]:
            return None
        sid, tid, _, _, _, stmts, _ = parsed
        _, tail, _ = meta_parts(sid, tid, *meta, index)
        return self._wire_rows(data, stmts, tail, meta)

    def _record_schemas(self, created: list[tuple[str, TableSchema]], ops: list) -> None:
        """Keep the first-seen schemas ``check_statements`` created, in memory and stored."""
        for name, schema in created:
            self.schemas[name] = schema
            ops.append((keys.schema_key(name), _schema_to_row(name, schema), 0, 0, 0))

    def _get(self, key: bytes, overlay: dict[bytes, bytes | None]) -> bytes | None:
        got = overlay.get(key, _MISSING)
        if got is _MISSING:
            return self.store.get(key)
        return got  # type: ignore[return-value]

    def _apply_txn(self, e: Entry, txn: transaction_pb2.Transaction, idem: str,
                   ops: list, overlay: dict[bytes, bytes | None]) -> Applied:
        g = txn.gtid
        self.last_trans_id = max(self.last_trans_id, g.trans_id)
        self.last_commit_ts = max(self.last_commit_ts, txn.commit_timestamp_ns)
        if idem:
            first = self._first_result(keys.idempotency_key(idem), overlay,
                                       txn.commit_timestamp_ns)
            if first is not None and first.log_index != e.index:
                self._mark(ops, e.index, b"duplicate")
                refused = self._refusal_at(first.log_index, overlay)
                if refused is not None:  # a retry of a refused conditional write
                    return Applied(e.index, e.term, error=refused)
                first.duplicate = True
                return Applied(e.index, e.term, result=first)
        try:
            created = check_statements(txn.statements, self.schemas, rows=False)
            refused = refusal(txn.conditions, self.schemas,
                              lambda k: self._get(k, overlay)) if txn.conditions else None
        except InvalidRequest as exc:
            self._mark(ops, e.index, f"rejected: {exc}".encode())
            return Applied(e.index, e.term, error=exc)
        gtid = gtid_pb2.Gtid(server_id=g.server_id, trans_id=g.trans_id)
        if refused is not None:
            marker = refusal_marker(refused)
            self._mark(ops, e.index, marker)
            overlay[keys.entry_outcome_key(e.index)] = marker  # seen by a retry in this batch
            if idem:
                self._record_result(idem, write_result(
                    gtid.SerializeToString(), txn.epoch, txn.commit_timestamp_ns, e.index),
                    txn.commit_timestamp_ns, ops, overlay)
            return Applied(e.index, e.term, error=refused)
        self._record_schemas(created, ops)
        meta = (txn.epoch, txn.author, txn.commit_timestamp_ns)
        self._write_statements(txn, e.index, gtid, meta, ops, overlay)
        raw = write_result(gtid.SerializeToString(), txn.epoch, txn.commit_timestamp_ns,
                            e.index)
        if idem:
            self._record_result(idem, raw, txn.commit_timestamp_ns, ops, overlay)
        return Applied(e.index, e.term, wire=raw)

    def _write_statements(self, txn: transaction_pb2.Transaction, index: int,
                          gtid: gtid_pb2.Gtid, meta: tuple[int, int, int], ops: list,
                          overlay: dict[bytes, bytes | None]) -> None:
        """Write the rows of ``txn``'s (validated) statements at log ``index`` with row
        metadata ``meta`` = (epoch, author, commit timestamp)."""
        for stmt in txn.statements:
            kind = stmt.WhichOneof("kind")
            if kind == "insert":
                self._insert(stmt.insert, index, gtid, meta, ops, overlay)
            elif kind == "update":
                self._update(stmt.update, index, gtid, meta, ops, overlay)
            elif kind == "delete":
                body = stmt.delete
                t = body.table
                for rec in body.records:
                    k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
                    overlay[k] = None
                    ops.append((k, None, *meta))

    @staticmethod
    def _row(table: statement_pb2.TableMetadata, index: int, gtid: gtid_pb2.Gtid,
             meta: tuple[int, int, int]) -> gateway_pb2.Row:
        return gateway_pb2.Row(table=table, epoch=meta[0], author=meta[1], gtid=gtid,
                               commit_timestamp_ns=meta[2], log_index=index)

    def _insert(self, body: statement_pb2.InsertStatement, index: int, gtid: gtid_pb2.Gtid,
                meta: tuple[int, int, int], ops: list, overlay: dict) -> None:
        t = body.table
        schema, table = t.schema_name, t.table_name
        # Fast path: the stored Row's bytes assembled from serialized parts in field order --
        # table + key_fields (1, 2, as in the statement), the record's key values re-tagged as
        # 3, fields (4), its after values re-tagged as 5, then the metadata (6-10): byte for
        # byte what ``Row.SerializeToString()`` gives, from one serialization of the statement
        # and without building a Row per record.
        split = split_insert(body.SerializeToString())
        if split is not None:
            head, mid, recs = split
            tail = row_tail(meta, gtid.SerializeToString(), index)
            rows: list[tuple[bytes, bytes]] = []
            for rec, raw in zip(body.records, recs, strict=True):
                parts = retag_record(raw)
                if parts is None:
                    break  # an unknown field in the record: the general path below
                rows.append((keys.row_key(schema, table, rec.key_values),
                             b"".join((head, parts[0], mid, parts[1], tail))))
            else:
                for k, v in rows:
                    overlay[k] = v
                    ops.append((k, v, *meta))
                return
        template = self._row(t, index, gtid, meta)
        template.key_fields.extend(body.key_fields)
        template.fields.extend(body.fields)
        for rec in body.records:
            row = gateway_pb2.Row()
            row.CopyFrom(template)
            row.key_values.extend(rec.key_values)
            row.values.extend(rec.after_values)
            k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
            v = row.SerializeToString()
            overlay[k] = v
            ops.append((k, v, *meta))

    def _update(self, body: statement_pb2.UpdateStatement, index: int, gtid: gtid_pb2.Gtid,
                meta: tuple[int, int, int], ops: list, overlay: dict) -> None:
        t = body.table
        for rec in body.records:
            k = keys.row_key(t.schema_name, t.table_name, rec.key_values)
            raw = self._get(k, overlay)
            if raw is None:
                continue  # UPDATE of a missing row leaves it missing
            row = gateway_pb2.Row.FromString(raw)
            pos = {f.name: i for i, f in enumerate(row.fields)}
            for f, v in zip(body.set_fields, rec.after_values, strict=True):
                i = pos.get(f.name)
                if i is None:
                    row.fields.add(name=f.name, type=f.type)
                    row.values.add().CopyFrom(v)
                else:
                    row.values[i].CopyFrom(v)
            row.epoch, row.author, row.commit_timestamp_ns = meta
            row.gtid.CopyFrom(gtid)
            row.log_index = index
            v = row.SerializeToString()
            overlay[k] = v
            ops.append((k, v, *meta))

    def mark_applied(self, index: int) -> None:
        """Advance the applied index over entries with nothing to write."""
        if index > self.store.applied_index:
            self.store.mark_applied(index)

    # -- snapshots ------------------------------------------------------------------------------

    def export_dir(self) -> tuple[int, str]:
        """Flush and export the store into the scratch directory ``DATA/snapshot-out``
        (replaced: one export at a time), its tables linked, not copied; ``(applied index,
        directory)``. The caller moves the directory into the snapshot files
        (``SnapshotFiles.save_dir``) or removes it."""
        tmp = os.path.join(self.data_dir, "snapshot-out")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            return export_snapshot(self.store, tmp), tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _tombstone_floor(self) -> tuple[int, dict[int, int]]:
        """For the store's compaction (another thread): which deletes keep their tombstones
        (``ReplicationState.tombstone_floor``; all of them until it is loaded)."""
        state = getattr(self, "replication", None)
        return (0, {}) if state is None else state.tombstone_floor()

    def restore(self, data: bytes) -> int:
        """Replace the store by the snapshot archive ``data``; return its applied index."""
        tmp = os.path.join(self.data_dir, "snapshot-in")
        staged = self.path + ".new"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(staged, ignore_errors=True)
        try:
            if unpack_dir(data, tmp) == 0:
                LSMStore(staged, self._memtable_bytes).close()  # the empty store
            else:
                import_snapshot(tmp, staged)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.store.close()
        shutil.rmtree(self.path)
        self._install_staged(staged)
        self.store = LSMStore(self.path, self._memtable_bytes)
        self._load()
        return self.store.applied_index

    def _install_staged(self, staged: str) -> None:
        """Rename the fully written store ``staged`` to the store path, durably."""
        fs = local_fs()
        fs.rename(staged, self.path)
        fs.sync_dir(self.data_dir)

    def flush(self) -> None:
        self.store.flush()

    def close(self) -> None:
        self.store.close()


def table_of(stmt: statement_pb2.Statement) -> str:
    """Qualified table name of a row statement ('' for SQL and apply-status)."""
    kind = stmt.WhichOneof("kind")
    if kind in ("insert", "update", "delete"):
        return qualified_name(getattr(stmt, kind).table)
    return ""
