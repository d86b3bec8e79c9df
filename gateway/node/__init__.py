"""The gateway node: the asyncio shell that runs the Raft core over the WAL, the LSM store and
the appliers, and serves the public gRPC API. See docs/node.md.

Rooms, one subsystem each (sub-packages, layered bottom up; docs/architecture.md, "The node's
rooms"): ``base`` (errors, configuration, request checks), ``storage`` (Raft storage over the
WAL, snapshot files), ``state`` (the state machine and what it applies, store keys, the wire
paths), ``loop`` (the Ready loop: driver, sequencer), ``peers`` (peer gRPC streams),
``replication`` (channels, conflict rules), ``appliers`` (appliers' entry source and
Subscribe, the applier host), ``api`` (the public service, TLS and tokens, metrics). Here:
``server`` (``GatewayNode``: everything started together). Errors are in ``base.errors`` (tree
there) and ``base.validation.InvalidRequest``.
"""

from __future__ import annotations

from gateway.node.base.config import ConfigError, NodeConfig, TlsConfig, load_config
from gateway.node.base.errors import (
    NodeError,
    NodeStoppedError,
    NotLeaderError,
    ProposalLostError,
    ReadTimeoutError,
)
from gateway.node.base.validation import InvalidRequest
from gateway.node.server import GatewayNode, NodeStartError

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
