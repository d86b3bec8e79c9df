"""Raft as a pure, deterministic state machine (no I/O, no clocks, no global randomness).

Modelled on etcd-io/raft: feed a ``RawNode`` ticks and messages, take ``Ready`` values out,
persist/send/apply them, call ``advance``. See docs/raft.md for the design and the
persistence contract.
"""

from __future__ import annotations

from .config import Config
from .core import CAMPAIGN_TRANSFER, Raft
from .errors import (
    CompactedError,
    ConfChangeError,
    ConfigError,
    CorruptStateError,
    ProposalDroppedError,
    RaftError,
    SnapshotOutOfDateError,
    SnapshotTemporarilyUnavailableError,
    StepLocalMessageError,
    StepPeerNotFoundError,
    StorageError,
    UnavailableError,
)
from .rawnode import RawNode, Status
from .rng import RandomSource, SplitMix64
from .storage import NO_LIMIT, MemoryStorage, Storage
from .types import (
    NONE,
    ConfChange,
    ConfChangeSingle,
    ConfChangeTransition,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadOnlyOption,
    ReadState,
    Ready,
    Role,
    Snapshot,
    SnapshotChunk,
    SnapshotData,
    SnapshotMetadata,
    SoftState,
)

__all__ = [
    "CAMPAIGN_TRANSFER",
    "NONE",
    "NO_LIMIT",
    "CompactedError",
    "ConfChange",
    "ConfChangeError",
    "ConfChangeSingle",
    "ConfChangeTransition",
    "ConfChangeType",
    "ConfState",
    "Config",
    "ConfigError",
    "CorruptStateError",
    "Entry",
    "EntryType",
    "HardState",
    "MemoryStorage",
    "Message",
    "MessageType",
    "ProposalDroppedError",
    "Raft",
    "RaftError",
    "RandomSource",
    "RawNode",
    "ReadOnlyOption",
    "ReadState",
    "Ready",
    "Role",
    "Snapshot",
    "SnapshotChunk",
    "SnapshotData",
    "SnapshotMetadata",
    "SnapshotOutOfDateError",
    "SnapshotTemporarilyUnavailableError",
    "SoftState",
    "SplitMix64",
    "Status",
    "StepLocalMessageError",
    "StepPeerNotFoundError",
    "Storage",
    "StorageError",
    "UnavailableError",
]
