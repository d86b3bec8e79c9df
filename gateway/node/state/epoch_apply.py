"""Replicated epochs applied to the store: the part of ``StoreStateMachine`` (see
``state_machine`` for the rules every replica follows) that applies ``REPLICATED_EPOCH``
entries (docs/replication.md).

One entry, or several segments of one (staged under ``m seg:<channel>:<n>`` until the last
arrives), is applied all or nothing:

1. staging: a segment that is not the last is kept; the last reassembles the epoch
   (``join_segments``), or refuses it when segments are missing;
2. guards: ``ReplicationState.refusal`` (an epoch out of order or already applied), the
   schema check (a clashing transaction is quarantined, ``m qt:``, the rest applies), the
   conflict rules' shapes (``epoch_guards``);
3. judging: with conflict rules set, the epoch's changes are judged against the rows as they
   stand (``conflict_apply``), unless all are inserts of fresh keys (``epoch_judging``);
4. derivation: exceptions and refreshes become this cluster's derived transaction, under the
   GTID and commit time the leader reserved in the entry; what the entry finally holds is
   recorded (``m dx:<index>``; ``epoch_judging``);
5. counters: MySQL's conflict counters per channel (``m cc:``), origin watermarks
   (``m w:``), apply-status rows (``m as:``) and the source's seal time of the epoch
   (``m rt:<source>``: the replicated time a channel reports).

Rows are written through ``txn_apply``'s paths with this cluster's local epoch and the
origin's author and commit timestamp; insert-only transactions take the fast path from the
bytes the entry carries them in (``epoch_wire``), judged ones keep the rows built before.

``EpochApply`` is a base of ``StoreStateMachine``, not used alone: the attributes annotated
below are the state machine's, set by its ``_load``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from google.protobuf.message import DecodeError

from gateway.conflict import (
    ConflictConfigError,
    RoleNotSetError,
)
from gateway.node.base.validation import InvalidRequest, TableSchema, check_statements
from gateway.node.state import keys
from gateway.node.state.epoch_guards import (
    check_ruled_shapes,
    derived_problem,
    emptied,
    quarantine_op,
)
from gateway.node.state.epoch_judging import U64, EpochJudging
from gateway.node.state.epoch_wire import holds_transaction, judged_rows, transaction_payloads
from gateway.node.state.schema_replica import (
    ReplicaSchema,
    apply_replicated_event,
    renames_of,
    upcast_transaction,
)
from gateway.node.state.store_ops import OP_KEY, Ops, RowMeta, meta_op
from gateway.node.state.txn_apply import Applied, schema_to_row
from gateway.node.state.wire import encode_transaction, put_pairs
from gateway.raft import Entry
from gateway.replication import join_segments, transactions
from gateway.schema.codec import event_from_proto
from gateway.schema.model import SchemaError, SchemaEvent
from gateway.v1 import gateway_pb2, gtid_pb2, replication_pb2, transaction_pb2

__all__ = ["U64", "ConflictFunctionMissingError", "EpochApply", "StagedSegment", "has_txns",
           "seg_key"]

log = logging.getLogger("gateway.node.state.state_machine")


def seg_key(channel: str, segment_id: int) -> bytes:
    """Where a staged segment of a replicated epoch of ``channel`` is kept."""
    return keys.meta_key(f"seg:{channel}:{segment_id}")


class StagedSegment(NamedTuple):
    """A segment of a replicated epoch waiting for the last one: the parsed ``segment`` and
    the ``data`` it was received as (the ``ReplicatedEpoch`` bytes, without the type tag)."""

    segment: replication_pb2.ReplicatedEpoch
    data: bytes


class ConflictFunctionMissingError(RuntimeError):
    """A replicated epoch meets a conflict rule whose function this node lacks (a plugin it
    did not load). Applying it here without the function could make this node differ from
    the others, so ``apply`` raises and the node stops with this message."""


class EpochApply(EpochJudging):
    """Applies replicated-epoch entries (see the module docstring)."""

    channel_txns: dict[str, int]
    replicated_time: dict[int, int]
    _staged: dict[str, list[StagedSegment]]
    _shapes_checked: dict[tuple[object, str], TableSchema]
    _write: Callable[[Ops, int], None]

    def _stage(self, e: Entry, ops: Ops) -> list[StagedSegment] | Applied | None:
        """Stage the segment entry ``e`` (None: more segments to come), or return the whole
        epoch's segments in order when it is the last one, or the entry's refusal (it does
        not parse, or segments are missing)."""
        data = e.data[1:]
        try:
            seg = replication_pb2.ReplicatedEpoch.FromString(data)
        except DecodeError as exc:
            self._mark(ops, e.index, b"rejected: replicated epoch does not parse")
            return Applied(e.index, e.term, error=InvalidRequest("entry", str(exc)))
        staged = self._staged.get(seg.channel, [])
        if seg.segment_id <= 1 and staged:
            for old in staged:  # an earlier unit of this channel was abandoned mid-way
                ops.append(meta_op(seg_key(seg.channel, old.segment.segment_id), None))
            staged = []
        if not seg.end_segment:
            if staged and (staged[-1].segment.segment_id + 1 != seg.segment_id
                           or staged[-1].segment.source_epoch != seg.source_epoch):
                staged = []
            self._staged[seg.channel] = [*staged, StagedSegment(seg, data)]
            ops.append(meta_op(seg_key(seg.channel, seg.segment_id), data))
            return None
        self._staged.pop(seg.channel, None)
        for old in staged:
            ops.append(meta_op(seg_key(seg.channel, old.segment.segment_id), None))
        if staged or seg.segment_id > 1:
            expect = list(range(1, seg.segment_id))
            if [u.segment.segment_id for u in staged] != expect or any(
                    u.segment.source_epoch != seg.source_epoch for u in staged):
                return self._refuse_unit(e, ops, "segments of the replicated epoch "
                                         "are missing", seg)
        return [*staged, StagedSegment(seg, data)]

    def _apply_unit(self, e: Entry, ops: Ops, overlay: dict[bytes, bytes | None]
                    ) -> Applied | None:
        """Apply a replicated-epoch entry (see the module docstring); None for a staged
        segment."""
        segments = self._stage(e, ops)
        if not isinstance(segments, list):
            return segments
        unit = join_segments([s.segment for s in segments])
        reason = self.replication.refusal(unit)
        if reason is not None:
            return self._refuse_unit(e, ops, reason, unit)
        schema_lost, pending = self._apply_schema_items(unit, e.index, ops, overlay)
        txns = transactions(unit.items)
        payloads = _payloads(segments, len(txns))
        received = list(txns)  # the transactions ``payloads`` holds the bytes of
        store = self.store
        for t_no, txn in enumerate(txns):  # written under another version of a table
            fitted = upcast_transaction(txn, self.tables,
                                        lambda name: renames_of(store.scan_prefix, name,
                                                                pending))
            if fitted is not None:
                txns[t_no] = fitted
        schemas = dict(self.schemas)
        created: list[tuple[str, TableSchema]] = []
        quarantined: Ops = []
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
        local_epoch = unit.local_epoch  # the rows' epoch: their last change here
        # the stored rows of insert-only transactions, built from their wire bytes (C): their
        # keys serve the judgement, and they are written as they are unless it drops records
        pre: list[Ops | None] = [
            self._replicated_rows(_received(payloads, received, n, t), e.index, local_epoch)
            for n, t in enumerate(txns)]
        counters: dict[str, int] = {}
        ruled = bool(self.conflict_rules and txns)
        row_keys = _row_keys(pre) if ruled else []  # what the screen and the judgement read
        fresh, held = self._all_fresh(txns, row_keys, overlay) if ruled else (None, None)
        if ruled:
            try:
                check_ruled_shapes(txns, self._ruleset(), schemas, self._shapes_checked)
            except ConflictConfigError as exc:
                return self._refuse_unit(e, ops, f"conflict rules: {exc}", unit)
        if fresh:  # judged rows, all applied as they came
            pass
        elif ruled and fresh is None:
            try:
                wires = [_cut(payloads, received, n, t) for n, t in enumerate(txns)]
                judged = self._judge(unit, txns, ops, overlay, row_keys, schemas, held, wires)
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
            pre = judged_rows(pre, txns, judged.transactions, judged.gone)
            txns = judged.transactions
            counters = {k: v for k, v in judged.counters.items() if v}
        self._record_schemas(created, ops, e.index, str(unit.source_id))
        if unit.derived_trans_id:
            self.last_trans_id = max(self.last_trans_id, unit.derived_trans_id)
            self.last_commit_ts = max(self.last_commit_ts, unit.derived_commit_ts)
        for n, (txn, built) in enumerate(zip(txns, pre, strict=True)):
            # again when not built: a table the epoch created is known now
            rows = built if built is not None else self._replicated_rows(
                _received(payloads, received, n, txn), e.index, local_epoch)
            if rows is not None:
                ops += rows
                put_pairs(overlay, rows)
                continue
            g = txn.gtid
            gtid = gtid_pb2.Gtid(server_id=g.server_id, trans_id=g.trans_id)
            self._write_statements(txn, e.index, gtid, RowMeta(
                local_epoch, txn.author, txn.commit_timestamp_ns), ops, overlay)
        if judged is not None and (judged.exceptions or judged.refresh or judged.dropped):
            self._derive(unit, judged, e.index, ops, overlay)
        elif quarantined:
            self._record_outcome(unit, txns, None, e.index, ops)
        if quarantined:
            ops += quarantined
            counters["quarantined_trans_count"] = len(quarantined)
        if schema_lost:
            counters["schema_lost_count"] = schema_lost
        state = self.replication.copy()
        origins, pairs = state.apply(unit)
        if self.conflict_rules and "last_conflict_epoch" not in counters:
            stable = self._stable_epoch(unit, state)
            if stable:
                counters["last_stable_epoch"] = stable
        if counters:
            self._count_conflicts(unit.channel, counters, ops)
        for o in origins:
            ops.append(meta_op(keys.meta_key(f"w:{o}"), U64.pack(state.watermarks[o])))
        for sid, by in pairs:
            ops.append(meta_op(keys.meta_key(f"as:{sid}:{by}"),
                               U64.pack(state.apply_status[(sid, by)])))
        self.replication = state
        if unit.sealed_at_ns > self.replicated_time.get(unit.source_id, 0):
            # the source commit time up to which this cluster holds everything (channel lag)
            self.replicated_time = {**self.replicated_time, unit.source_id: unit.sealed_at_ns}
            ops.append(meta_op(keys.meta_key(f"rt:{unit.source_id}"),
                               U64.pack(unit.sealed_at_ns)))
        self.channel_txns[unit.channel] = self.channel_txns.get(unit.channel, 0) + sum(
            1 for t in txns if t.statements)
        return Applied(e.index, e.term, result=gateway_pb2.WriteResult(
            epoch=unit.local_epoch, log_index=e.index))

    def _apply_schema_items(self, unit: replication_pb2.ReplicatedEpoch, index: int,
                            ops: Ops, overlay: dict[bytes, bytes | None]
                            ) -> tuple[int, list[SchemaEvent]]:
        """Apply the schema events ``unit`` carries (``schema_replica``) before its
        transactions; returns how many events lost here (the channel's
        ``schema_lost_count``) and the events applied (in ``ops``, not in the store yet).
        The batch so far is written first, so the rows they rewrite are read from the store;
        the rewritten rows join ``overlay``."""
        items = [it.schema_event for it in unit.items
                 if it.WhichOneof("item") == "schema_event"]
        if not items:
            return 0, []
        if ops:
            self._write(ops, index - 1)
            ops.clear()
        overlay.clear()
        store = self.store
        out = ReplicaSchema()
        for msg in items:
            try:
                ev = event_from_proto(msg)
            except (SchemaError, ValueError) as exc:
                log.warning("channel %s: a schema event of cluster %d does not decode: %s",
                            unit.channel, unit.source_id, exc)
                continue
            apply_replicated_event(self.tables, self.schemas, ev, index, ops,
                                   lambda lo, hi: store.scan(lo, hi), store.scan_prefix,
                                   schema_to_row, out)
        if out.tables is not None and out.schemas is not None:
            self.tables, self.schemas = out.tables, out.schemas
            self._heads.clear()  # insert heads checked against the shapes before
        for ev in out.applied:
            self._note_schema(index, ev, unit.local_epoch)
        for lost in out.lost:
            log.warning("channel %s: schema change of %s version %d from cluster %s lost: "
                        "%s", unit.channel, lost.event.table, lost.event.version,
                        lost.event.origin or "?", lost.cause)
        put_pairs(overlay, ops)
        return len(out.lost), out.applied

    def unit_outcome(self, index: int) -> replication_pb2.ReplicatedEpoch | None:
        """What the replicated epoch applied at log ``index`` holds when conflict rules
        changed it (accepted transactions, then this cluster's derived one), else None."""
        raw = self.unit_outcome_bytes(index)
        return None if raw is None else replication_pb2.ReplicatedEpoch.FromString(raw)

    def unit_outcome_bytes(self, index: int) -> bytes | None:  # unit_outcome's bytes
        return self.store.get(keys.meta_key(f"dx:{index}"))

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

    def _refuse_unit(self, e: Entry, ops: Ops, reason: str,
                     unit: replication_pb2.ReplicatedEpoch) -> Applied:
        what = f"epoch {unit.source_epoch} of cluster {unit.source_id} (channel {unit.channel!r})"
        self._mark(ops, e.index, f"rejected: {what}: {reason}".encode())
        return Applied(e.index, e.term, error=InvalidRequest("channel", f"{what}: {reason}"))


def has_txns(data: bytes) -> bool:
    """Whether the ``REPLICATED_EPOCH`` entry payload ``data`` holds a transaction (an
    undecodable one counts as holding one: a pin then waits for a marker, never skips).
    Read from the bytes (``holds_transaction``) unless they need a parse."""
    got = holds_transaction(data, 1)
    if got is not None:
        return got
    try:
        unit = replication_pb2.ReplicatedEpoch.FromString(data[1:])
    except DecodeError:
        return True
    return any(it.WhichOneof("item") == "transaction" for it in unit.items)


def _payloads(segments: list[StagedSegment], count: int) -> list[bytes] | None:
    """The entry payloads of the ``count`` transactions of an epoch's ``segments``, cut from
    the bytes they were received as; None when they cannot be (``transaction_payloads``)."""
    out: list[bytes] = []
    for s in segments:
        got = transaction_payloads(s.data)
        if got is None:
            return None
        out += got
    return out if len(out) == count else None


def _cut(payloads: list[bytes] | None, received: list[transaction_pb2.Transaction],
         n: int, txn: transaction_pb2.Transaction) -> bytes | None:
    """The bytes ``txn``, the epoch's transaction ``n``, was received as (an entry payload),
    unless the apply replaced it (quarantined, or changed by the judgement) or they could
    not be cut: then None."""
    return payloads[n] if payloads is not None and txn is received[n] else None


def _received(payloads: list[bytes] | None, received: list[transaction_pb2.Transaction],
              n: int, txn: transaction_pb2.Transaction) -> bytes:
    """The entry payload of ``txn``: ``_cut``'s bytes, else ``txn`` serialized."""
    got = _cut(payloads, received, n, txn)
    return got if got is not None else encode_transaction(txn)


def _row_keys(pre: list[Ops | None]) -> list[list[bytes] | None]:
    """The row keys of the store operations built for each transaction (None: not built)."""
    return [None if p is None else list(map(OP_KEY, p)) for p in pre]
