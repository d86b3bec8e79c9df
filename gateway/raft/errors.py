"""Named errors of the Raft core.

::

    RaftError
    ├── StorageError                     storage cannot serve a request
    │   ├── CompactedError               the requested index was compacted away
    │   ├── SnapshotOutOfDateError       the snapshot is older than the current one
    │   ├── UnavailableError             the requested index is beyond the last entry
    │   └── SnapshotTemporarilyUnavailableError  the snapshot is being built; retry later
    ├── ProposalDroppedError             the proposal was not accepted (no leader, transfer ...)
    ├── StepLocalMessageError            a local-only message was passed to RawNode.step
    ├── StepPeerNotFoundError            a response came from a node not in the configuration
    ├── ConfChangeError                  a configuration change is invalid
    ├── ConfigError                      the Config is invalid
    └── CorruptStateError                storage returned state that violates an invariant

A storage error other than the compaction/unavailability cases the core knows how to handle
propagates out of ``step``/``tick``: the node is then inoperable, it is never papered over.
"""

from __future__ import annotations


class RaftError(Exception):
    """Base class of every error raised by ``gateway.raft``."""


class StorageError(RaftError):
    """Storage cannot serve the request."""


class CompactedError(StorageError):
    """The requested index is at or below the first index kept after compaction."""


class SnapshotOutOfDateError(StorageError):
    """A snapshot older than the current one was offered to storage."""


class UnavailableError(StorageError):
    """The requested index is beyond the last stored entry."""


class SnapshotTemporarilyUnavailableError(StorageError):
    """The snapshot is not ready yet; the leader retries later."""


class ProposalDroppedError(RaftError):
    """The proposal was dropped: no known leader, forwarding disabled, a leadership transfer in
    progress, the node was removed, or the uncommitted-size limit was reached."""


class StepLocalMessageError(RaftError):
    """``RawNode.step`` was given a message type that only the node itself may generate."""


class StepPeerNotFoundError(RaftError):
    """``RawNode.step`` was given a response from a node that is not in the configuration."""


class ConfChangeError(RaftError):
    """The configuration change cannot be applied to the current configuration."""


class ConfigError(RaftError):
    """The ``Config`` is invalid."""


class CorruptStateError(RaftError):
    """Storage returned a state that violates an invariant (e.g. commit beyond the last index)."""
