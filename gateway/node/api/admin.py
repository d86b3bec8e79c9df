"""The node's admin operations, as the API's admin methods run them on the leader: ``Status``
(this node's view), ``AddNode`` (learner, catch up, voter), ``RemoveNode``, ``TransferLeader``.
Each takes the node it runs on (a :class:`ServedNode`); ``GatewayNode`` offers them as its
methods too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gateway.node.api.applier_schema import fill_applier_schema
from gateway.node.base.config import address_problem
from gateway.node.base.errors import NotLeaderError
from gateway.node.base.validation import InvalidRequest
from gateway.raft import ConfChange, ConfChangeSingle, ConfChangeType, Role
from gateway.v1 import gateway_pb2, schema_pb2

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode
    from gateway.node.state.schema_apply import TableState

__all__ = ["add_node", "remove_node", "status", "table_versions", "transfer_leader"]

_ROLE = {Role.LEADER: "leader", Role.FOLLOWER: "follower", Role.CANDIDATE: "candidate",
         Role.PRE_CANDIDATE: "pre-candidate"}


def table_versions(tables: Mapping[str, TableState]) -> list[schema_pb2.TableVersion]:
    """Each table's schema version (``schema_apply``), by name; ``implicit`` when no change
    but its first write defined it."""
    return [schema_pb2.TableVersion(table=name, version=st.version,
                                    dropped=st.definition is None, implicit=st.implicit)
            for name, st in sorted(tables.items())]


def status(node: ServedNode) -> gateway_pb2.StatusResponse:
    """The answer to ``Gateway.Status``: this node's view of the cluster, its appliers,
    channels, conflict rules and alarms."""
    drv = node.driver
    r = drv.raw.raft
    cfg = r.trk.config
    resp = gateway_pb2.StatusResponse(
        node_id=node.config.node_id, cluster_id=node.config.cluster_id,
        role="removed" if drv.removed else _ROLE.get(r.role, str(r.role)), term=r.term,
        leader_id=r.lead, commit_index=r.raft_log.committed,
        applied_index=node.sm.applied_index, last_index=r.raft_log.last_index(),
        first_index=node.storage.first_index(), last_trans_id=node.sm.last_trans_id,
        epoch=drv.epoch(), sealed_epoch=node.sm.newest_sealed[0],
        sealed_at_ns=node.sm.newest_sealed[1])
    resp.leader_api = dict(node.leader_metadata()).get("gateway-leader-api", "")
    prs = r.trk.progress if r.role == Role.LEADER else {}
    for nid in sorted(cfg.all_voters() | cfg.learners | cfg.learners_next):
        role = "learner" if nid in cfg.learners or nid in cfg.learners_next else "voter"
        api = node.config.api if nid == node.config.node_id else \
            node.transport.api_of.get(nid, "")
        peer = node.config.listen if nid == node.config.node_id else \
            node.transport.address_of.get(nid, "")
        pr = prs.get(nid)
        resp.members.add(node_id=nid, peer_address=peer, api_address=api, role=role,
                         match_index=pr.match if pr is not None else 0)
    resp.appliers.extend(node.applier_status())
    fill_applier_schema(resp.appliers, node.sm.store.scan_prefix, node.sm.tables)
    resp.channels.extend(node.channels.status())
    resp.peers.extend(node.channels.peers())
    resp.conflict_rules.extend(node.conflicts.rules())
    resp.conflict_role = node.conflicts.role()
    resp.alarms.extend(node.space.alarms())
    retention, slots = node.retention()
    resp.retention.CopyFrom(retention)
    resp.slots.extend(slots)
    resp.tables.extend(table_versions(node.sm.tables))
    return resp


async def add_node(node: ServedNode, node_id: int, peer: str, api: str, *, learner: bool,
                   timeout: float) -> gateway_pb2.AdminResponse:
    """Add ``node_id`` as a learner, wait until it caught up, then promote it. Everything
    is checked before anything is proposed (``InvalidRequest``): a node id from 1 to
    2^64-1, ``peer`` (and ``api`` when given) ``HOST:PORT`` with a port from 1 to 65535,
    and ``peer`` not the address of another member."""
    drv = node.driver
    cfg = drv.raw.raft.trk.config
    if not 0 < node_id < 1 << 64:
        raise InvalidRequest("node_id", "must be a positive integer")
    for field, address in (("peer_address", peer), ("api_address", api)):
        if not address and field == "api_address":
            continue
        reason = address_problem(address) if address else "missing HOST:PORT"
        if reason is not None:
            raise InvalidRequest(field, f"{address!r}: {reason}")
    members = cfg.all_voters() | cfg.learners | cfg.learners_next
    for other in sorted(members - {node_id}):
        known = node.config.listen if other == node.config.node_id else \
            node.transport.address_of.get(other)
        if known == peer:
            raise InvalidRequest("peer_address",
                                 f"{peer} is the peer address of member {other}")
    ctx = json.dumps({"peer": peer, "api": api}).encode()
    if node_id in cfg.voters:
        return gateway_pb2.AdminResponse(message=f"node {node_id} is already a voter")
    index = 0
    if node_id not in cfg.learners:
        index = await drv.propose_conf_change(ConfChange(
            (ConfChangeSingle(ConfChangeType.ADD_LEARNER_NODE, node_id),), context=ctx))
    if learner:
        return gateway_pb2.AdminResponse(message=f"node {node_id} added as a learner",
                                         log_index=index)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        r = drv.raw.raft
        if r.role != Role.LEADER:
            raise NotLeaderError(r.lead, "leadership changed while the node caught up")
        pr = r.trk.progress.get(node_id)
        if pr is not None and pr.match >= r.raft_log.committed:
            break
        if loop.time() > deadline:
            raise TimeoutError(f"node {node_id} did not catch up in time; it stays a "
                               f"learner (retry AddNode to promote it)")
        await asyncio.sleep(0.05)
    index = await drv.propose_conf_change(ConfChange(
        (ConfChangeSingle(ConfChangeType.ADD_NODE, node_id),), context=ctx))
    return gateway_pb2.AdminResponse(message=f"node {node_id} added as a voter",
                                     log_index=index)


async def remove_node(node: ServedNode, node_id: int) -> gateway_pb2.AdminResponse:
    """Remove ``node_id`` (voter or learner) from the configuration; a non-member is no
    error (the answer says so)."""
    cfg = node.driver.raw.raft.trk.config
    if node_id not in cfg.all_voters() | cfg.learners:
        return gateway_pb2.AdminResponse(message=f"node {node_id} is not a member")
    index = await node.driver.propose_conf_change(ConfChange(
        (ConfChangeSingle(ConfChangeType.REMOVE_NODE, node_id),)))
    return gateway_pb2.AdminResponse(message=f"node {node_id} removed", log_index=index)


async def transfer_leader(node: ServedNode, node_id: int, timeout: float
                          ) -> gateway_pb2.AdminResponse:
    """Move the leadership to the voter ``node_id``; returns once it leads, or raises
    ``TimeoutError`` after ``timeout`` (at most ten election timeouts)."""
    drv = node.driver
    if node_id == drv.leader_id:
        return gateway_pb2.AdminResponse(message=f"node {node_id} already leads")
    if node_id not in drv.raw.raft.trk.config.voters:
        raise InvalidRequest("node_id", f"node {node_id} is not a voter")
    drv.control(lambda raw: raw.transfer_leader(node_id))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(timeout, 10 * node.election_timeout_s())
    while drv.leader_id != node_id:
        if loop.time() > deadline:
            raise TimeoutError(f"leadership did not move to node {node_id} in time")
        await asyncio.sleep(0.02)
    return gateway_pb2.AdminResponse(message=f"node {node_id} leads now")
