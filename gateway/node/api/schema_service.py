"""``gateway.v1.Schema``: table definitions through the API (docs/schema.md).

``ChangeSchema`` runs on the leader (a follower forwards it, as the ``Gateway`` admin calls;
``schema_change`` holds what it does). ``ShowTable`` and ``SchemaHistory`` read this node's
store.

Permissions (``security``): ``Schema.ChangeSchema`` needs ``admin``; the reads ``read``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.node.api.schema_change import CHANGE_SCHEMA
from gateway.node.base.validation import InvalidRequest
from gateway.node.state.schema_apply import read_history
from gateway.node.state.schema_replica import read_lost
from gateway.schema.codec import definition_to_proto, event_to_proto
from gateway.v1 import schema_pb2, schema_pb2_grpc

if TYPE_CHECKING:
    from gateway.node.api.api import GatewayServicer
    from gateway.node.api.call_context import CallContext

__all__ = ["SchemaServicer"]

class SchemaServicer(schema_pb2_grpc.SchemaServicer):
    """Serves ``gateway.v1.Schema`` beside the ``Gateway`` servicer, whose forwarding to the
    leader and error mapping it shares."""

    def __init__(self, gateway: GatewayServicer) -> None:
        self._gateway = gateway
        self.node = gateway.node

    async def ChangeSchema(self, request: schema_pb2.SchemaChangeRequest,
                           context: CallContext) -> schema_pb2.SchemaChangeResponse:
        got = await self._gateway._run(CHANGE_SCHEMA, request, context)
        if isinstance(got, bytes):  # forwarded: the leader's serialized answer
            return schema_pb2.SchemaChangeResponse.FromString(got)
        assert isinstance(got, schema_pb2.SchemaChangeResponse)
        return got

    async def ShowTable(self, request: schema_pb2.ShowTableRequest,
                        context: CallContext) -> schema_pb2.ShowTableResponse:
        st = self.node.sm.tables.get(request.table)
        if st is None:
            await self._gateway._abort(context, InvalidRequest(
                "table", f"no table {request.table!r} (no CREATE TABLE, no write)"))
        out = schema_pb2.ShowTableResponse(dropped=st.definition is None)
        if st.definition is not None:
            out.definition.CopyFrom(definition_to_proto(st.definition))
        else:
            out.definition.table, out.definition.version = request.table, st.version
        return out

    async def SchemaHistory(self, request: schema_pb2.SchemaHistoryRequest,
                            context: CallContext) -> schema_pb2.SchemaHistoryResponse:
        items = read_history(self.node.sm.store.scan_prefix, request.table)
        lost = read_lost(self.node.sm.store.scan_prefix, request.table)
        if not items and not lost and request.table not in self.node.sm.tables:
            await self._gateway._abort(context, InvalidRequest(
                "table", f"no table {request.table!r} (no CREATE TABLE, no write)"))
        return schema_pb2.SchemaHistoryResponse(
            events=[event_to_proto(h.event) for h in items],
            lost=[event_to_proto(x.event) for x in lost],
            lost_causes=[x.cause for x in lost])
