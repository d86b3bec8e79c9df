"""``WriteFuture``: what the caller of ``RaftDriver.submit_write`` awaits, named in one module
so that ``write_proposal`` (pure: no asyncio) can name it in its types only."""

from __future__ import annotations

import asyncio
from typing import TypeAlias

from gateway.v1 import gateway_pb2

__all__ = ["WriteFuture"]

#: Resolves with the write's ``WriteResult``, or its serialized bytes (``WriteProposal.wire``).
WriteFuture: TypeAlias = asyncio.Future[gateway_pb2.WriteResult | bytes]
