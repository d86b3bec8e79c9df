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
    ├── RequestTooLargeError  a forwarded request over this node's max_request_bytes:
    │                         RESOURCE_EXHAUSTED (the API server refuses larger requests
    │                         itself, before reading them)
    ├── PreconditionFailed    a conditional write's condition did not hold when it was
    │                         applied (``conditions``): FAILED_PRECONDITION naming
    │                         ``field`` (``conditions[i]``) in trailing metadata
    └── StorageError          the node's disk failed under a request (``storage_errors``);
        ├── NoSpaceError      a NOSPACE alarm is raised, or a disk is full:
        │                     RESOURCE_EXHAUSTED naming the node and the path
        ├── DataLossError     stored bytes are damaged: DATA_LOSS (file, byte offset)
        │   └── storage.LogDamagedError  a log entry read back no longer verifies (also a
        │                     CompactedError: the Raft core sends a snapshot instead)
        └── StorageFailedError  a write or fsync failed and the node stops: UNAVAILABLE
    validation.InvalidRequest (ValueError)   INVALID_ARGUMENT naming the field
    TimeoutError                             DEADLINE_EXCEEDED
"""

from __future__ import annotations

__all__ = ["DataLossError", "NoSpaceError", "NodeError", "NodeStoppedError", "NotLeaderError",
           "PreconditionFailed", "ProposalLostError", "ReadTimeoutError", "RequestTooLargeError",
           "StorageError", "StorageFailedError"]


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


class PreconditionFailed(NodeError):
    """A conditional write was refused: the condition ``field`` (``conditions[i]``) did not
    hold when the entry was applied; ``str()`` is ``field: reason`` (the reason names the
    table, the key and what was found)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class StorageError(NodeError):
    """A storage failure as a client sees it: one line, files relative to the data
    directory, no internal class names (``storage_errors.client_error`` builds them)."""


class NoSpaceError(StorageError):
    """Writes are refused: a node's disk is (nearly) full (the NOSPACE alarm, or ENOSPC)."""


class DataLossError(StorageError):
    """Stored data is damaged (a checksum failed); the message names the file and offset."""


class StorageFailedError(StorageError):
    """A write or fsync of the node's files failed; the node stops and recovers on restart."""

