"""Type tags: one byte in front of a protobuf message says which message it is.

Protobuf has no notion of a type-tagged union across top-level messages, so, as in the 2008
binary log's transport frame, every record payload and every frame body is::

    +----------+---------------------------+
    | tag (u8) | serialized protobuf message |
    +----------+---------------------------+

``pack`` and ``unpack`` convert between a message and that byte string; ``TypeTag`` is the one
registry of tags. Tags are never reused or renumbered once released.

Tag ranges (so that areas can allocate without colliding):

- 0 and 255: reserved, never valid (0 is what a zero-filled hole reads as);
- 1-31: the log model (``proto/gateway/v1``);
- 32-63: storage metadata (WAL index records and footers, manifests, SSTables);
- 64-95: Raft state (hard state, snapshots, membership);
- 96-127: conflict handling and appliers (exceptions, positions, dead letters);
- 128-223: plugins and experiments;
- 224-239 (``0xE0``-``0xEF``): LSM store records. These are not protobuf messages but fixed
  binary layouts decoded in bulk (``gateway.core.lsm.format``, ``docs/formats/sstable.md``), so
  they are not in ``TypeTag``; the range is reserved here so that nothing else takes it;
- 240-254: reserved.

Errors (all are ``ValueError``)::

    MessageDecodeError          the bytes are not a tagged message
    ├── EmptyPayloadError       no tag byte at all
    ├── UnknownTypeTagError     the tag is not in TypeTag
    └── MalformedMessageError   the body does not parse as the tag's message
"""

from __future__ import annotations

from enum import IntEnum

from google.protobuf.message import DecodeError, Message

from gateway.v1 import (
    applier_pb2,
    channel_pb2,
    epoch_pb2,
    replication_pb2,
    schema_pb2,
    transaction_pb2,
    wal_pb2,
)

__all__ = [
    "EmptyPayloadError",
    "MalformedMessageError",
    "MessageDecodeError",
    "TypeTag",
    "UnknownTypeTagError",
    "message_class",
    "pack",
    "tag_of",
    "unpack",
]


class TypeTag(IntEnum):
    """The type-tag byte of every tagged message; see the module docstring for the ranges."""

    TRANSACTION = 1
    """``gateway.v1.Transaction``: one segment of a transaction."""
    EPOCH_MARKER = 2
    """``gateway.v1.EpochMarker``: seals an epoch of one cluster's log."""
    APPLY_STATUS = 3
    """``gateway.v1.ApplyStatus``: a standalone reflected apply-status row."""
    REPLICATED_EPOCH = 4
    """``gateway.v1.ReplicatedEpoch``: a sealed epoch of another cluster applied here."""
    SCHEMA_EVENT = 5
    """``gateway.v1.SchemaEvent``: one versioned change of a table's definition (issue 57)."""
    WAL_ENTRY = 32
    """``gateway.v1.WalEntry``: one Raft log entry in a WAL segment."""
    WAL_SEGMENT_HEADER = 33
    """``gateway.v1.WalSegmentHeader``: first record of a WAL segment."""
    WAL_SEGMENT_INDEX = 34
    """``gateway.v1.WalSegmentIndex``: offsets of a sealed segment's entries."""
    WAL_SEGMENT_FOOTER = 35
    """``gateway.v1.WalSegmentFooter``: last record of a sealed segment."""
    WAL_LOG_START = 36
    """``gateway.v1.WalLogStart``: where the log starts after compaction."""
    WAL_HARD_STATE = 37
    """``gateway.v1.WalHardState``: Raft term, vote and commit."""
    CHANNEL_COMMAND = 96
    """``gateway.v1.ChannelCommand``: adds, replaces or removes a replication channel."""
    CONFLICT_COMMAND = 97
    """``gateway.v1.ConflictCommand``: sets or unsets a conflict rule, or the cluster's role."""
    ALARM_COMMAND = 98
    """``gateway.v1.AlarmCommand``: raises or clears a node's NOSPACE alarm."""
    SLOT_COMMAND = 99
    """``gateway.v1.SlotCommand``: advances, marks lost or drops channel slots of readers."""
    SEED_PIN = 100
    """``gateway.v1.SeedPin``: a source pins (or releases) a snapshot for a seed."""
    SEED_INSTALL = 101
    """``gateway.v1.SeedInstall``: one step of installing a seed on a replica."""
    APPLIER_POSITION = 112
    """``gateway.v1.ApplierPosition``: the durable position of one applier."""
    DEAD_LETTER = 113
    """``gateway.v1.DeadLetter``: an operation an applier gave up on."""
    DEAD_LETTER_RESOLUTION = 114
    """``gateway.v1.DeadLetterResolution``: a dead letter replayed or discarded."""
    ROW_OPERATION = 115
    """``gateway.v1.RowOperation``: one reduced operation, e.g. a RabbitMQ message body."""


_CLASSES: dict[TypeTag, type[Message]] = {
    TypeTag.TRANSACTION: transaction_pb2.Transaction,
    TypeTag.EPOCH_MARKER: epoch_pb2.EpochMarker,
    TypeTag.APPLY_STATUS: epoch_pb2.ApplyStatus,
    TypeTag.REPLICATED_EPOCH: replication_pb2.ReplicatedEpoch,
    TypeTag.SCHEMA_EVENT: schema_pb2.SchemaEvent,
    TypeTag.CHANNEL_COMMAND: replication_pb2.ChannelCommand,
    TypeTag.CONFLICT_COMMAND: replication_pb2.ConflictCommand,
    TypeTag.ALARM_COMMAND: replication_pb2.AlarmCommand,
    TypeTag.SLOT_COMMAND: replication_pb2.SlotCommand,
    TypeTag.SEED_PIN: channel_pb2.SeedPin,
    TypeTag.SEED_INSTALL: channel_pb2.SeedInstall,
    TypeTag.WAL_ENTRY: wal_pb2.WalEntry,
    TypeTag.WAL_SEGMENT_HEADER: wal_pb2.WalSegmentHeader,
    TypeTag.WAL_SEGMENT_INDEX: wal_pb2.WalSegmentIndex,
    TypeTag.WAL_SEGMENT_FOOTER: wal_pb2.WalSegmentFooter,
    TypeTag.WAL_LOG_START: wal_pb2.WalLogStart,
    TypeTag.WAL_HARD_STATE: wal_pb2.WalHardState,
    TypeTag.APPLIER_POSITION: applier_pb2.ApplierPosition,
    TypeTag.DEAD_LETTER: applier_pb2.DeadLetter,
    TypeTag.DEAD_LETTER_RESOLUTION: applier_pb2.DeadLetterResolution,
    TypeTag.ROW_OPERATION: applier_pb2.RowOperation,
}
_TAGS: dict[type[Message], TypeTag] = {cls: tag for tag, cls in _CLASSES.items()}


class MessageDecodeError(ValueError):
    """The bytes are not a valid tagged message.

    ``offset`` is the absolute position of the problem (``base_offset`` passed to ``unpack``
    plus the position inside the payload); ``tag`` is the tag byte when one was read.
    """

    def __init__(self, reason: str, *, offset: int, tag: int | None = None) -> None:
        self.reason = reason
        self.offset = offset
        self.tag = tag
        super().__init__(f"{reason} at offset {offset}")


class EmptyPayloadError(MessageDecodeError):
    """The payload is empty: there is no type-tag byte."""


class UnknownTypeTagError(MessageDecodeError):
    """The type-tag byte names no registered message (a newer writer, or damage)."""


class MalformedMessageError(MessageDecodeError):
    """The body after a known tag does not parse as that tag's message."""


def message_class(tag: int) -> type[Message]:
    """Return the message class registered for ``tag``.

    Raises ``UnknownTypeTagError`` (with ``offset`` 0: there is no stream here) if none is.
    """
    try:
        return _CLASSES[TypeTag(tag)]
    except ValueError:
        raise UnknownTypeTagError(
            f"unknown type tag {tag} (0x{tag:02x})", offset=0, tag=tag
        ) from None


def tag_of(message: Message) -> TypeTag:
    """Return the tag of ``message``'s class; raise ``TypeError`` for an unregistered class."""
    try:
        return _TAGS[type(message)]
    except KeyError:
        raise TypeError(
            f"{type(message).__qualname__} has no type tag; register it in TypeTag"
        ) from None


def pack(message: Message) -> bytes:
    """Return the tag byte of ``message`` followed by its deterministic serialization.

    Raises ``TypeError`` when the message's class has no tag.
    """
    tag = tag_of(message)
    return bytes((tag,)) + message.SerializeToString(deterministic=True)


def unpack(data: bytes | bytearray | memoryview, *, base_offset: int = 0) -> Message:
    """Parse a tagged message produced by ``pack``.

    ``base_offset`` is where ``data`` starts in its file or stream; it is only used to make
    error offsets absolute. Raises a ``MessageDecodeError`` subclass (a ``ValueError``) naming
    the problem and its offset: the tag byte's offset for a missing or unknown tag, the body's
    first byte for a body that does not parse.
    """
    if len(data) == 0:
        raise EmptyPayloadError("empty payload: no type tag", offset=base_offset)
    tag = data[0]
    try:
        cls = _CLASSES[TypeTag(tag)]
    except ValueError:
        raise UnknownTypeTagError(
            f"unknown type tag {tag} (0x{tag:02x})", offset=base_offset, tag=tag
        ) from None
    try:
        return cls.FromString(bytes(data[1:]))
    except DecodeError as exc:
        raise MalformedMessageError(
            f"type tag {TypeTag(tag).name}: body does not parse as "
            f"{cls.DESCRIPTOR.full_name} ({exc})",
            offset=base_offset + 1,
            tag=tag,
        ) from None
