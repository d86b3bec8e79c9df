"""The JSON documents of ``/api/v1/...``, built from a :class:`~.poller.Snapshot`.

Contract: channel and applier objects carry every field of the node's ``ChannelStatus`` /
``ApplierStatus`` under the names and in the encoding of ``gateway status --format json``
(protobuf's JSON mapping: 64-bit integers as decimal strings, so epochs stay exact in
JavaScript), plus the console's own fields (``cluster_id``, ``direction``, ...). A figure on
the page is therefore the CLI's figure at the same poll, character for character.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from gateway.v1 import gateway_pb2

from .poller import ClusterView, Sample, Snapshot

JSON = dict[str, Any]


def as_json(msg: Message) -> JSON:
    """``msg`` as ``gateway status --format json`` prints it."""
    return json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def _nodes(v: ClusterView) -> list[JSON]:
    st = v.status
    if st is None:
        return []
    out = []
    for m in st.members:
        role = "leader" if m.node_id == st.leader_id else (
            "learner" if m.role == "learner" else "follower")
        out.append({"node_id": str(m.node_id), "api_address": m.api_address,
                    "peer_address": m.peer_address, "role": role, "member": m.role,
                    "match_index": str(m.match_index)})
    return out


def _cluster(v: ClusterView) -> JSON:
    st = v.status
    doc: JSON = {"cluster_id": v.cluster_id, "reached": v.reached, "error": v.error,
                 "polled_at": v.polled_at, "addresses": v.addresses, "nodes": _nodes(v)}
    if st is not None:
        doc.update({"leader_id": str(st.leader_id), "leader_api": st.leader_api,
                    "answered_by": {"node_id": str(st.node_id), "role": st.role},
                    "term": str(st.term), "epoch": str(st.epoch),
                    "commit_index": str(st.commit_index), "conflict_role":
                    st.conflict_role or "NONE",
                    "alarms": [as_json(a) for a in st.alarms],
                    "tables": [as_json(t) for t in st.tables]})
        if st.role != "leader":
            doc["error"] = doc["error"] or (
                f"no leader answered: figures are node {st.node_id}'s ({st.role}); the "
                f"channels run on the leader")
    return doc


def channels(snap: Snapshot) -> list[JSON]:
    """Every channel of every cluster, replica cluster then name."""
    out = []
    for cid, v in sorted(snap.clusters.items()):
        if v.status is None:
            continue
        for ch in v.status.channels:
            doc = as_json(ch)
            doc.update({"cluster_id": cid, "replica_id": cid,
                        "direction": f"{ch.source_id or '?'} -> {cid}",
                        "on_leader": v.status.role == "leader"})
            out.append(doc)
    out.sort(key=lambda d: (d["cluster_id"], d["name"]))
    return out


def topology(snap: Snapshot) -> JSON:
    return {"taken_at": snap.taken_at, "interval": snap.interval,
            "clusters": [_cluster(v) for _, v in sorted(snap.clusters.items())],
            "channels": channels(snap),
            "unreachable": [{"address": a, "error": e}
                            for a, e in sorted(snap.unreachable.items())]}


def _sample(s: Sample) -> JSON:
    return {"t": s.t, "applied_epoch": str(s.applied_epoch),
            "transactions_applied": str(s.transactions_applied),
            "lag_epochs": str(s.lag_epochs), "lag_seconds": s.lag_seconds,
            "replicated_time_ns": None if s.replicated_time_ns is None
            else str(s.replicated_time_ns),
            "throughput": s.throughput}


def history(snap: Snapshot, cluster_id: int, name: str) -> JSON | None:
    """The samples of channel ``name`` of cluster ``cluster_id``, oldest first (None: no
    such channel seen)."""
    samples = snap.histories.get((cluster_id, name))
    if samples is None:
        return None
    return {"cluster_id": cluster_id, "name": name, "interval": snap.interval,
            "samples": [_sample(s) for s in samples]}


def appliers(snap: Snapshot) -> JSON:
    """Per cluster: its leader's appliers (lag, dead letters on the leader, errors)."""
    out = []
    for cid, v in sorted(snap.clusters.items()):
        st = v.status
        dl = v.dead_letters
        out.append({"cluster_id": cid, "node_id": str(st.node_id) if st else "",
                    "node_api": v.reached, "error": v.error,
                    "appliers": [as_json(a) for a in st.appliers] if st else [],
                    "dead_letter_counts": [as_json(c) for c in dl.counts] if dl else [],
                    "dead_letters": [dead_letter(d) for d in dl.letters] if dl else [],
                    "dead_letters_error": v.dead_letters_error})
    return {"clusters": out}


def dead_letter(d: gateway_pb2.DeadLetterInfo) -> JSON:
    """One dead letter without its stored bytes (``letter``): the page shows the rest."""
    doc = as_json(d)
    doc.pop("letter", None)
    return doc
