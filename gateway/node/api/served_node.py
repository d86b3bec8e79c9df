"""``ServedNode``: what the API room needs of the node it serves.

The servicer (``api``), the admin operations (``admin``) and the metrics exporter
(``metrics``) take the running node as a :class:`ServedNode`, a Protocol that
``gateway.node.server.GatewayNode`` satisfies structurally; so the API room never imports the
composition root that builds it (not even for types), and the node's rooms form layers with no
cycle (``tests/test_architecture.py``). Every member is one the node's start sets before the
API serves; the types name the lower rooms' classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.node.api.security import Tokens
    from gateway.node.appliers.applier_host import NodeAppliers
    from gateway.node.appliers.feed import ChangeFeed
    from gateway.node.base.config import NodeConfig
    from gateway.node.loop.driver import RaftDriver
    from gateway.node.peers.transport import PeerTransport
    from gateway.node.replication.channel_source import ChannelSource
    from gateway.node.replication.channels import NodeChannels
    from gateway.node.replication.conflicts import NodeConflicts
    from gateway.node.state.alarms import SpaceMonitor
    from gateway.node.state.state_machine import StoreStateMachine
    from gateway.node.storage.storage import RaftLogStorage
    from gateway.v1 import gateway_pb2

__all__ = ["ServedNode"]


class ServedNode(Protocol):
    """The running node as its API sees it (module docstring)."""

    config: NodeConfig
    driver: RaftDriver
    sm: StoreStateMachine
    storage: RaftLogStorage
    transport: PeerTransport
    change_feed: ChangeFeed
    channels: NodeChannels
    conflicts: NodeConflicts
    #: The appliers this node hosts (None: none configured); their dead letters.
    appliers: NodeAppliers | None
    #: The source side of the channel protocol (``ChannelSource.Stream``).
    channel_source: ChannelSource
    #: The NOSPACE alarm's check of this node's log disk (``state.alarms``).
    space: SpaceMonitor
    #: The bearer tokens; None: every call is allowed.
    tokens: Tokens | None

    def election_timeout_s(self) -> float:
        """The election timeout, in seconds."""
        ...

    def leader_metadata(self) -> tuple[tuple[str, str], ...]:
        """The trailing metadata naming the leader (``gateway-leader-id``, ``-api``)."""
        ...

    def applier_status(self) -> list[gateway_pb2.ApplierStatus]:
        """The status of every applier this node hosts."""
        ...

    def retention(self) -> tuple[gateway_pb2.LogRetention, list[gateway_pb2.SlotStatus]]:
        """This node's retained log span, what holds it, and the slots of its readers."""
        ...
