"""``SEED_INSTALL`` entries: a replica installs a seed (a snapshot of its source's store at
an epoch boundary) through its own Raft log (docs/replication.md, "Seeding a new cluster").

The seed state of a channel is replicated state, ``m seed:<channel>`` (a ``SeedInstall``
holding the request, the seed's start and the last installed chunk, without rows), so a
new leader -- after a kill -9 of the old one -- resumes after the last installed chunk. One
entry is one step, applied on every node from its bytes alone:

- ``request``: a seed is wanted before the channel streams (``channel add --seed``,
  ``channel resync``); replaces the channel's seed state;
- ``begin``: the source pinned seed ``seed_id`` at its epoch ``E``. When an earlier attempt
  under another id installed chunks (the source nodes holding its pin died), the keys it
  installed -- rows up to its last installed key -- are removed first, unless the seed
  merges into data the cluster held before;
- ``chunk``: installed only when it is the next chunk of the current seed (``chunk_no`` one
  above the last installed): a replayed or stale chunk changes nothing. Rows are written
  with the source's value bytes (origin author, GTID, commit time) but this cluster's epoch
  of the entry (``local_epoch``) and its log index, as a row applied by the channel at that
  point would carry; retained tombstones likewise; first-seen schemas as they are. A row
  written here that the source has not applied (author this cluster, epoch above the
  source's max replicated epoch) is kept -- in a merge (``resync``), and in a new cluster
  that took writes during its seed: it reaches the source by the reverse channel and is
  judged there; the seed never drops it (nor does a restart's removal);
- ``end``: after the last chunk, records the source's apply status and watermarks at ``E``
  as if this cluster had replicated from the start -- apply-status rows kept as they are,
  ``held(X)`` raised to what the source held of ``X``, the channel's position ``(S, E,
  self)`` -- and the source's table definitions, versions and schema histories at ``E``
  (``schema_apply.install_histories``; docs/schema.md), and clears the seed state: the
  channel then streams after ``E``;
- ``cancel``: clears the seed state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from google.protobuf.message import DecodeError

from gateway.core.lsm.format import RowVersion
from gateway.node.state import keys
from gateway.node.state.epoch_apply import U64
from gateway.node.state.schema_apply import TableState, install_histories
from gateway.node.state.store_ops import Ops, meta_op
from gateway.replication import ReplicationState
from gateway.v1 import channel_pb2, gateway_pb2

__all__ = ["SEED_AT", "SEED_COVER", "SEED_PREFIX", "SeedApplied", "apply_seed_install",
           "load_seeds", "seed_coverage", "seed_key"]

#: Prefix of the channels' seed states (``m seed:<channel>``).
SEED_PREFIX = keys.meta_key("seed:")
_ROW, _SCHEMA = ord("r"), ord("s")


#: The log index of the last seed end applied here (``m seed-at``), and per origin the
#: watermark the last seed that raised it raised it to (``m seed-cover:<origin>``): some
#: transactions up to those reached the store through a seed, never through the log.
SEED_AT = keys.meta_key("seed-at")
SEED_COVER = keys.meta_key("seed-cover:")


def seed_coverage(get: Callable[[bytes], bytes | None],
                  scan: Callable[[bytes], Iterator[tuple[bytes, bytes]]]
                  ) -> tuple[int, dict[int, int]]:
    """``(index, {origin: trans id})`` of the last seed (or resync) end this cluster applied
    (``get``/``scan``: the store's ``get`` and ``scan_prefix``); ``(0, {})`` when none."""
    raw = get(SEED_AT)
    if raw is None:
        return 0, {}
    cover = {int(k[len(SEED_COVER):]): U64.unpack(v)[0] for k, v in scan(SEED_COVER)}
    return U64.unpack(raw)[0], cover


def seed_key(channel: str) -> bytes:
    return SEED_PREFIX + channel.encode()


def load_seeds(scan: Callable[[bytes], Iterator[tuple[bytes, bytes]]]
               ) -> dict[str, channel_pb2.SeedInstall]:
    """The seed states held in the store (``scan``: its ``scan_prefix``)."""
    out = {}
    for k, v in scan(SEED_PREFIX):
        out[k[len(SEED_PREFIX):].decode()] = channel_pb2.SeedInstall.FromString(v)
    return out


class SeedApplied(NamedTuple):
    """What the state machine holds after a ``SEED_INSTALL`` entry: the seed states, the
    replication state (a new one when ``end`` changed it), and the schemas the chunk added
    (``s`` key -> serialized Row)."""

    seeds: dict[str, channel_pb2.SeedInstall]
    replication: ReplicationState | None
    schemas: dict[str, bytes]
    rows: int  # keys written
    #: the tables' definitions the end installed (``schema_apply.install_histories``)
    tables: dict[str, TableState] | None = None


def apply_seed_install(seeds: Mapping[str, channel_pb2.SeedInstall],
                       replication: ReplicationState, data: bytes, index: int, ops: Ops,
                       get_version: Callable[[bytes], RowVersion | None],
                       scan_keys: Callable[[bytes, bytes], Iterator[bytes]],
                       own_writes: bool = False) -> SeedApplied | None:
    """Apply one ``SEED_INSTALL`` entry (type tag first) at log index ``index``; see the
    module docstring. ``get_version`` reads the store (merges), ``scan_keys(lo, hi)`` lists
    its keys in a range (restarts); ``own_writes``: this cluster has written transactions
    of its own (its rows are looked up before a seeded key replaces them). None when the
    entry changes nothing."""
    try:
        cmd = channel_pb2.SeedInstall.FromString(data[1:])
    except DecodeError:
        return None
    name = cmd.channel
    if not name:
        return None
    out = dict(seeds)
    have = out.get(name)
    if cmd.request:
        state = channel_pb2.SeedInstall(channel=name, source_id=cmd.source_id, request=True,
                                        merge=cmd.merge)
        return _put(out, state, ops, replication)
    if cmd.cancel:
        if have is None:
            return None
        del out[name]
        ops.append(meta_op(seed_key(name), None))
        return SeedApplied(out, None, {}, 0)
    if have is None:
        return None  # a step of a seed that was cancelled or already ended
    if cmd.HasField("begin"):
        if have.begin.seed_id == cmd.begin.seed_id:
            return None  # replayed
        if have.begin.seed_id and have.chunk.chunk_no and not have.merge:
            _remove_installed(have.chunk.last_key, scan_keys, ops,
                              _unapplied_here(get_version, replication.self_id,
                                              replication.max_replicated_epoch(
                                                  have.source_id)))
        state = channel_pb2.SeedInstall()
        state.CopyFrom(have)
        state.source_id = cmd.source_id or have.source_id
        state.begin.CopyFrom(cmd.begin)
        state.ClearField("chunk")
        return _put(out, state, ops, replication)
    if cmd.HasField("chunk"):
        c = cmd.chunk
        if not have.begin.seed_id or c.seed_id != have.begin.seed_id \
                or c.chunk_no != have.chunk.chunk_no + 1:
            return None  # a replay of an installed chunk, or one of another attempt
        schemas: dict[str, bytes] = {}
        guard = _unapplied_here(get_version, replication.self_id,
                                replication.max_replicated_epoch(have.source_id)) \
            if have.merge or own_writes else None
        n = 0
        for r in c.rows:
            if _install_row(r, cmd.local_epoch, index, ops, schemas, guard):
                n += 1
        state = channel_pb2.SeedInstall()
        state.CopyFrom(have)
        state.chunk.CopyFrom(channel_pb2.SeedChunk(seed_id=c.seed_id, last_key=c.last_key,
                                                   chunk_no=c.chunk_no))
        got = _put(out, state, ops, replication)
        return got._replace(schemas=schemas, rows=n)
    if cmd.HasField("end"):
        end = cmd.end
        if end.seed_id != have.begin.seed_id or end.chunks != have.chunk.chunk_no:
            return None
        source = have.source_id
        rep = replication.copy()
        origins: set[int] = set()
        pairs: set[tuple[int, int]] = set()
        for w in end.watermarks:
            if w.origin != rep.self_id and w.trans_id > rep.watermarks.get(w.origin, 0):
                rep.watermarks[w.origin] = w.trans_id
                origins.add(w.origin)
        for row in end.apply_status:
            if row.applied_by == rep.self_id:
                continue  # the source's copy of what this cluster said of itself
            if rep.raise_status(row.server_id, row.applied_by, row.epoch):
                pairs.add((row.server_id, row.applied_by))
            # the source held X's log up to that epoch, and now this cluster holds what it
            # held: where a channel from X resumes (docs/replication.md, failover)
            if row.applied_by == source and row.server_id != rep.self_id and \
                    rep.raise_status(row.server_id, rep.self_id, row.epoch):
                pairs.add((row.server_id, rep.self_id))
        if rep.raise_status(source, rep.self_id, end.epoch):
            pairs.add((source, rep.self_id))
        for o in origins:
            ops.append(meta_op(keys.meta_key(f"w:{o}"), U64.pack(rep.watermarks[o])))
        # the transactions this raised the watermarks over are in the store, never in the
        # log: a channel reading this cluster must hold them already (``seed_coverage``;
        # the new watermark is the max of every seed's so far)
        for o in origins:
            ops.append(meta_op(SEED_COVER + str(o).encode(), U64.pack(rep.watermarks[o])))
        ops.append(meta_op(SEED_AT, U64.pack(index)))
        for sid, by in sorted(pairs):
            ops.append(meta_op(keys.meta_key(f"as:{sid}:{by}"),
                               U64.pack(rep.apply_status[(sid, by)])))
        del out[name]
        ops.append(meta_op(seed_key(name), None))
        tables = install_histories(end.schema_history, index, ops, scan_keys)
        return SeedApplied(out, rep, {}, 0, tables)
    return None


def _put(out: dict[str, channel_pb2.SeedInstall], state: channel_pb2.SeedInstall, ops: Ops,
         replication: ReplicationState) -> SeedApplied:
    out[state.channel] = state
    ops.append(meta_op(seed_key(state.channel), state.SerializeToString()))
    return SeedApplied(out, None, {}, 0)


def _unapplied_here(get_version: Callable[[bytes], RowVersion | None], me: int, mre: int
                    ) -> Callable[[bytes], bool]:
    """Whether the stored version of a key was written here (``me``) in an epoch the source
    has not applied (above ``mre``, its max replicated epoch)."""
    def unapplied(key: bytes) -> bool:
        v = get_version(key)
        return v is not None and v.author == me and v.epoch > mre
    return unapplied


def _install_row(r: channel_pb2.SeedRow, local_epoch: int, index: int, ops: Ops,
                 schemas: dict[str, bytes], keep: Callable[[bytes], bool] | None) -> bool:
    """Append the store operation of seeded key ``r``; False when it is not written (a key
    outside rows and schemas, a value that does not parse, or a row ``keep`` says was
    written here and not applied by the source)."""
    key = r.key
    if not key or key[0] not in (_ROW, _SCHEMA):
        return False
    if key[0] == _SCHEMA:
        if r.tombstone:
            return False
        ops.append(meta_op(key, r.value))
        schemas[key[1:].decode(errors="replace")] = r.value
        return True
    if keep is not None and keep(key):
        return False
    if r.tombstone:
        ops.append((key, None, local_epoch, r.author, r.commit_ts))
        return True
    try:
        row = gateway_pb2.Row.FromString(r.value)
    except DecodeError:
        return False
    row.epoch = local_epoch
    row.log_index = index
    ops.append((key, row.SerializeToString(), local_epoch, r.author, r.commit_ts))
    return True


def _remove_installed(last_key: bytes, scan_keys: Callable[[bytes, bytes], Iterator[bytes]],
                      ops: Ops, keep: Callable[[bytes], bool]) -> None:
    """Delete the row keys an abandoned attempt installed (every row key up to and
    including ``last_key`` but those ``keep`` says were written here; schemas stay: a
    table's first-seen schema never changes)."""
    hi = b"s" if not last_key or last_key[0] != _ROW else last_key + b"\x00"
    for k in scan_keys(b"r", hi):
        if not keep(k):
            ops.append(meta_op(k, None))
