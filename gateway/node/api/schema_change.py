"""Planning and committing one table-definition change on the leader (``Schema.ChangeSchema``;
``schema_service`` serves it, ``api`` runs it where the node leads; docs/schema.md).

The change is planned against the table's current definition (``gateway.schema.apply``): a
malformed change is INVALID_ARGUMENT, one that cannot be applied everywhere (a primary-key
change, a type change, a primary-key column dropped, a column that exists, a change made on
another version) FAILED_PRECONDITION with the reason. It is then committed as a
``SCHEMA_EVENT`` entry and answered once applied; a refusal at apply (a concurrent change
that committed first) is FAILED_PRECONDITION too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.reserved import reserved_table_problem
from gateway.node.base.errors import PreconditionFailed
from gateway.node.base.validation import InvalidRequest
from gateway.schema import apply as plan
from gateway.schema.codec import column_from_proto, definition_to_proto, encode_event
from gateway.schema.model import InvalidChange, RefusedChange, SchemaError, SchemaEvent
from gateway.v1 import schema_pb2

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode

__all__ = ["CHANGE_SCHEMA", "change_schema", "plan_change"]

#: The name ``ChangeSchema`` is forwarded and authorized under (``security``).
CHANGE_SCHEMA = "Schema.ChangeSchema"
_K = schema_pb2.SchemaChangeKind


def plan_change(node: ServedNode, req: schema_pb2.SchemaChangeRequest) -> SchemaEvent:
    """The event ``req`` asks for, planned on the table's current state here; raises
    ``InvalidRequest`` or ``PreconditionFailed`` naming the table and column."""
    table = req.table
    try:
        plan.check_table_name(table)
        reason = reserved_table_problem(table.partition(".")[2])
        if reason is not None:
            raise InvalidChange(f"{table}: {reason}")
        st = node.sm.tables.get(table)
        current = st.definition if st is not None else None
        version = st.version if st is not None else 0
        if req.base_version and req.base_version != version:
            raise RefusedChange(f"{table} is at version {version}, not {req.base_version}")
        origin, parent = str(node.config.cluster_id), st.head if st is not None else b""
        kind = req.kind
        if kind == _K.SCHEMA_CHANGE_KIND_CREATE:
            cols = [column_from_proto(c, f"columns[{i}]") for i, c in enumerate(req.columns)]
            return plan.plan_create(current, table, cols, tuple(req.primary_key),
                                    origin=origin, parent=parent, last_version=version)
        if kind == _K.SCHEMA_CHANGE_KIND_ADD_COLUMN:
            return plan.plan_add_column(current, table, column_from_proto(req.column),
                                        origin=origin, parent=parent)
        if kind == _K.SCHEMA_CHANGE_KIND_DROP_COLUMN:
            return plan.plan_drop_column(current, table, req.column.name, origin=origin,
                                         parent=parent)
        if kind == _K.SCHEMA_CHANGE_KIND_RENAME_COLUMN:
            return plan.plan_rename_column(current, table, req.old_name, req.new_name,
                                           origin=origin, parent=parent)
        if kind == _K.SCHEMA_CHANGE_KIND_DROP_TABLE:
            return plan.plan_drop_table(current, table, origin=origin, parent=parent)
        if kind == _K.SCHEMA_CHANGE_KIND_CHANGE_TYPE:
            raise RefusedChange(
                f"{table}.{req.column.name}: changing a column's type is refused: each type "
                f"has its own value encoding, so rows written under the old type on any "
                f"cluster (in flight on a channel, in a sink) could not all be converted; add "
                f"a column of the new type and copy instead")
        if kind == _K.SCHEMA_CHANGE_KIND_CHANGE_PRIMARY_KEY:
            raise RefusedChange(
                f"{table}: changing the primary key is refused: rows are identified by their "
                f"key on every cluster and sink, and writes in flight were made under the old "
                f"key; create a new table instead")
        raise InvalidChange(f"{table}: kind {kind} is not a schema change")
    except RefusedChange as exc:
        raise PreconditionFailed("table", str(exc)) from None
    except SchemaError as exc:
        raise InvalidRequest("table", str(exc)) from None


async def change_schema(node: ServedNode, req: schema_pb2.SchemaChangeRequest
                        ) -> schema_pb2.SchemaChangeResponse:
    """Plan, commit and apply one change (the module docstring); on the leader."""
    event = plan_change(node, req)
    index = await node.driver.submit_entry(encode_event(event))
    refused = node.sm.refusal_at(index)
    if refused is not None:
        raise refused
    st = node.sm.tables.get(event.table)
    out = schema_pb2.SchemaChangeResponse(version=event.version, log_index=index)
    if st is not None and st.definition is not None:
        out.definition.CopyFrom(definition_to_proto(st.definition))
    return out
