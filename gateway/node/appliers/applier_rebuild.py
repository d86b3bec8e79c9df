"""Rebuilding an applier's target from the node's store when the log no longer holds its past.

An applier at position ``P`` needs log entries ``P+1, P+2, ...``. After the node installed a
snapshot (a follower that lagged, a node that joined a compacted cluster) or after its target
was wiped while the log was compacted, entries ``P+1 .. F-1`` (the log starts at ``F``) exist
only as the store's state. Feeding the applier placeholders for them would skip writes it
never applied (issue 12), so instead:

- an applier that can rebuild its target (``reset_target()``: a target it owns alone, such as
  the embedded SQLite file) is rebuilt: a point-in-time view of the store is taken at its
  applied index ``I`` (>= ``F - 1``), the target is emptied, every stored row is applied as an
  ``UPSERT`` carrying the row's own metadata (GTID, log index, epoch, author, commit time),
  and the position is saved as ``I``; the dispatcher then continues from ``I + 1``. A crash
  during the rebuild leaves the old position, so the next start rebuilds again;
- an applier that cannot (a shared external store: emptying it is not the gateway's call)
  stops with `ApplierBehindLogError`: Status shows it failing with the gap, nothing is
  skipped. Recover by starting it on a node whose log still holds the gap (transfer the
  leadership for a cluster-scoped applier) or by resetting the external store by hand and
  removing its position file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from gateway.appliers.durable import hold
from gateway.appliers.position import ApplierPosition, PositionStore
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef, python_value
from gateway.node.state import keys
from gateway.v1 import gateway_pb2

if TYPE_CHECKING:
    from gateway.appliers.contract import Applier
    from gateway.core.lsm import LSMStore, ReadSnapshot

__all__ = ["ApplierBehindLogError", "can_rebuild", "rebuild_from_store", "stored_row_ops"]

log = logging.getLogger("gateway.node.appliers.applier_rebuild")

_ROW_PREFIX = b"r"


class ApplierBehindLogError(Exception):
    """An applier needs log entries this node no longer has and cannot rebuild its target;
    ``str()`` is one line naming the applier, the gap and what to do."""


def _reset_of(applier: Applier) -> Callable[[], None] | None:
    """``applier.reset_target`` (an optional method of the contract), or None."""
    reset = getattr(applier, "reset_target", None)
    return reset if callable(reset) else None


def can_rebuild(applier: Applier) -> bool:
    """True if ``applier`` offers ``reset_target()`` (it owns its target alone)."""
    return _reset_of(applier) is not None


def stored_row_ops(rows: Iterator[tuple[bytes, bytes]], *, backfill: int = 0
                   ) -> Iterator[RowOp]:
    """``UPSERT`` operations for the stored rows ``(key, serialized gateway.v1.Row)``, each
    carrying the row's metadata as the operation of its last change would (and ``backfill``:
    the snapshot index of a backfill, ``RowOp.backfill``)."""
    for _key, data in rows:
        row = gateway_pb2.Row.FromString(data)
        key_cols = tuple(Column(f.name, f.type) for f in row.key_fields)
        cols = tuple(Column(f.name, f.type) for f in row.fields)
        yield RowOp(
            OpKind.UPSERT, TableRef(row.table.schema_name, row.table.table_name), key_cols,
            tuple(python_value(v, c.type) for v, c in zip(row.key_values, key_cols,
                                                          strict=True)),
            cols, tuple(python_value(v, c.type) for v, c in zip(row.values, cols, strict=True)),
            gtid=Gtid(row.gtid.server_id, row.gtid.trans_id), log_index=row.log_index,
            epoch=row.epoch, author=row.author, commit_ts_ns=row.commit_timestamp_ns,
            backfill=backfill)


def _rows_in_table_order(view: ReadSnapshot) -> Iterator[RowOp]:
    """Every stored row of ``view`` as an ``UPSERT``, table by table in the order the tables'
    oldest live rows were written (the log order as far as the store still shows it), so a
    target whose tables interact (the SQLite applier refuses a second schema's table of the
    same name) sees them in the order the log gave them, not in key order."""
    oldest: dict[tuple[str, str], int] = {}
    for _key, data in view.scan_prefix(_ROW_PREFIX):
        row = gateway_pb2.Row.FromString(data)
        ref = (row.table.schema_name, row.table.table_name)
        if row.log_index < oldest.get(ref, 1 << 64):
            oldest[ref] = row.log_index
    for schema, table in sorted(oldest, key=oldest.__getitem__):
        yield from stored_row_ops(view.scan_prefix(keys.table_prefix(schema, table)))


def behind_log_error(name: str, position: int, first_index: int) -> ApplierBehindLogError:
    return ApplierBehindLogError(
        f"applier {name!r} is at log index {position} but this node's log starts at index "
        f"{first_index} (it installed a snapshot or compacted): entries {position + 1}.."
        f"{first_index - 1} cannot be applied here and the applier cannot rebuild its target; "
        f"run it on a node whose log still holds them, or reset its store by hand and remove "
        f"its position file")


def rebuild_from_store(applier: Applier, positions: PositionStore, store: LSMStore, *,
                       position: int, first_index: int,
                       apply: Callable[[Sequence[RowOp]], None], batch: int = 500,
                       why: str = "") -> int:
    """Rebuild ``applier``'s target from ``store`` (module docstring) and save its position;
    return the store index it now reflects. ``apply`` applies a batch the way the dispatcher
    does (retries, dead letters for operations that fail for good). Raises
    `ApplierBehindLogError` if the applier cannot rebuild, and whatever ``apply`` raises (the
    position is then unchanged, so the rebuild is retried). ``why``: the cause for the log
    when it is not a compacted log (a seed's end)."""
    reset_target = _reset_of(applier)
    if reset_target is None:
        raise behind_log_error(applier.name, position, first_index)
    with store.snapshot() as view:
        index = view.applied_index
        cause = why or f"the log starts at {first_index}"
        log.warning("applier %s: at log index %d but %s; rebuilding its target from the "
                    "store at index %d", applier.name, position, cause, index)
        reset_target()
        rows = 0
        pending: list[RowOp] = []
        for op in _rows_in_table_order(view):
            pending.append(op)
            if len(pending) >= batch:
                apply(pending)
                rows += len(pending)
                pending = []
        if pending:
            apply(pending)
            rows += len(pending)
    hold(applier, ApplierPosition(index))
    positions.save(ApplierPosition(index))
    log.warning("applier %s: rebuilt from the store: %d rows, now at log index %d",
                applier.name, rows, index)
    return index
