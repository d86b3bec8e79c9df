"""``WriteProposal``: one client write as the API hands it to the driver (``submit_write``),
and as the driver queues it until it is proposed.

What the API layer learned about a write while taking it (its statements' bytes, whether it
validated them, whether the store holds no record of its key...) travels with the write as
named fields of one value, instead of as flag parameters of ``RaftDriver.submit_write``. The
driver queues the same object with the future its caller awaits (``future``): one object per
write on the leader's hot path, not a proposal wrapped in a pending-write record.

A slotted class rather than a ``NamedTuple``: its constructor is one plain ``__init__`` (a
``NamedTuple``'s generated ``__new__`` costs more per write), and the driver's ``future`` and
resolved ``start_ns`` are set on it. The API's fields are not changed after ``submit_write``.
The hot API sites pass the fields by position, in :data:`FIELDS`' order
(``tests/node/test_write_proposal.py`` pins that they follow it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.node.base.validation import TableSchema
    from gateway.node.loop.write_future import WriteFuture
    from gateway.v1 import statement_pb2, transaction_pb2

__all__ = ["FIELDS", "WriteProposal"]

#: The API's fields, in the constructor's positional order.
FIELDS = ("statements", "idempotency_key", "start_ns", "created", "raw", "wire", "unrecorded",
          "admin", "conditions")


class WriteProposal:
    """A client write to propose (built by ``api.py``, ``conflict_rows.py`` or a test).

    ``statements``: the write's statements (a repeated ``Statement``: a protobuf container or
    a list).

    ``idempotency_key``: the client's key ('' for none): a retry of an applied write with the
    same key is answered with the first one's result, marked ``duplicate``.

    ``start_ns``: when the client's request arrived (``time.time_ns()``; 0: when submitted,
    which ``submit_write`` sets). The transaction's ``start_timestamp_ns`` (never after its
    commit timestamp).

    ``created``: set when the caller already validated ``statements`` (``WireChecker.check``
    against ``RaftDriver.known_schemas``): the schemas they create, which the driver only
    records instead of validating again. None: the driver validates before proposing. Every
    replica validates the entry again when applying it, so a write that raced a schema change
    is still rejected everywhere.

    ``raw``: ``frame_statements(statements)`` when the caller has it (the entry is built from
    these bytes); None: the driver serializes the statements once.

    ``wire``: the future may resolve with the serialized ``WriteResult`` (bytes) when the
    applied entry has those bytes (every write applied by the fast path), else with the
    message -- as it always does for a duplicate of an idempotency key -- so that a response
    can carry the bytes without parsing them back into a message.

    ``unrecorded``: the caller found, in this same step of the loop, that the store holds no
    record for ``idempotency_key`` (``StoreStateMachine.unrecorded``, one probe for a
    request's writes), so it is not looked up again. That lookup only answers retries of
    applied writes without proposing them; applying the entry decides duplicates.

    ``admin``: the caller holds the ``admin`` permission (it may delete ``$EX`` rows).

    ``conditions``: the write's conditions (a repeated ``Condition``,
    ``gateway.node.state.conditions``); None for a plain write, which keeps the plain path.
    Checked before proposing (``InvalidRequest``) and logged in the entry; every replica
    evaluates them when applying it (``PreconditionFailed``: refused, nothing applied).

    ``future``: set by ``RaftDriver.submit_write`` when it queues the write (None before):
    what its caller awaits. A proposal is queued once; submitting it again queues a copy.
    """

    __slots__ = (*FIELDS, "future")

    statements: Sequence[statement_pb2.Statement]
    idempotency_key: str
    start_ns: int
    created: list[tuple[str, TableSchema]] | None
    raw: bytes | None
    wire: bool
    unrecorded: bool
    admin: bool
    conditions: Sequence[transaction_pb2.Condition] | None
    future: WriteFuture | None

    def __init__(self, statements: Sequence[statement_pb2.Statement], idempotency_key: str = "",
                 start_ns: int = 0, created: list[tuple[str, TableSchema]] | None = None,
                 raw: bytes | None = None, wire: bool = False, unrecorded: bool = False,
                 admin: bool = False,
                 conditions: Sequence[transaction_pb2.Condition] | None = None) -> None:
        self.statements = statements
        self.idempotency_key = idempotency_key
        self.start_ns = start_ns
        self.created = created
        self.raw = raw
        self.wire = wire
        self.unrecorded = unrecorded
        self.admin = admin
        self.conditions = conditions
        self.future = None

    def copy(self) -> WriteProposal:
        """The same API fields, not queued (``future`` None)."""
        return WriteProposal(*(getattr(self, f) for f in FIELDS))

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in FIELDS)
        return f"WriteProposal({fields})"
