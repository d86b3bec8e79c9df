"""The bytes of the peer stream's ``MessageBatch``, written from and read into the Raft core's
``Message`` and ``Entry`` objects.

The specification is protobuf (``encode_batch_py``, ``decode_batch_py``: ``transport.to_proto``
/ ``from_proto`` and the generated ``peer_pb2`` classes). Building a ``RaftMessage`` per message
and a ``RaftEntry`` per entry cost the leader CPU per entry per follower, and each follower per
entry to read back, on the path of every write (a one-row write is one entry; docs/benchmarks.md,
"Request, result and peer bytes in C"); the C twins in
``gateway.node._peer_codec`` (``encode_batch``, ``decode_batch``) write the same bytes and build the
same objects straight from the core's objects and the frame's bytes. They serve the common
messages and hand anything else to the specification -- a snapshot chunk, an unknown field, a
message type this version does not know, text that is not UTF-8, malformed bytes --, so the
result, and every error, are the specification's. ``GATEWAY_PURE_PYTHON=1`` (or no built
extension) leaves only the specification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

from gateway.core import accel
from gateway.core.frame import encode_frame
from gateway.raft import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    SnapshotChunk,
    SnapshotMetadata,
)
from gateway.v1 import peer_pb2
from gateway.v1 import wire_tags as W

__all__ = ["PeerBatch", "decode_batch", "decode_batch_py", "encode_batch", "encode_batch_py",
           "encode_frame_batch", "encode_frame_batch_py", "from_message_batch", "from_proto",
           "to_proto"]


def to_proto(m: Message) -> peer_pb2.RaftMessage:
    """The wire form of a Raft message."""
    pm = peer_pb2.RaftMessage(type=m.type, to=m.to, term=m.term, log_term=m.log_term,
                              index=m.index, commit=m.commit, reject=m.reject,
                              reject_hint=m.reject_hint, context=m.context, lease=m.lease)
    setattr(pm, "from", m.from_)
    if m.entries:
        add = pm.entries.add
        for e in m.entries:
            add(term=e.term, index=e.index, type=e.type, data=e.data)
    c = m.chunk
    if c is not None:
        cs = c.metadata.conf_state
        pm.chunk.CopyFrom(peer_pb2.RaftSnapshotChunk(
            conf_state=peer_pb2.RaftConfState(
                voters=cs.voters, learners=cs.learners, voters_outgoing=cs.voters_outgoing,
                learners_next=cs.learners_next, auto_leave=cs.auto_leave),
            index=c.metadata.index, term=c.metadata.term, offset=c.offset, total=c.total,
            data=c.data))
    return pm


def from_proto(pm: peer_pb2.RaftMessage) -> Message:
    """Inverse of :func:`to_proto`."""
    chunk = None
    if pm.HasField("chunk"):
        c = pm.chunk
        cs = c.conf_state
        meta = SnapshotMetadata(ConfState(tuple(cs.voters), tuple(cs.learners),
                                          tuple(cs.voters_outgoing), tuple(cs.learners_next),
                                          cs.auto_leave), c.index, c.term)
        chunk = SnapshotChunk(meta, c.offset, c.total, c.data)
    normal, conf = EntryType.NORMAL, EntryType.CONF_CHANGE
    return Message(
        MessageType(pm.type), pm.to, getattr(pm, "from"), pm.term, pm.log_term, pm.index,
        [Entry(e.term, e.index, conf if e.type else normal, e.data) for e in pm.entries],
        pm.commit, None, chunk, pm.reject, pm.reject_hint, pm.context, pm.lease)


@dataclass(slots=True)
class PeerBatch:
    """One received ``MessageBatch``: the sender's node id and addresses, its messages."""

    sender: int
    from_api: str
    from_peer: str
    messages: list[Message]


def encode_batch_py(sender: int, from_api: str, from_peer: str, messages: list[Message]
                    ) -> bytes:
    """``MessageBatch(from=sender, from_api, messages=[to_proto(m)...], from_peer)``
    serialized."""
    req = peer_pb2.MessageBatch(messages=[to_proto(m) for m in messages], from_api=from_api,
                                from_peer=from_peer)
    setattr(req, "from", sender)
    return req.SerializeToString()


def from_message_batch(batch: peer_pb2.MessageBatch) -> PeerBatch:
    """A parsed ``MessageBatch`` (the gRPC stream's) as a :class:`PeerBatch`."""
    return PeerBatch(getattr(batch, "from"), batch.from_api, batch.from_peer,
                     [from_proto(m) for m in batch.messages])


def decode_batch_py(data: bytes | memoryview) -> PeerBatch:
    """The serialized ``MessageBatch`` ``data`` read back; protobuf's ``DecodeError`` for bytes
    that are not one, ``ValueError`` for a message type this version does not know. ``data``
    may be a view of a receive buffer: nothing returned refers to it."""
    raw = data if type(data) is bytes else bytes(data)
    return from_message_batch(peer_pb2.MessageBatch.FromString(raw))


_KEYS = b"".join((
    W.RAFT_ENTRY_TERM_KEY, W.RAFT_ENTRY_INDEX_KEY, W.RAFT_ENTRY_TYPE_KEY, W.RAFT_ENTRY_DATA_KEY,
    W.RAFT_MESSAGE_TYPE_KEY, W.RAFT_MESSAGE_TO_KEY, W.RAFT_MESSAGE_FROM_KEY,
    W.RAFT_MESSAGE_TERM_KEY, W.RAFT_MESSAGE_LOG_TERM_KEY, W.RAFT_MESSAGE_INDEX_KEY,
    W.RAFT_MESSAGE_ENTRIES_KEY, W.RAFT_MESSAGE_COMMIT_KEY, W.RAFT_MESSAGE_CHUNK_KEY,
    W.RAFT_MESSAGE_REJECT_KEY, W.RAFT_MESSAGE_REJECT_HINT_KEY, W.RAFT_MESSAGE_CONTEXT_KEY,
    W.RAFT_MESSAGE_LEASE_KEY, W.MESSAGE_BATCH_FROM_KEY, W.MESSAGE_BATCH_FROM_API_KEY,
    W.MESSAGE_BATCH_MESSAGES_KEY, W.MESSAGE_BATCH_FROM_PEER_KEY))
_MTYPES = {int(t): t for t in MessageType}
_ETYPES = (EntryType.NORMAL, EntryType.CONF_CHANGE)


class _PeerCodecC(Protocol):
    """The C accelerator ``_peer_codec.c``; None from either: the specification serves."""

    def encode_batch(self, keys: bytes, sender: int, from_api: str, from_peer: str,
                     messages: list[Message], tag: int = ..., /) -> bytes | None: ...

    def decode_batch(self, keys: bytes, data: bytes | memoryview, message_cls: type[Message],
                     mtypes: dict[int, MessageType], entry_cls: type[Entry],
                     etypes: tuple[EntryType, EntryType], /
                     ) -> tuple[int, str, str, list[Message]] | None: ...


_accel = cast("_PeerCodecC | None", accel.load("gateway.node._peer_codec"))


def _encode_batch_c(sender: int, from_api: str, from_peer: str, messages: list[Message]
                    ) -> bytes:
    assert _accel is not None  # only installed when it is
    out = _accel.encode_batch(_KEYS, sender, from_api, from_peer, messages)
    return out if out is not None else encode_batch_py(sender, from_api, from_peer, messages)


def _decode_batch_c(data: bytes | memoryview) -> PeerBatch:
    assert _accel is not None  # only installed when it is
    got = _accel.decode_batch(_KEYS, data, Message, _MTYPES, Entry, _ETYPES)
    if got is None:
        return decode_batch_py(data)
    return PeerBatch(*got)


def encode_frame_batch_py(tag: int, sender: int, from_api: str, from_peer: str,
                          messages: list[Message]) -> bytes:
    """The transport frame (``gateway.core.frame.encode_frame``) under ``tag`` holding the
    ``MessageBatch`` of :func:`encode_batch_py`: the specification of
    :func:`encode_frame_batch`."""
    return encode_frame(tag, encode_batch_py(sender, from_api, from_peer, messages))


def _encode_frame_batch_c(tag: int, sender: int, from_api: str, from_peer: str,
                          messages: list[Message]) -> bytes:
    assert _accel is not None  # only installed when it is
    out = _accel.encode_batch(_KEYS, sender, from_api, from_peer, messages, tag)
    if out is not None:
        return out
    return encode_frame_batch_py(tag, sender, from_api, from_peer, messages)


encode_batch = _encode_batch_c if _accel else encode_batch_py
decode_batch = _decode_batch_c if _accel else decode_batch_py
#: ``encode_frame(tag, encode_batch(...))`` built in one buffer in C: the batch's entries are
#: copied once, straight into the frame (the framed peer stream's hot path on the leader).
encode_frame_batch = _encode_frame_batch_c if _accel else encode_frame_batch_py
