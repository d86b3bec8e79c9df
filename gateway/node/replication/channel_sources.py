"""Two channels of one cluster replicating from the same source cluster: each would apply
the source's transactions (the second finds them held and skips them, but both hold the
source's log in a slot and compete for it), almost always a mistake (a channel added twice
under two names, or a source's second address added as a second channel instead of as an
address of the first). A definition naming a ``source_id`` another channel has is refused
when added (``NodeChannels.add``); one without (its source id learned from the source) can
only be told after its source answered: a warning when added (the probe's answer) and on
the status of both channels, on every node (the definitions are replicated state).
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.v1 import replication_pb2

__all__ = ["shared_source_note", "shared_source_warning"]


def _others(defs: Mapping[str, replication_pb2.ChannelDefinition], name: str,
            source_id: int) -> list[str]:
    return sorted(n for n, d in defs.items()
                  if n != name and source_id and d.source_id == source_id)


def shared_source_warning(defs: Mapping[str, replication_pb2.ChannelDefinition],
                          name: str, source_id: int) -> str:
    """``warning: ...`` for channel ``name`` when another channel replicates from cluster
    ``source_id`` too, else ""."""
    others = _others(defs, name, source_id)
    if not others:
        return ""
    return (f"warning: channel(s) {', '.join(others)} also replicate from cluster "
            f"{source_id}: remove all but one (gateway channel remove NAME)")


def shared_source_note(defs: Mapping[str, replication_pb2.ChannelDefinition], name: str,
                       source_id: int) -> str:
    """What ``channel add`` appends to "channel NAME added" when its source (cluster
    ``source_id``, as it answered) is another channel's source too, else ""."""
    others = _others(defs, name, source_id)
    if not others:
        return ""
    return (f"; warning: channel(s) {', '.join(others)} already replicate from cluster "
            f"{source_id} (its source answers as that cluster): remove all but one")
