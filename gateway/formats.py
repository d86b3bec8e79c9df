"""Readers of Gateway's documented on-disk formats, for tools outside the node (the Spark bulk
applier, backups, audits). Every name here is public and stable like ``gateway.__all__``;
the modules they come from are internal.

- The record stream (docs/formats/record-stream.md): ``records`` -- ``scan``, ``verify``,
  ``search``, ``first_nonzero``, ``decode_record``, ``Record`` -- and ``SEPARATOR``.
- The Raft WAL segments (docs/formats/wal.md): ``WalTag`` (record tags), ``decode_wal_entry``
  (an entry record's payload -> index, term, type, data), ``decode_fields``,
  ``decode_log_start``, ``PayloadError``; reading closed segments (``open_segment``,
  ``close_segment``, ``last_commit``, ``entry_index_key``, ``entry_position``).
- The LSM store and its snapshot export (docs/formats/sstable.md): ``read_manifest``,
  ``SNAPSHOT_NAME`` + ``read_snapshot_manifest`` (an exported snapshot's table list),
  ``decode_block``, ``TAG_BLOCK``, ``FLAG_TOMBSTONE``, ``FLAG_META``.
- ``load_accelerator(name)``: import an optional C extension unless ``GATEWAY_PURE_PYTHON=1``
  (None when it is not built or disabled); readers keep a Python specification beside it.
"""

from __future__ import annotations

from gateway.core import records
from gateway.core.accel import load as load_accelerator
from gateway.core.lsm.export import SNAPSHOT_NAME, read_snapshot_manifest
from gateway.core.lsm.format import FLAG_META, FLAG_TOMBSTONE, TAG_BLOCK, decode_block
from gateway.core.lsm.manifest import read_manifest
from gateway.core.stuffing import SEPARATOR
from gateway.core.wal.codec import (
    PayloadError,
    WalTag,
    decode_fields,
    decode_log_start,
    decode_wal_entry,
)
from gateway.core.wal.segment_read import (
    close_segment,
    entry_index_key,
    entry_position,
    last_commit,
    open_segment,
)

__all__ = [
    "FLAG_META",
    "FLAG_TOMBSTONE",
    "SEPARATOR",
    "SNAPSHOT_NAME",
    "TAG_BLOCK",
    "PayloadError",
    "WalTag",
    "close_segment",
    "decode_block",
    "decode_fields",
    "decode_log_start",
    "decode_wal_entry",
    "entry_index_key",
    "entry_position",
    "last_commit",
    "load_accelerator",
    "open_segment",
    "read_manifest",
    "read_snapshot_manifest",
    "records",
]
