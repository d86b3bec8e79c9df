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
  ``gateway.node.state.alarms``); a slot command (``SLOT_COMMAND``) advances, marks lost or
  drops the slots of the channels reading this cluster's log (``m slot:<reader>/<channel>``,
  ``gateway.node.state.slot_apply``);
- a seed step (tag ``SEED_INSTALL``, ``seed_apply``) installs part of a snapshot of a
  channel's source; a seed pin (``SEED_PIN``, ``seed_pins``) arms a read snapshot of the store
  at the next epoch boundary for a seed this cluster serves: an ``apply`` that meets the
  boundary writes the entries up to it as one batch, takes the snapshot, and goes on with a
  second batch (``m seal`` records the last sealed epoch and whether a record followed it);
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

The rules are split by what an entry applies: this module holds the store, what the node
reads of it, the dispatch by entry type tag (``apply``) and snapshots; ``txn_apply`` applies
client transactions (fast and general paths, idempotency, conditional writes),
``epoch_apply`` replicated epochs (staging, judging, derivation, counters), and
``command_apply`` (with ``alarms``) the commands. The values that cross them are named in
``store_ops``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence

from google.protobuf.message import DecodeError

from gateway.conflict import BUILTIN, ConflictRule, FunctionSpec, Role, RuleSet
from gateway.conflict.rules import rule_from_proto
from gateway.core.fileio import local_fs
from gateway.core.lsm import LSMStore, export_snapshot, import_snapshot
from gateway.core.lsm.format import prefix_end
from gateway.core.messages import TypeTag
from gateway.node.base.errors import PreconditionFailed
from gateway.node.base.validation import TableSchema, qualified_name
from gateway.node.state import keys
from gateway.node.state.alarms import apply_alarm_command, load_alarms
from gateway.node.state.command_apply import (
    ConflictSettings,
    apply_channel_command,
    apply_conflict_command,
    apply_position,
)
from gateway.node.state.conditions import refusal_of_marker
from gateway.node.state.epoch_apply import (
    U64,
    ConflictFunctionMissingError,
    EpochApply,
    StagedSegment,
    has_txns,
)
from gateway.node.state.schema_apply import (
    events_by_index,
    load_definitions,
    schema_from_row,
    table_schema_of,
)
from gateway.node.state.schema_entry import SchemaEntryApply
from gateway.node.state.seed_apply import apply_seed_install, load_seeds
from gateway.node.state.seed_pins import SeedPins
from gateway.node.state.slot_apply import SlotId, apply_slot_command, load_slots
from gateway.node.state.store_ops import Ops, ParsedTxn, meta_op
from gateway.node.state.txn_apply import Applied
from gateway.node.state.wire import decode_entry, parse_txn
from gateway.node.storage.snapshot_files import ArchiveReader, unpack_dir
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState
from gateway.v1 import (
    applier_pb2,
    channel_pb2,
    epoch_pb2,
    gateway_pb2,
    replication_pb2,
    statement_pb2,
    value_pb2,
)

__all__ = ["Applied", "ConflictFunctionMissingError", "StoreStateMachine"]

_MAX_SKIPS = 100_000
#: Default idempotency window: a retry is recognised for this long after the first commit.
IDEMPOTENCY_WINDOW_NS = 24 * 3600 * 10**9
_TXN = TypeTag.TRANSACTION
_POS = TypeTag.APPLIER_POSITION
_UNIT = TypeTag.REPLICATED_EPOCH
_CHANNEL = TypeTag.CHANNEL_COMMAND
_CONFLICT = TypeTag.CONFLICT_COMMAND
_ALARM = TypeTag.ALARM_COMMAND
_MARKER = TypeTag.EPOCH_MARKER
_PIN = TypeTag.SEED_PIN
_SEED = TypeTag.SEED_INSTALL
_SEAL = struct.Struct("<QB")  # m seal: last sealed epoch, whether a record followed it
_SLOT = TypeTag.SLOT_COMMAND
_SCHEMA = TypeTag.SCHEMA_EVENT
_NONE: frozenset[bytes] = frozenset()


class StoreStateMachine(SchemaEntryApply, EpochApply):
    """The LSM store of a node (``DATA/store``) and the rules for applying entries to it."""

    def __init__(self, data_dir: str, *, memtable_bytes: int = 32 << 20,
                 max_immutable: int = 2, cache_bytes: int = 32 << 20,
                 idempotency_window_ns: int = IDEMPOTENCY_WINDOW_NS,
                 cluster_id: int = 0, verify_tables: bool = False) -> None:
        """``idempotency_window_ns`` is part of the replicated rules: every replica of a
        cluster must use the same value (the node always uses the default). ``cluster_id``:
        this cluster's id (the GTID server_id of its own writes), needed to apply replicated
        epochs. ``memtable_bytes``, ``max_immutable``, ``cache_bytes``: the store's memory
        bounds (``LSMStore``; docs/node.md, "Memory"). ``verify_tables``: check every block of
        every table on open (the store's ``paranoid_checks``), so a damaged block refuses the
        open with its file and offset instead of failing a read or a compaction later. A
        failed open closes the store."""
        self.cluster_id = cluster_id
        if idempotency_window_ns <= 0:
            raise ValueError("idempotency_window_ns must be positive")
        self.window_ns = idempotency_window_ns
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, "store")
        self._memtable_bytes = memtable_bytes
        self._max_immutable, self._cache_bytes = max_immutable, cache_bytes
        staged = self.path + ".new"
        if os.path.isdir(staged):
            if os.path.isdir(self.path):
                shutil.rmtree(staged)  # an interrupted restore; the snapshot is re-imported
            else:
                self._install_staged(staged)
        self.store = LSMStore(self.path, memtable_bytes, paranoid_checks=verify_tables,
                              max_immutable=max_immutable, cache_bytes=cache_bytes)
        #: The conflict functions rules may name: the built-ins, and what ``load_functions``
        #: (set by the node: the plugins' functions) adds when a rule names another.
        self.conflict_functions: Mapping[str, FunctionSpec] = BUILTIN
        self.load_functions: Callable[[], Mapping[str, FunctionSpec]] | None = None
        #: Read snapshots pinned for the seeds this cluster serves (``seed_pins``).
        self.seed_pins = SeedPins()
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
            self.schemas[k[1:].decode()] = schema_from_row(gateway_pb2.Row.FromString(v))
        #: Table definitions and versions (``schema_apply``; replaced, never mutated).
        self.tables = load_definitions(self.store.scan_prefix, self.schemas)
        self.schema_at = events_by_index(self.store.scan_prefix, self.tables)
        for name, st in self.tables.items():  # what the stored shapes do not say (NOT NULL)
            if st.definition is not None and name in self.schemas:
                self.schemas[name] = table_schema_of(st.definition)
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
                U64.unpack(v)[0]
        for k, v in self.store.scan_prefix(keys.meta_key("as:")):
            sid, by = k[len(keys.meta_key("as:")):].split(b":")
            self.replication.apply_status[(int(sid), int(by))] = U64.unpack(v)[0]
        #: Per source cluster, the seal time (source clock, Unix ns) of the newest of its
        #: epochs applied here (``m rt:<source>``; replaced, never mutated, by apply).
        self.replicated_time: dict[int, int] = {
            int(k[len(keys.meta_key("rt:")):]): U64.unpack(v)[0]
            for k, v in self.store.scan_prefix(keys.meta_key("rt:"))}
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
        self._rules_for: dict[str, ConflictRule] | None = None  # what ``_rules`` was built of
        self._rules: RuleSet | None = None
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
            self.conflict_counters.setdefault(channel, {})[name] = U64.unpack(v)[0]
        self._staged: dict[str, list[StagedSegment]] = {}
        for _k, v in self.store.scan_prefix(keys.meta_key("seg:")):
            unit = replication_pb2.ReplicatedEpoch.FromString(v)
            self._staged.setdefault(unit.channel, []).append(StagedSegment(unit, v))
        for units in self._staged.values():
            units.sort(key=lambda u: u.segment.segment_id)
        #: Raised NOSPACE alarms by node id (``alarms``; replaced, never mutated, by apply).
        self.alarms = load_alarms(self.store.scan_prefix)
        #: (epoch, sealed_at_ns) of the newest epoch marker applied since the store was
        #: opened ((0, 0): none yet); what a channel source reports as its progress.
        self.newest_sealed: tuple[int, int] = (0, 0)
        #: Slots of the channels reading this log (``slot_apply``; replaced, never mutated).
        self.slots: dict[SlotId, replication_pb2.ChannelSlot] = load_slots(
            self.store.scan_prefix)
        raw = self.store.get(keys.meta_key("last_trans_id"))
        self.last_trans_id = U64.unpack(raw)[0] if raw else 0
        raw = self.store.get(keys.meta_key("last_commit_ts"))
        self.last_commit_ts = U64.unpack(raw)[0] if raw else 0
        #: The seed states of channels (``seed_apply``; replaced, never mutated, by apply).
        self.seeds: dict[str, channel_pb2.SeedInstall] = load_seeds(self.store.scan_prefix)
        #: The newest epoch sealed in the log, and whether an epoch-bearing record follows
        #: its marker (a store written before ``m seal`` existed counts as open, so a seed
        #: pin waits for the next marker there).
        raw = self.store.get(keys.meta_key("seal"))
        if raw:
            sealed, opened = _SEAL.unpack(raw)
        else:
            sealed, opened = 0, int(self.store.applied_index > 0)
        self.sealed_epoch, self.epoch_open = sealed, bool(opened)
        self._seal_dirty = not raw

    # -- observation ----------------------------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self.store.applied_index

    @property
    def durable_applied_index(self) -> int:
        return self.store.durable_applied_index

    def get_row(self, schema: str, table: str, key_values: Sequence[value_pb2.Value]
                ) -> gateway_pb2.Row | None:
        """The stored row of ``schema.table`` with primary key ``key_values``, or ``None``."""
        raw = self.store.get(keys.row_key(schema, table, key_values))
        return None if raw is None else gateway_pb2.Row.FromString(raw)

    def scan_rows(self, schema: str, table: str, start: Sequence[value_pb2.Value],
                  end: Sequence[value_pb2.Value]) -> Iterator[gateway_pb2.Row]:
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

    # -- apply ----------------------------------------------------------------------------------

    def apply(self, entries: list[Entry]) -> list[Applied]:
        """Apply committed ``entries`` atomically; return outcomes of transaction entries."""
        if not entries:
            return []
        ops: Ops = []
        overlay: dict[bytes, bytes | None] = {}
        out: list[Applied] = []
        self._marked = []
        parsed = self._parse_batch(entries)
        for e, p in zip(entries, parsed, strict=True):
            data = e.data
            if e.type != EntryType.NORMAL or not data:
                continue  # a leader no-op, a configuration change: only the index moves
            tag = data[0]
            if not self.epoch_open and (tag in (_TXN, _SCHEMA)
                                        or (tag == _UNIT and has_txns(data))):
                # a unit without transactions (reflections only) gets no marker from the
                # leader (``Sequencer.unit_proposed``): it must not hold a seed pin back
                self.epoch_open = self._seal_dirty = True
            if tag == _TXN:  # txn_apply
                done = self._apply_fast(e, p, ops, overlay)
                if done is None:
                    txn, idem = decode_entry(data)
                    assert txn is not None
                    done = self._apply_txn(e, txn, idem, ops, overlay)
                out.append(done)
            elif tag == _UNIT:  # epoch_apply
                unit_done = self._apply_unit(e, ops, overlay)
                if unit_done is not None:
                    out.append(unit_done)
            elif tag == _MARKER:
                self._apply_marker(e, ops)
            elif tag == _PIN:
                self._apply_pin(e, ops)
            elif tag == _SEED:
                self._apply_seed(e, ops)
            elif tag == _SCHEMA:
                self._apply_schema(e, ops, overlay)
            else:
                self._apply_command(tag, data, ops)
        self._expire(ops, overlay)
        self._write(ops, entries[-1].index)
        return out

    def _write(self, ops: Ops, index: int) -> None:
        """Write ``ops`` with the bookkeeping every batch ends with, as applied up to
        ``index``."""
        ops.append(meta_op(keys.meta_key("last_trans_id"), U64.pack(self.last_trans_id)))
        ops.append(meta_op(keys.meta_key("last_commit_ts"), U64.pack(self.last_commit_ts)))
        if self._seal_dirty:
            ops.append(meta_op(keys.meta_key("seal"),
                               _SEAL.pack(self.sealed_epoch, int(self.epoch_open))))
            self._seal_dirty = False
        if self._marked:
            self._remember_skips(self._marked)
            self._marked = []
        self.store.write_batch(ops, log_index=index)

    def _pin_now(self, ops: Ops, index: int) -> None:
        """Write what this ``apply`` collected up to entry ``index`` (an epoch boundary) and
        give the armed seed pins a snapshot of it; ``ops`` is emptied for the rest."""
        self._write(ops, index)
        ops.clear()
        for _ in range(self.seed_pins.waiting()):
            self.seed_pins.take(self.store.snapshot(), self.sealed_epoch, index)

    def _apply_marker(self, e: Entry, ops: Ops) -> None:
        try:
            marker = epoch_pb2.EpochMarker.FromString(e.data[1:])
        except DecodeError:
            return
        self.newest_sealed = (marker.epoch, marker.sealed_at_ns)
        if marker.epoch >= self.sealed_epoch:
            self.sealed_epoch, self.epoch_open = marker.epoch, False
            self._seal_dirty = True
        if self.seed_pins.armed():
            self._pin_now(ops, e.index)
        self.seed_pins.expire()  # the leases of pins nobody reads (a node that never served)

    def _apply_pin(self, e: Entry, ops: Ops) -> None:
        try:
            pin = channel_pb2.SeedPin.FromString(e.data[1:])
        except DecodeError:
            return
        if not pin.seed_id:
            return
        if pin.release:
            self.seed_pins.release(pin.seed_id)
            return
        self.seed_pins.arm(pin.seed_id, e.index, (pin.reader_cluster_id, pin.channel))
        if not self.epoch_open:  # already at the end of the last sealed epoch
            self._pin_now(ops, e.index)

    def _apply_seed(self, e: Entry, ops: Ops) -> None:
        store = self.store

        def scan_keys(lo: bytes, hi: bytes) -> Iterator[bytes]:
            return (k for k, _ in store.scan(lo, hi))

        got = apply_seed_install(self.seeds, self.replication, e.data, e.index, ops,
                                 store.get_version, scan_keys, self.last_trans_id > 0)
        if got is None:
            return
        self.seeds = got.seeds
        if got.replication is not None:
            self.replication = got.replication
        if got.schemas:
            schemas = dict(self.schemas)
            for name, raw in got.schemas.items():
                with contextlib.suppress(DecodeError):
                    schemas[name] = schema_from_row(gateway_pb2.Row.FromString(raw))
            self.schemas = schemas
        if got.tables is not None or got.schemas:  # definitions of the seeded shapes
            self.tables = {**load_definitions(lambda _p: (), self.schemas), **self.tables,
                           **(got.tables or {})}
            self._heads.clear()

    def _apply_command(self, tag: int, data: bytes, ops: Ops) -> None:
        """Apply a command entry (``command_apply``, ``alarms``, ``slot_apply``)."""
        if tag == _POS:
            pos = apply_position(self.applier_positions, data, ops)
            if pos is not None:  # item by item: other threads read the mapping
                self.applier_positions[pos.applier] = pos
        elif tag == _CHANNEL:
            channels = apply_channel_command(self.channels, self._staged, data, ops)
            if channels is not None:
                self.channels = channels
        elif tag == _CONFLICT:
            got = apply_conflict_command(
                ConflictSettings(self.conflict_rules, self.conflict_role), data, ops)
            if got is not None:
                self.conflict_rules, self.conflict_role = got
        elif tag == _ALARM:
            alarms = apply_alarm_command(self.alarms, data, ops)
            if alarms is not None:
                self.alarms = alarms
        elif tag == _SLOT:
            slots = apply_slot_command(self.slots, data, ops)
            if slots is not None:
                self.slots = slots

    def _parse_batch(self, entries: list[Entry]) -> list[ParsedTxn | None]:
        """``parse_txn`` of every transaction entry of an ``apply`` batch (None for the others
        and for what needs the general path), and ``_unrecorded`` set to the idempotency
        record keys of those transactions the store holds nothing for: one batched probe
        (``LSMStore.held``, bloom filters tested for all keys at once) instead of a lookup
        per keyed write -- fresh keys are the common case, and a miss costs a lookup in every
        memtable and level. The store does not change until the batch is written, and keys
        this batch records are read from its overlay first, so the set holds for the
        whole batch."""
        parsed: list[ParsedTxn | None] = []
        ikeys: list[bytes] = []
        for e in entries:
            data = e.data
            p = parse_txn(data) if e.type == EntryType.NORMAL and data and data[0] == _TXN \
                else None
            parsed.append(p)
            if p is not None:
                _, _, _, _, _, _, idem = p
                if idem:
                    ikeys.append(keys.idempotency_key(idem))
        self._unrecorded = self._unheld(ikeys) if ikeys else _NONE
        return parsed

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

    def restore(self, data: bytes | ArchiveReader) -> int:
        """Replace the store by the snapshot archive ``data`` (its bytes, or a reader over the
        snapshot's files); return its applied index."""
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
        self.seed_pins.close_all()  # they read the store being replaced
        self.store.close()
        shutil.rmtree(self.path)
        self._install_staged(staged)
        self.store = LSMStore(self.path, self._memtable_bytes, max_immutable=self._max_immutable,
                              cache_bytes=self._cache_bytes)
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
        self.seed_pins.close_all()
        self.store.close()


def table_of(stmt: statement_pb2.Statement) -> str:
    """Qualified table name of a row statement ('' for SQL and apply-status)."""
    kind = stmt.WhichOneof("kind")
    if kind in ("insert", "update", "delete"):
        return qualified_name(getattr(stmt, kind).table)
    return ""
