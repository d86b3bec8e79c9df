"""``CallContext``: the part of a gRPC call's context the API uses.

grpc.aio's ``ServicerContext[Request, Response]`` is generic (and invariant) in the call's
message types, so one helper cannot take the contexts of every method under that name. The
API's behaviours, helpers and interceptors take a :class:`CallContext` instead: a Protocol every
``ServicerContext`` satisfies (the gRPC server's own, and the ``Peer.Forward`` call's that a
forwarded request runs under), and a test's stand-in can too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol

if TYPE_CHECKING:
    import grpc

__all__ = ["CallContext", "Metadatum"]

#: One metadata entry: a key and its value (bytes for ``-bin`` keys).
Metadatum = tuple[str, str | bytes]


class CallContext(Protocol):
    """What the API calls on a call's context (module docstring)."""

    def invocation_metadata(self) -> Iterable[Metadatum] | None:
        """The metadata the caller sent (``authorization`` among it)."""
        ...

    def time_remaining(self) -> float | None:
        """Seconds until the caller's deadline; None without one."""
        ...

    def set_trailing_metadata(self, trailing_metadata: Sequence[Metadatum]) -> None:
        """The metadata the call ends with (``gateway-field``, ``gateway-leader-*``)."""
        ...

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        """End the call with ``code`` and ``details``; never returns (raises)."""
        ...
