"""Each applier's schema position for ``Gateway.Status`` (issue 57, docs/schema.md).

An applier has applied (or passed, under ``ignore``) exactly the schema events at or before
its position: the dispatcher delivers a schema event after every earlier transaction and
before any later one, and a ``stop`` applier halts with its position right before the
event. So each table's version for an applier is the version of the table's last applied
event at or before that position, read from the node's schema history (which records the
log index of every event). This holds across restarts and for a cluster-scoped applier not
running on this node (its replicated position), without the applier keeping any state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gateway.node.state.schema_apply import HistoryItem, read_history
from gateway.v1 import gateway_pb2, schema_pb2

__all__ = ["fill_applier_schema", "versions_at"]

ScanPrefix = Callable[[bytes], Iterable[tuple[bytes, bytes]]]


def versions_at(histories: dict[str, Sequence[HistoryItem]], position: int
                ) -> list[schema_pb2.TableVersion]:
    """Each table's version as of log index ``position`` (tables with no event at or before
    it are left out), by name. ``dropped`` when that event dropped the table; ``implicit``
    when every event up to it was a first write's shape."""
    out: list[schema_pb2.TableVersion] = []
    for name in sorted(histories):
        upto = [h for h in histories[name] if h.index <= position]
        if not upto:
            continue
        last = upto[-1].event
        out.append(schema_pb2.TableVersion(
            table=name, version=last.version, dropped=last.kind == "drop_table",
            implicit=all(h.event.implicit for h in upto)))
    return out


def fill_applier_schema(appliers: Iterable[gateway_pb2.ApplierStatus], scan_prefix: ScanPrefix,
                        tables: Iterable[str]) -> None:
    """Set every applier status's ``schema`` from the node's history of ``tables``, as of its
    ``position`` (its durable watermark; for a cluster-scoped applier not running here, the
    replicated one): a version shown is one the applier has passed for certain."""
    histories: dict[str, Sequence[HistoryItem]] = {}
    for name in tables:
        histories[name] = read_history(scan_prefix, name)
    for a in appliers:
        del a.schema[:]
        a.schema.extend(versions_at(histories, a.position))
