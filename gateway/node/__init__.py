"""The gateway node: the asyncio shell that runs the Raft core over the WAL, the LSM store and
the appliers, and serves the public gRPC API. See docs/node.md.

Modules, one job each: ``config`` (configuration), ``storage`` (Raft storage over the WAL),
``snapshots`` (snapshot files and archives), ``keys`` (store key encoding), ``validation``
(request checks), ``state_machine`` (applying entries to the store), ``driver`` (the Ready
loop), ``transport`` (peer gRPC streams), ``api`` (the public service), ``feed`` (appliers'
entry source and Subscribe), ``security`` (TLS, tokens, test CA), ``metrics`` (Prometheus,
logs), ``sql`` (``gateway sql``), ``server`` (``GatewayNode``: everything started together).
Errors are in ``errors`` (tree there) and ``validation.InvalidRequest``.
"""

from __future__ import annotations

from gateway.node.config import ConfigError, NodeConfig, TlsConfig, load_config
from gateway.node.errors import (
    NodeError,
    NodeStoppedError,
    NotLeaderError,
    ProposalLostError,
    ReadTimeoutError,
)
from gateway.node.server import GatewayNode, NodeStartError
from gateway.node.validation import InvalidRequest

__all__ = [
    "ConfigError",
    "GatewayNode",
    "InvalidRequest",
    "NodeConfig",
    "NodeError",
    "NodeStartError",
    "NodeStoppedError",
    "NotLeaderError",
    "ProposalLostError",
    "ReadTimeoutError",
    "TlsConfig",
    "load_config",
]
