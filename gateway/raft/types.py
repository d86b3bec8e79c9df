"""Values that flow in and out of the Raft core: entries, messages, states, configurations.

Everything here is a plain value (slotted dataclasses and enums). The core never mutates an
``Entry`` or a ``Snapshot`` after handing it out; callers must not mutate them either, because the
same objects are shared between the unstable log, storage and outgoing messages.
"""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

#: Node id meaning "nobody" (no vote, no known leader). Real node ids are positive integers.
NONE = 0


class MessageType(IntEnum):
    """Kinds of messages. ``HUP``, ``BEAT``, ``CHECK_QUORUM``, ``UNREACHABLE`` and
    ``SNAP_STATUS`` are local: they are stepped into a node by its own driver and never sent."""

    HUP = 0
    BEAT = 1
    PROP = 2
    APP = 3
    APP_RESP = 4
    VOTE = 5
    VOTE_RESP = 6
    SNAP = 7
    HEARTBEAT = 8
    HEARTBEAT_RESP = 9
    UNREACHABLE = 10
    SNAP_STATUS = 11
    CHECK_QUORUM = 12
    TRANSFER_LEADER = 13
    TIMEOUT_NOW = 14
    READ_INDEX = 15
    READ_INDEX_RESP = 16
    PRE_VOTE = 17
    PRE_VOTE_RESP = 18
    SNAP_ACK = 19


#: Message types that only ever originate locally.
LOCAL_MESSAGES = frozenset(
    {
        MessageType.HUP,
        MessageType.BEAT,
        MessageType.UNREACHABLE,
        MessageType.SNAP_STATUS,
        MessageType.CHECK_QUORUM,
    }
)

#: Responses: stepping one of these from an unknown peer is refused by ``RawNode.step``.
RESPONSE_MESSAGES = frozenset(
    {
        MessageType.APP_RESP,
        MessageType.VOTE_RESP,
        MessageType.HEARTBEAT_RESP,
        MessageType.PRE_VOTE_RESP,
        MessageType.SNAP_ACK,
    }
)

_MESSAGE_NAMES = {
    MessageType.HUP: "MsgHup",
    MessageType.BEAT: "MsgBeat",
    MessageType.PROP: "MsgProp",
    MessageType.APP: "MsgApp",
    MessageType.APP_RESP: "MsgAppResp",
    MessageType.VOTE: "MsgVote",
    MessageType.VOTE_RESP: "MsgVoteResp",
    MessageType.SNAP: "MsgSnap",
    MessageType.HEARTBEAT: "MsgHeartbeat",
    MessageType.HEARTBEAT_RESP: "MsgHeartbeatResp",
    MessageType.UNREACHABLE: "MsgUnreachable",
    MessageType.SNAP_STATUS: "MsgSnapStatus",
    MessageType.CHECK_QUORUM: "MsgCheckQuorum",
    MessageType.TRANSFER_LEADER: "MsgTransferLeader",
    MessageType.TIMEOUT_NOW: "MsgTimeoutNow",
    MessageType.READ_INDEX: "MsgReadIndex",
    MessageType.READ_INDEX_RESP: "MsgReadIndexResp",
    MessageType.PRE_VOTE: "MsgPreVote",
    MessageType.PRE_VOTE_RESP: "MsgPreVoteResp",
    MessageType.SNAP_ACK: "MsgSnapAck",
}


def message_name(t: MessageType) -> str:
    """The etcd-style name of a message type (``MsgApp``), used in logs and golden files."""
    return _MESSAGE_NAMES[t]


class EntryType(IntEnum):
    """``NORMAL`` entries carry application data (empty data is the leader's no-op);
    ``CONF_CHANGE`` entries carry an encoded :class:`ConfChange`."""

    NORMAL = 0
    CONF_CHANGE = 1


class Role(IntEnum):
    """The role a node currently plays."""

    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2
    PRE_CANDIDATE = 3


class ReadOnlyOption(IntEnum):
    """How a read-index request is confirmed.

    ``SAFE`` confirms leadership with a heartbeat round to a quorum. ``LEASE_BASED`` answers at
    once while the leader holds a lease (a quorum acknowledged a heartbeat sent less than an
    election timeout ago); it requires check-quorum and falls back to ``SAFE`` without a lease.
    """

    SAFE = 0
    LEASE_BASED = 1


@dataclass(slots=True)
class Entry:
    """One log entry. ``index`` and ``term`` are assigned by the leader when it appends."""

    term: int = 0
    index: int = 0
    type: EntryType = EntryType.NORMAL
    data: bytes = b""


@dataclass(slots=True, frozen=True)
class HardState:
    """The state that must be durable before any message depending on it is sent."""

    term: int = 0
    vote: int = NONE
    commit: int = 0

    def is_empty(self) -> bool:
        return self.term == 0 and self.vote == NONE and self.commit == 0


EMPTY_HARD_STATE = HardState()


@dataclass(slots=True, frozen=True)
class SoftState:
    """Volatile state, reported in ``Ready`` when it changes. ``removed`` is set once the node
    has applied a configuration that no longer contains it: its driver should stop it."""

    lead: int = NONE
    role: Role = Role.FOLLOWER
    removed: bool = False


@dataclass(slots=True, frozen=True)
class ConfState:
    """A membership configuration as stored in snapshots.

    ``voters_outgoing`` is non-empty only in a joint configuration; ``learners_next`` holds
    voters being demoted to learners once the joint configuration is left.
    """

    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()
    voters_outgoing: tuple[int, ...] = ()
    learners_next: tuple[int, ...] = ()
    auto_leave: bool = False

    def members(self) -> frozenset[int]:
        """Every node id this configuration mentions."""
        return frozenset(
            (*self.voters, *self.learners, *self.voters_outgoing, *self.learners_next)
        )


@dataclass(slots=True, frozen=True)
class SnapshotMetadata:
    """Where a snapshot ends: it replaces every entry with index <= ``index``."""

    conf_state: ConfState = field(default_factory=ConfState)
    index: int = 0
    term: int = 0


class SnapshotData(Protocol):
    """What a snapshot's image must offer the core: its length and its bytes by range (the
    sender slices it into chunks). ``bytes`` is one; a storage may hand out a reader that
    reads the ranges from files as they are asked for, so the image is never held whole."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> bytes: ...


@dataclass(slots=True, frozen=True)
class Snapshot:
    """An application state image plus the metadata of the last entry it covers. ``data``
    is ``bytes`` or any ``SnapshotData`` (a received snapshot's is ``bytes``)."""

    metadata: SnapshotMetadata = field(default_factory=SnapshotMetadata)
    data: bytes | SnapshotData = b""

    def is_empty(self) -> bool:
        return self.metadata.index == 0


EMPTY_SNAPSHOT = Snapshot()


@dataclass(slots=True, frozen=True)
class SnapshotChunk:
    """A byte range ``[offset, offset + len(data))`` of a snapshot's data. ``total`` is the size
    of the whole data; the metadata travels with every chunk so a receiver can tell chunks of
    different snapshots apart."""

    metadata: SnapshotMetadata
    offset: int
    total: int
    data: bytes


@dataclass(slots=True)
class Message:
    """A Raft message. Fields not used by a message type keep their defaults.

    ``from_``/``to`` are node ids; ``term`` is 0 only for local messages and forwarded proposals
    or read requests. For ``APP``, ``index``/``log_term`` identify the entry preceding
    ``entries``. For ``APP_RESP`` rejections ``reject_hint``/``log_term`` carry the follower's
    best guess of where the logs diverge (fast backtracking). ``context`` carries the read-index
    request context or the leader-transfer marker; ``lease`` asks a read-index request to be
    served from the leader lease and, in heartbeats and their responses, carries the leader's
    tick at which the heartbeat was sent.
    """

    type: MessageType
    to: int = NONE
    from_: int = NONE
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: list[Entry] = field(default_factory=list)
    commit: int = 0
    snapshot: Snapshot | None = None
    chunk: SnapshotChunk | None = None
    reject: bool = False
    reject_hint: int = 0
    context: bytes = b""
    lease: int = 0


@dataclass(slots=True, frozen=True)
class ReadState:
    """A confirmed read-index request: once the node has applied ``index`` it may serve the
    read identified by ``request_ctx`` linearizably."""

    index: int
    request_ctx: bytes


class ConfChangeType(IntEnum):
    ADD_NODE = 0
    REMOVE_NODE = 1
    ADD_LEARNER_NODE = 2


class ConfChangeTransition(IntEnum):
    """``AUTO`` uses a joint configuration only when needed (more than one voter changes) and
    leaves it automatically; ``JOINT_IMPLICIT`` always goes joint and leaves automatically;
    ``JOINT_EXPLICIT`` always goes joint and waits for an empty ``ConfChange`` to leave."""

    AUTO = 0
    JOINT_IMPLICIT = 1
    JOINT_EXPLICIT = 2


@dataclass(slots=True, frozen=True)
class ConfChangeSingle:
    type: ConfChangeType
    node_id: int


_CC_HEADER = struct.Struct("<BHI")
_CC_SINGLE = struct.Struct("<BQ")


@dataclass(slots=True, frozen=True)
class ConfChange:
    """A membership change. An empty ``changes`` tuple means "leave the joint configuration"."""

    changes: tuple[ConfChangeSingle, ...] = ()
    transition: ConfChangeTransition = ConfChangeTransition.AUTO
    context: bytes = b""

    def leave_joint(self) -> bool:
        return not self.changes

    def enter_joint(self) -> tuple[bool, bool]:
        """Whether applying this change enters a joint configuration, and if so whether the
        joint configuration is left automatically (``(use_joint, auto_leave)``)."""
        if self.transition != ConfChangeTransition.AUTO or len(self.changes) > 1:
            return True, self.transition != ConfChangeTransition.JOINT_EXPLICIT
        return False, False

    def encode(self) -> bytes:
        """Byte encoding stored in ``CONF_CHANGE`` entries: header (transition, change count,
        context length), one (type, node id) pair per change, then the context."""
        parts = [_CC_HEADER.pack(self.transition, len(self.changes), len(self.context))]
        parts.extend(_CC_SINGLE.pack(c.type, c.node_id) for c in self.changes)
        parts.append(self.context)
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> ConfChange:
        """Inverse of :meth:`encode`; raises ``ValueError`` naming the problem on bad input."""
        if len(data) < _CC_HEADER.size:
            raise ValueError(f"conf change: {len(data)} bytes, header needs {_CC_HEADER.size}")
        transition, count, ctx_len = _CC_HEADER.unpack_from(data, 0)
        need = _CC_HEADER.size + count * _CC_SINGLE.size + ctx_len
        if len(data) != need:
            raise ValueError(f"conf change: {len(data)} bytes, expected {need}")
        pos = _CC_HEADER.size
        changes = []
        for _ in range(count):
            t, node = _CC_SINGLE.unpack_from(data, pos)
            changes.append(ConfChangeSingle(ConfChangeType(t), node))
            pos += _CC_SINGLE.size
        return cls(tuple(changes), ConfChangeTransition(transition), bytes(data[pos:]))


@dataclass(slots=True)
class Ready:
    """Everything the driver must do after stepping or ticking, in this order:

    1. write ``snapshot`` (if not empty), ``entries`` and ``hard_state`` (if not None) to
       stable storage *atomically* (a crash keeps all of them or none: e.g. one checksummed
       WAL record; either piecewise order is unsafe, see docs/raft.md); when ``must_sync`` is
       true they must be durable (fsync) before step 2;
    2. send ``messages`` (they may depend on the state written in step 1);
    3. apply ``committed_entries`` (calling ``RawNode.apply_conf_change`` for conf changes) and
       serve ``read_states`` once the applied index reaches them;
    4. call ``RawNode.advance(ready)``.

    The lists are owned by the driver after ``ready()`` returns.
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    read_states: list[ReadState] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot = EMPTY_SNAPSHOT
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    must_sync: bool = False


_data_of = operator.attrgetter("data")


def entries_size(ents: list[Entry]) -> int:
    """Payload bytes of ``ents`` (the measure used for every size limit), summed in C."""
    return sum(map(len, map(_data_of, ents)))


def limit_size(ents: list[Entry], max_size: int) -> list[Entry]:
    """The longest prefix of ``ents`` whose payload fits in ``max_size`` bytes; never empty if
    ``ents`` is not (one oversized entry still goes out alone)."""
    if not ents or entries_size(ents) <= max_size:  # the usual: all fit
        return ents
    size = len(ents[0].data)
    for i in range(1, len(ents)):
        size += len(ents[i].data)
        if size > max_size:
            return ents[:i]
    return ents
