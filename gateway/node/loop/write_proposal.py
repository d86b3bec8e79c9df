"""``WriteProposal``: one client write as the API hands it to the driver (``submit_write``).

What the API layer learned about a write while taking it (its statements' bytes, whether it
validated them, whether the store holds no record of its key...) travels with the write as
named fields of one value, instead of as flag parameters of ``RaftDriver.submit_write``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from gateway.node.base.validation import TableSchema
    from gateway.v1 import statement_pb2, transaction_pb2

__all__ = ["WriteProposal"]


class WriteProposal(NamedTuple):
    """A client write to propose (immutable; built by ``api.py`` or a test)."""

    #: The write's statements: a repeated ``Statement`` (a protobuf container or a list).
    statements: Sequence[statement_pb2.Statement]
    #: The client's idempotency key ('' for none): a retry of an applied write with the same
    #: key is answered with the first one's result, marked ``duplicate``.
    idempotency_key: str = ""
    #: When the client's request arrived (``time.time_ns()``; 0: when submitted). The
    #: transaction's ``start_timestamp_ns`` (never after its commit timestamp).
    start_ns: int = 0
    #: Set when the caller already validated ``statements`` (``WireChecker.check`` against
    #: ``RaftDriver.known_schemas``): the schemas they create, which the driver only records
    #: instead of validating again. None: the driver validates before proposing. Every replica
    #: validates the entry again when applying it, so a write that raced a schema change is
    #: still rejected everywhere.
    created: list[tuple[str, TableSchema]] | None = None
    #: ``frame_statements(statements)`` when the caller has it (the entry is built from these
    #: bytes); None: the driver serializes the statements once.
    raw: bytes | None = None
    #: The future may resolve with the serialized ``WriteResult`` (bytes) when the applied
    #: entry has those bytes (every write applied by the fast path), else with the message --
    #: as it always does for a duplicate of an idempotency key -- so that a response can carry
    #: the bytes without parsing them back into a message.
    wire: bool = False
    #: The caller found, in this same step of the loop, that the store holds no record for
    #: ``idempotency_key`` (``StoreStateMachine.unrecorded``, one probe for a request's
    #: writes), so it is not looked up again. That lookup only answers retries of applied
    #: writes without proposing them; applying the entry decides duplicates.
    unrecorded: bool = False
    #: The caller holds the ``admin`` permission (it may delete ``$EX`` rows).
    admin: bool = False
    #: The write's conditions (a repeated ``Condition``, ``gateway.node.state.conditions``);
    #: None for a plain write, which keeps the plain path. Checked before proposing
    #: (``InvalidRequest``) and logged in the entry; every replica evaluates them when applying it
    #: (``PreconditionFailed``: refused, nothing applied).
    conditions: Sequence[transaction_pb2.Condition] | None = None
