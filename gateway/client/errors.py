"""The client's error: every failed call raises `GatewayError` (gRPC status code, details and
the request field a validation error names), `PreconditionFailed` for a conditional write
that was refused; ``error_of`` builds them from a gRPC error."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import cast

import grpc

from gateway.client.values import FieldValue
from gateway.v1 import gateway_pb2, transaction_pb2, value_pb2

__all__ = ["GatewayError", "PreconditionFailed", "error_of"]


class GatewayError(Exception):
    """A call failed; ``code`` is the gRPC status code, ``field`` the request field a
    validation error names (or ""), ``leader_api`` where the leader is if the node said
    (or "")."""

    def __init__(self, code: grpc.StatusCode, details: str, field: str = "") -> None:
        self.code = code
        self.details = details
        self.field = field
        self.leader_api = ""
        super().__init__(f"{code.name}: {details}")


class PreconditionFailed(GatewayError):
    """A conditional write was refused: one of its conditions did not hold when it was
    applied (FAILED_PRECONDITION); nothing of the write was applied. ``field`` names the
    condition (``conditions[i]``), ``condition_index`` is ``i``, and when the client knows
    the conditions it sent, ``condition`` is that message and ``table`` / ``key`` (Python
    values) name its row. In a ``write_batch``, ``index`` is the refused write's position and
    ``results`` holds every write's ``WriteResult`` (None where refused), ``errors`` every
    refusal of the batch."""

    def __init__(self, details: str, field: str = "") -> None:
        super().__init__(grpc.StatusCode.FAILED_PRECONDITION, details, field)
        self.condition_index: int | None = None
        if field.startswith("conditions[") and field.endswith("]"):
            with contextlib.suppress(ValueError):
                self.condition_index = int(field[len("conditions["):-1])
        self.condition: transaction_pb2.Condition | None = None
        self.table = ""
        self.key: list[FieldValue] = []
        self.index: int | None = None
        self.results: list[gateway_pb2.WriteResult | None] = []
        self.errors: list[PreconditionFailed] = []

    def resolve(self, conditions: Sequence[transaction_pb2.Condition]) -> PreconditionFailed:
        """Fill ``condition``, ``table`` and ``key`` from the conditions the write carried."""
        i = self.condition_index
        if i is not None and 0 <= i < len(conditions):
            self.condition = conditions[i]
            self.table = conditions[i].table
            self.key = [_python(v) for v in conditions[i].key]
        return self


def _python(v: value_pb2.Value) -> FieldValue:
    case = v.WhichOneof("kind")
    value: FieldValue = None if case is None or case == "null_value" else getattr(v, case)
    return value


def error_of(exc: grpc.RpcError) -> GatewayError:
    """The `GatewayError` of a failed call (``leader_api``: where the leader is, if the
    node said)."""
    field = ""
    leader = ""
    # Plain (key, value) pairs at run time, whatever the stubs say of their type; the keys
    # read here are text keys, whose values are str.
    trailing = cast("Sequence[tuple[str, str]]", exc.trailing_metadata() or ())
    for k, v in trailing:
        if k == "gateway-field":
            field = v
        elif k == "gateway-leader-api":
            leader = v
    code = exc.code()
    err = PreconditionFailed(exc.details() or "", field) \
        if code == grpc.StatusCode.FAILED_PRECONDITION else \
        GatewayError(code, exc.details() or "", field)
    err.leader_api = leader
    return err
