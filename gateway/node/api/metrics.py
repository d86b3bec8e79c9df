"""Prometheus metrics and structured logs of a node.

Metrics are read from the node when scraped (a custom collector), so the write path pays
nothing for them. Served at ``http://METRICS/metrics`` when ``--metrics HOST:PORT`` is set:

==================================  ======  ===========================================
``gateway_raft_term``               gauge   current term
``gateway_raft_is_leader``          gauge   1 on the leader
``gateway_raft_leader_id``          gauge   known leader (0 = none)
``gateway_raft_commit_index``       gauge   commit index
``gateway_raft_applied_index``      gauge   store applied index
``gateway_raft_last_index``         gauge   last log index
``gateway_gtid_last_trans_id``      gauge   last applied GTID trans id
``gateway_applier_lag_entries``     gauge   per applier (label ``applier``)
``gateway_applier_lag_seconds``     gauge   per applier: age of the oldest committed entry
                                            not applied (0 when caught up)
``gateway_applier_position``        gauge   per applier durable watermark
``gateway_applier_dead_letters``    gauge   per applier dead letters so far
``gateway_applier_unavailable``     gauge   per applier: 1 while it runs but its store is
                                            unreachable (it retries until the store returns)
``gateway_applier_running``         gauge   1 if the applier runs on this node (labels
                                            ``applier``, ``scope``: a cluster-scoped one
                                            runs on the leader only)
``gateway_applier_replicated_position``  gauge  per cluster-scoped applier: the position
                                            recorded in the Raft log
``gateway_channel_applied_epoch``   gauge   per channel (label ``channel``): newest source
                                            epoch this cluster holds whole
``gateway_channel_lag_epochs``      gauge   per channel: the source's newest sealed epoch
                                            - the applied one (a count; on the leader only)
``gateway_channel_lag_seconds``     gauge   per channel: now - seal time of the oldest
                                            source epoch not applied; grows while paused,
                                            in error or disconnected (on the leader only)
``gateway_channel_lag_since_last_heard``  gauge  per channel: 1 when the lag is grown from
                                            the last time the source was heard from
``gateway_channel_last_heard_age_seconds``  gauge  per channel: since the source was last
                                            heard from (on the leader only)
``gateway_channel_replicated_time_seconds``  gauge  per channel: the source commit time
                                            (Unix s) up to which this cluster holds all
                                            (durable, every node)
``gateway_channel_up``              gauge   per channel: 1 while its runner streams from
                                            the source (on the leader)
``gateway_channel_transactions``    counter per channel: origin transactions applied by
                                            this node's runner
``gateway_max_replicated_epoch``    gauge   per peer cluster (label ``peer``): newest
                                            epoch of this cluster the peer applied
``gateway_log_retained_first_index``  gauge  the oldest log index this node holds (label
                                            ``held_by``: what holds the next compaction
                                            back: ``slot CLUSTER/CHANNEL``, ``applier``,
                                            ``snapshot``)
``gateway_log_retained_first_epoch``  gauge  the oldest epoch a reader can resume after
``gateway_channel_slot_acked_epoch``  gauge  per slot of another cluster's channel reading
                                            this log (labels ``reader``, ``channel``)
``gateway_channel_slot_held_entries``  gauge  per slot: log entries kept from its position
``gateway_channel_slot_held_bytes``   gauge  per slot: their bytes in the log files
``gateway_channel_slot_lost``       gauge   per slot: 1 once the log was compacted past it
                                            (its reader must resync)
==================================  ======  ===========================================

Every ``..._epoch`` gauge above (and ``gateway_conflict``'s ``last_conflict_epoch`` /
``last_stable_epoch`` counters, as ``gateway_conflict_epoch{channel, counter}``) is a float and
loses precision above 2^53: each also comes exactly as ``<name>_hi`` / ``<name>_lo``, its
upper and lower 32 bits (``epoch_metrics``).

Logs: one JSON object per line on stderr (``ts``, ``level``, ``logger``, ``msg``, plus
``exc`` for exceptions) with ``log_format = "json"`` (the default), plain text otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.node.api.epoch_metrics import EpochGauges
from gateway.node.base.config import parse_address

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode

__all__ = ["JsonFormatter", "NodeCollector", "configure_logging", "serve_metrics"]


class NodeCollector(Collector):
    """Reads a node's state at scrape time."""

    def __init__(self, node: ServedNode) -> None:
        self._node = node

    def collect(self) -> Iterator[Metric]:
        n = self._node
        r = n.driver.raw.raft
        for name, doc, value in (
            ("gateway_raft_term", "current Raft term", r.term),
            ("gateway_raft_is_leader", "1 if this node leads", int(n.driver.is_leader)),
            ("gateway_raft_leader_id", "known leader id (0 = none)", r.lead),
            ("gateway_raft_commit_index", "commit index", r.raft_log.committed),
            ("gateway_raft_applied_index", "store applied index", n.sm.applied_index),
            ("gateway_raft_last_index", "last log index", r.raft_log.last_index()),
            ("gateway_gtid_last_trans_id", "last applied GTID trans id", n.sm.last_trans_id),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        lag = GaugeMetricFamily("gateway_applier_lag_entries", "entries not yet applied",
                                labels=["applier"])
        lag_s = GaugeMetricFamily("gateway_applier_lag_seconds",
                                  "age of the oldest committed entry not yet applied by the "
                                  "applier (0 when caught up)", labels=["applier"])
        pos = GaugeMetricFamily("gateway_applier_position", "applier watermark",
                                labels=["applier"])
        dead = GaugeMetricFamily("gateway_applier_dead_letters", "dead letters",
                                 labels=["applier"])
        running = GaugeMetricFamily("gateway_applier_running",
                                    "1 if the applier runs on this node",
                                    labels=["applier", "scope"])
        replicated = GaugeMetricFamily("gateway_applier_replicated_position",
                                       "position of a cluster-scoped applier in the Raft log",
                                       labels=["applier"])
        down = GaugeMetricFamily("gateway_applier_unavailable",
                                 "1 while the applier runs here but cannot reach its store "
                                 "(it retries; Status says why)", labels=["applier"])
        backfill = GaugeMetricFamily("gateway_applier_backfill_rows",
                                     "rows a new applier's backfill from the store delivered "
                                     "so far (docs/appliers.md)", labels=["applier", "state"])
        for a in n.applier_status():
            if a.backfill_state:
                backfill.add_metric([a.name, a.backfill_state], a.backfill_rows)
            down.add_metric([a.name], int(a.running and bool(a.error)))
            lag.add_metric([a.name], a.lag_entries)
            lag_s.add_metric([a.name], a.lag_seconds)
            pos.add_metric([a.name], a.position)
            dead.add_metric([a.name], a.dead_letters)
            running.add_metric([a.name, a.scope], int(a.running))
            if a.scope == "cluster":
                replicated.add_metric([a.name], a.replicated_position)
        yield lag
        yield lag_s
        yield pos
        yield dead
        yield running
        yield replicated
        yield down
        yield backfill
        streams = GaugeMetricFamily("gateway_peer_stream_up",
                                    "1 while the stream to the peer is up, by kind (framed "
                                    "TCP, or gRPC to an older node)", labels=["peer", "kind"])
        for peer, kind in sorted(n.transport.streams().items()):
            for k in ("framed", "grpc"):
                streams.add_metric([str(peer), k], int(kind == k))
        yield streams
        yield from _channel_metrics(n)
        c = n.driver.counters
        for name, doc, value in (
            ("gateway_raft_ready", "Ready cycles run", c.readies),
            ("gateway_raft_synced_ready", "Ready cycles persisted to the WAL", c.synced_readies),
            ("gateway_raft_entries_persisted", "log entries persisted", c.entries_persisted),
            ("gateway_raft_entries_applied", "committed entries applied", c.entries_applied),
            ("gateway_raft_messages_sent", "Raft messages handed to the transport",
             c.messages_sent),
            ("gateway_raft_messages_received", "Raft messages received from peers",
             c.messages_received),
            ("gateway_writes_proposed", "writes proposed by this node as leader",
             c.writes_proposed),
            ("gateway_peer_batches_sent", "peer stream writes (batches of Raft messages)",
             n.transport.batches_sent),
        ):
            yield CounterMetricFamily(name, doc, value=value)


def _channel_metrics(n: ServedNode) -> Iterator[Metric]:
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
        "applied": GaugeMetricFamily("gateway_channel_applied_epoch",
                                     "newest source epoch held whole", labels=["channel"]),
        "lag_e": GaugeMetricFamily("gateway_channel_lag_epochs",
                                   "source epochs sealed, not yet applied here (a count)",
                                   labels=["channel"]),
        "lag_s": GaugeMetricFamily("gateway_channel_lag_seconds",
                                   "now - seal time of the oldest source epoch not applied "
                                   "here, growing while the source is not heard from",
                                   labels=["channel"]),
        "heard": GaugeMetricFamily("gateway_channel_last_heard_age_seconds",
                                   "seconds since the source was last heard from",
                                   labels=["channel"]),
        "stale": GaugeMetricFamily("gateway_channel_lag_since_last_heard",
                                   "1 when the lag is grown from the last time the source "
                                   "was heard from (paused, error, disconnected)",
                                   labels=["channel"]),
        "rtime": GaugeMetricFamily("gateway_channel_replicated_time_seconds",
                                   "source commit time (Unix seconds) up to which this "
                                   "cluster holds everything", labels=["channel"]),
        "up": GaugeMetricFamily("gateway_channel_up", "1 while the runner streams",
                                labels=["channel"]),
        "txns": CounterMetricFamily("gateway_channel_transactions",
                                    "origin transactions applied by this node's runner",
                                    labels=["channel"]),
    }
    now = time.time_ns()
    leads = n.driver.is_leader
    applied_exact = EpochGauges("gateway_channel_applied_epoch", "newest source epoch held "
                                "whole", ["channel"])
    # One read for every family below: it builds each channel's figures, the lag's included.
    chans = n.channels.status()
    for ch in chans:
        applied_exact.add([ch.name], ch.applied_epoch)
        families["applied"].add_metric([ch.name], ch.applied_epoch)
        if ch.replicated_time_ns:
            families["rtime"].add_metric([ch.name], ch.replicated_time_ns / 1e9)
        if leads:  # the live figures are the leader's: a follower exports none, not a 0
            families["lag_e"].add_metric([ch.name], ch.lag_epochs)
            families["lag_s"].add_metric([ch.name], ch.lag_seconds)
            families["stale"].add_metric([ch.name], int(ch.since_last_heard))
            if ch.last_heard_ns:
                families["heard"].add_metric([ch.name], max(0.0, (now - ch.last_heard_ns)
                                                             / 1e9))
        families["up"].add_metric([ch.name], int(ch.state == "running"))
        families["txns"].add_metric([ch.name], ch.transactions_applied)
    yield from families.values()
    yield from applied_exact
    conflicts = GaugeMetricFamily("gateway_conflict", "conflict handling counters (MySQL's "
                                  "names) of what a channel brought in",
                                  labels=["channel", "counter"])
    conflict_epochs = EpochGauges("gateway_conflict_epoch", "the conflict counters that are "
                                  "epochs", ["channel", "counter"])
    for ch in chans:
        for name, value in sorted(ch.conflicts.items()):
            conflicts.add_metric([ch.name, name], value)
            if name.endswith("_epoch"):
                conflict_epochs.add([ch.name, name], value)
    yield conflicts
    yield from conflict_epochs
    yield from _retention_metrics(n)
    peers = GaugeMetricFamily("gateway_max_replicated_epoch",
                              "newest epoch of this cluster the peer applied", labels=["peer"])
    peers_exact = EpochGauges("gateway_max_replicated_epoch", "newest epoch of this cluster "
                              "the peer applied", ["peer"])
    for p in n.channels.peers():
        peers.add_metric([str(p.cluster_id)], p.max_replicated_epoch)
        peers_exact.add([str(p.cluster_id)], p.max_replicated_epoch)
    yield peers
    yield from peers_exact


def _retention_metrics(n: ServedNode) -> Iterator[Metric]:
    """The retained log span, what holds it, and the slots of readers of this log."""
    ret, slots = n.retention()
    first = GaugeMetricFamily("gateway_log_retained_first_index", "oldest log index held",
                              labels=["held_by"])
    first.add_metric([ret.held_by], ret.first_index)
    yield first
    yield GaugeMetricFamily("gateway_log_retained_first_epoch",
                            "oldest epoch a reader can resume after", value=ret.first_epoch)
    first_exact = EpochGauges("gateway_log_retained_first_epoch",
                              "oldest epoch a reader can resume after")
    first_exact.add([], ret.first_epoch)
    yield from first_exact
    labels = ["reader", "channel"]
    fams = [GaugeMetricFamily("gateway_channel_slot_acked_epoch",
                              "newest epoch of this cluster the reader holds", labels=labels),
            GaugeMetricFamily("gateway_channel_slot_held_entries",
                              "log entries kept from the slot's position", labels=labels),
            GaugeMetricFamily("gateway_channel_slot_held_bytes",
                              "bytes of log kept from the slot's position", labels=labels),
            GaugeMetricFamily("gateway_channel_slot_lost",
                              "1 once the log was compacted past the slot", labels=labels)]
    acked_exact = EpochGauges("gateway_channel_slot_acked_epoch", "newest epoch of this "
                              "cluster the reader holds", labels)
    for st in slots:
        key = [str(st.slot.reader_cluster_id), st.slot.channel]
        acked_exact.add(key, st.slot.acked_epoch)
        for fam, value in zip(fams, (st.slot.acked_epoch, st.held_entries, st.held_bytes,
                                     int(st.slot.lost)), strict=True):
            fam.add_metric(key, value)
    yield from fams
    yield from acked_exact


def serve_metrics(node: ServedNode, address: str) -> NodeCollector:
    """Register the node's collector and serve ``/metrics`` on ``address`` (a thread)."""
    host, port = parse_address(address, "metrics")
    collector = NodeCollector(node)
    REGISTRY.register(collector)
    start_http_server(port, addr=host)
    return collector


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
               + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        node = getattr(record, "node_id", None)
        if node is not None:
            doc["node"] = node
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def configure_logging(level: str, fmt: str) -> None:
    """Send the ``gateway`` loggers to stderr in ``fmt`` (json | text) at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("gateway")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
