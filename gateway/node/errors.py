"""Named errors of the node. The API maps them to gRPC status codes (``api._status_of``).

::

    NodeError
    ├── NotLeaderError        this node cannot order the request; ``leader`` is the known
    │                         leader id (0 = none): UNAVAILABLE (admin calls too), with
    │                         the leader in trailing metadata
    ├── ProposalLostError     the entry was overwritten by another leader's: UNAVAILABLE
    │                         (safe to retry with the same idempotency key)
    ├── NodeStoppedError      the node is shutting down or was removed: UNAVAILABLE
    ├── ReadTimeoutError      no read index was confirmed in time: UNAVAILABLE
    └── RequestTooLargeError  a forwarded request over this node's max_request_bytes:
                              RESOURCE_EXHAUSTED (the API server refuses larger requests
                              itself, before reading them)
    storage.LogDamagedError (NodeError)      DATA_LOSS naming the damaged WAL file and offset
    validation.InvalidRequest (ValueError)   INVALID_ARGUMENT naming the field
    TimeoutError                             DEADLINE_EXCEEDED
"""

from __future__ import annotations

__all__ = ["NodeError", "NodeStoppedError", "NotLeaderError", "ProposalLostError",
           "ReadTimeoutError", "RequestTooLargeError"]


class NodeError(Exception):
    """Base class of the node's errors; ``str()`` is one line."""


class NotLeaderError(NodeError):
    """This node is not the leader; ``leader`` is the leader's id, 0 when unknown."""

    def __init__(self, leader: int, message: str = "") -> None:
        self.leader = leader
        super().__init__(message or (f"not the leader (leader is node {leader})" if leader
                                     else "no leader elected yet"))


class ProposalLostError(NodeError):
    """The proposed entry lost to another leader's entry at its index; retry."""


class NodeStoppedError(NodeError):
    """The node is stopping (or was removed from the cluster)."""


class ReadTimeoutError(NodeError):
    """A linearizable read point was not confirmed in time (no leader, partition)."""


class RequestTooLargeError(NodeError):
    """A request is larger than this node's ``max_request_bytes``."""
