"""The state machine's part that applies ``SCHEMA_EVENT`` entries (``schema_apply`` holds
the rules; this mixin holds what it needs of the store and the running ``apply``)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.node.base.errors import PreconditionFailed
from gateway.node.state.conditions import refusal_marker
from gateway.node.state.schema_apply import apply_schema_entry
from gateway.node.state.store_ops import Ops
from gateway.node.state.txn_apply import TransactionApply, schema_to_row
from gateway.raft import Entry
from gateway.schema.codec import decode_event

__all__ = ["SchemaEntryApply"]


class SchemaEntryApply(TransactionApply):
    """Applies schema events for ``StoreStateMachine`` (which provides ``_write``)."""

    _write: Callable[[Ops, int], None]

    def _apply_schema(self, e: Entry, ops: Ops, overlay: dict[bytes, bytes | None]) -> None:
        """Apply a schema event (``schema_apply``). The batch so far is written first, so the
        rows it rewrites are read from the store; the event's own operations are written at
        once too, and the overlay is dropped: every later entry of this ``apply`` reads the
        rewritten rows from the store."""
        if ops:
            self._write(ops, e.index - 1)
            ops.clear()
        store = self.store
        got = apply_schema_entry(self.tables, self.schemas, e.data, e.index, ops,
                                 lambda lo, hi: store.scan(lo, hi), schema_to_row)
        if got.refused:
            self._mark(ops, e.index, refusal_marker(PreconditionFailed(got.table,
                                                                       got.refused)))
        else:
            assert got.tables is not None and got.schemas is not None
            self.tables, self.schemas = got.tables, got.schemas
            self._heads.clear()  # insert heads checked against the shapes before
            self._note_schema(e.index, decode_event(e.data))
        self._write(ops, e.index)
        ops.clear()
        overlay.clear()
