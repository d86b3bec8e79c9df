"""The client's error: every failed call raises `GatewayError` (gRPC status code, details and
the request field a validation error names); ``error_of`` builds it from a gRPC error."""

from __future__ import annotations

import grpc

__all__ = ["GatewayError", "error_of"]


class GatewayError(Exception):
    """A call failed; ``code`` is the gRPC status code, ``field`` the request field a
    validation error names (or "")."""

    def __init__(self, code: grpc.StatusCode, details: str, field: str = "") -> None:
        self.code = code
        self.details = details
        self.field = field
        super().__init__(f"{code.name}: {details}")


def error_of(exc: grpc.RpcError) -> GatewayError:
    """The `GatewayError` of a failed call (``leader_api``: where the leader is, if the
    node said)."""
    field = ""
    leader = ""
    for k, v in (exc.trailing_metadata() or ()):  # type: ignore[attr-defined]
        if k == "gateway-field":
            field = v
        elif k == "gateway-leader-api":
            leader = v
    err = GatewayError(exc.code(), exc.details() or "", field)  # type: ignore[attr-defined]
    err.leader_api = leader  # type: ignore[attr-defined]
    return err
