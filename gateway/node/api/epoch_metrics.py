"""Epochs in Prometheus, exactly: a sample is a float64, which holds integers exactly only up
to 2^53, and an epoch is a 64-bit number (this cluster's epochs are ``term << 32 | n``), so
the plain ``..._epoch`` gauges lose the low bits of a large epoch. Each of them therefore has
two companions, ``<name>_hi`` and ``<name>_lo``, the epoch's upper and lower 32 bits (each
exact): ``epoch = hi * 2^32 + lo`` (PromQL: ``x_hi * 4294967296 + x_lo`` is again a float;
compare the halves, or join them in the consumer). MySQL splits its epochs (GCIs) the same
way. docs/node.md, "Metrics".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily

__all__ = ["EpochGauges", "split_epoch"]

_LOW = (1 << 32) - 1


def split_epoch(epoch: int) -> tuple[int, int]:
    """``epoch``'s upper and lower 32 bits."""
    return epoch >> 32, epoch & _LOW


class EpochGauges:
    """The exact halves of one epoch gauge: ``<name>_hi`` and ``<name>_lo``."""

    def __init__(self, name: str, doc: str, labels: Sequence[str] = ()) -> None:
        self.hi = GaugeMetricFamily(f"{name}_hi", f"{doc} (upper 32 bits)", labels=labels)
        self.lo = GaugeMetricFamily(f"{name}_lo", f"{doc} (lower 32 bits)", labels=labels)

    def add(self, labels: Sequence[str], epoch: int) -> None:
        hi, lo = split_epoch(epoch)
        self.hi.add_metric(list(labels), hi)
        self.lo.add_metric(list(labels), lo)

    def __iter__(self) -> Iterator[GaugeMetricFamily]:
        yield self.hi
        yield self.lo
