"""The operator's methods over what went wrong, as the API runs them on the node asked:
``ConflictsList`` (this node's store: exceptions tables are replicated state), ``DeadLetters``
and ``DeadLetterAction`` (this node's appliers' files). ``ConflictsReplay`` writes, so it runs
on the leader through the servicer's forwarding (``api._replay_local``). The work is the
rooms' own: ``replication.conflict_rows`` and ``appliers.dead_letters``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.node.base.validation import InvalidRequest
from gateway.v1 import gateway_pb2

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode

__all__ = ["conflicts_list", "dead_letter_action", "dead_letters"]


async def conflicts_list(node: ServedNode, req: gateway_pb2.ConflictsListRequest
                         ) -> gateway_pb2.ConflictsListResponse:
    # on the loop, as Scan reads the store: the store is the loop's
    return node.conflicts.list_rows(req)


async def dead_letters(node: ServedNode, req: gateway_pb2.DeadLettersRequest
                       ) -> gateway_pb2.DeadLettersResponse:
    if node.appliers is None:  # no appliers configured: nothing to list
        if req.applier:
            raise InvalidRequest("applier", f"no applier {req.applier!r} on this node "
                                 f"(appliers: none)")
        return gateway_pb2.DeadLettersResponse()
    return await node.appliers.dead_letters(req)


async def dead_letter_action(node: ServedNode, req: gateway_pb2.DeadLetterActionRequest
                             ) -> gateway_pb2.DeadLetterActionResponse:
    if node.appliers is None:
        raise InvalidRequest("applier", f"no applier {req.applier!r} on this node "
                             f"(appliers: none)")
    return await node.appliers.dead_letter_action(req)
