"""Configuration of one Raft node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ConfigError
from .rng import RandomSource, SplitMix64
from .storage import NO_LIMIT, Storage
from .types import NONE, ReadOnlyOption

if TYPE_CHECKING:
    from .snapshot_transfer import SpoolFactory


@dataclass(slots=True)
class Config:
    """Parameters of a node. Times are in ticks; sizes are payload bytes.

    ``election_tick`` must exceed ``heartbeat_tick``; a follower campaigns after a randomized
    timeout in ``[election_tick, 2 * election_tick)`` drawn from ``rng`` (which the caller seeds:
    the core has no other source of randomness). ``applied`` is the index the application state
    already reflects when restarting. ``max_size_per_msg`` and ``max_inflight_msgs`` /
    ``max_inflight_bytes`` bound batching and pipelining of appends. ``skip_used_terms`` enables
    the aurora seed's election live-lock fix (see docs/raft.md).
    """

    id: int
    storage: Storage
    election_tick: int = 10
    heartbeat_tick: int = 1
    applied: int = 0
    max_size_per_msg: int = 1 << 20
    max_committed_size_per_ready: int = NO_LIMIT
    max_uncommitted_entries_size: int = 0
    max_inflight_msgs: int = 256
    max_inflight_bytes: int = 0
    check_quorum: bool = False
    pre_vote: bool = False
    read_only_option: ReadOnlyOption = ReadOnlyOption.SAFE
    disable_proposal_forwarding: bool = False
    skip_used_terms: bool = True
    max_snapshot_chunk: int = 1 << 20
    snapshot_chunk_window: int = 4
    #: Ignore vote requests for one election timeout after start, so that a restart cannot cut
    #: short a lease this node granted. None: on iff ``read_only_option`` is LEASE_BASED; set it
    #: when lease reads are requested per call (``RawNode.read_index(ctx, lease=True)``).
    boot_lease_guard: bool | None = None
    rng: RandomSource | None = field(default=None)
    #: Makes the spool an incoming snapshot's chunks are kept in (``snapshot_transfer``);
    #: None: in memory. A node spools to a file, so it never holds a snapshot whole.
    snapshot_spool: SpoolFactory | None = None

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first invalid field."""
        if self.id == NONE or self.id < 0:
            raise ConfigError("id: must be a positive integer")
        if self.heartbeat_tick <= 0:
            raise ConfigError("heartbeat_tick: must be greater than 0")
        if self.election_tick <= self.heartbeat_tick:
            raise ConfigError("election_tick: must be greater than heartbeat_tick")
        if self.max_inflight_msgs <= 0:
            raise ConfigError("max_inflight_msgs: must be greater than 0")
        if self.max_inflight_bytes and self.max_inflight_bytes < self.max_size_per_msg:
            raise ConfigError("max_inflight_bytes: must be >= max_size_per_msg")
        if self.read_only_option == ReadOnlyOption.LEASE_BASED and not self.check_quorum:
            raise ConfigError("read_only_option: LEASE_BASED requires check_quorum")
        if self.max_snapshot_chunk <= 0 or self.snapshot_chunk_window <= 0:
            raise ConfigError("max_snapshot_chunk/snapshot_chunk_window: must be > 0")
        if self.rng is None:
            self.rng = SplitMix64(self.id)
