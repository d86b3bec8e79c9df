"""Epochs above 2^53 reach Prometheus exactly, as ``<name>_hi`` / ``<name>_lo`` gauges (a
sample is a float64, exact for integers up to 2^53 only)."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from gateway.node.api.metrics import _channel_metrics
from gateway.v1 import gateway_pb2

BIG = (3_000_000 << 32) | 7  # above 2^53, odd: its float rounds it


class _Channels(Collector):
    def __init__(self, node) -> None:
        self.node = node

    def collect(self):
        yield from _channel_metrics(self.node)


def _scrape() -> dict[str, str]:
    ch = gateway_pb2.ChannelStatus(name="fromB", applied_epoch=BIG, state="running")
    ch.conflicts["last_conflict_epoch"] = BIG + 2
    ch.conflicts["refresh_op_count"] = 5
    peer = gateway_pb2.PeerStatus(cluster_id=2, max_replicated_epoch=BIG + 4)
    slot = gateway_pb2.SlotStatus(slot={"reader_cluster_id": 2, "channel": "fromA",
                                        "acked_epoch": BIG + 6})
    node = SimpleNamespace(
        driver=SimpleNamespace(is_leader=True),  # the live channel figures are the leader's
        channels=SimpleNamespace(status=lambda: [ch], peers=lambda: [peer]),
        retention=lambda: (gateway_pb2.LogRetention(first_index=1, first_epoch=BIG + 8),
                           [slot]))
    reg = CollectorRegistry()
    reg.register(_Channels(node))
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = value
    return out


def _exact(m: dict[str, str], name: str) -> int:
    hi, lo = m[name.replace("{", "_hi{", 1)], m[name.replace("{", "_lo{", 1)]
    assert float(hi).is_integer() and float(lo).is_integer()
    return int(float(hi)) * (1 << 32) + int(float(lo))


def test_epochs_above_2_to_the_53_are_exported_exactly_as_32_bit_halves():
    m = _scrape()
    assert float(m['gateway_channel_applied_epoch{channel="fromB"}']) != BIG  # the loss
    assert _exact(m, 'gateway_channel_applied_epoch{channel="fromB"}') == BIG
    assert _exact(m, 'gateway_conflict_epoch{channel="fromB",counter="last_conflict_epoch"}') \
        == BIG + 2
    assert not any("refresh_op_count" in k and k.startswith("gateway_conflict_epoch")
                   for k in m)
    assert _exact(m, 'gateway_max_replicated_epoch{peer="2"}') == BIG + 4
    assert _exact(m, 'gateway_channel_slot_acked_epoch{channel="fromA",reader="2"}') == BIG + 6
    assert int(float(m["gateway_log_retained_first_epoch_hi"])) << 32 | \
        int(float(m["gateway_log_retained_first_epoch_lo"])) == BIG + 8
