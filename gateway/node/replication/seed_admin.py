"""Operator commands that start a seed: ``channel add --seed`` and ``channel resync``
(docs/replication.md, "Seeding a new cluster", "Resync").

Both propose a ``SEED_INSTALL`` request for the channel (``gateway.node.state.seed_apply``):
its runner then reads a snapshot of the source and installs it before it streams
(``seed_reader``). A seed into a cluster that holds rows is a *merge*: the snapshot's keys
overwrite this cluster's, except rows written here that the source has not applied, which
are kept (they reach the source by its channel from this cluster and are judged there by its
conflict rules). ``channel add --seed`` refuses a cluster holding rows unless ``--merge``
says so; ``resync`` always merges, and first reports what it would do unless confirmed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import grpc

from gateway.core import messages
from gateway.core.lsm import LSMStore
from gateway.node.base.validation import InvalidRequest
from gateway.node.replication.seed_compare import compare_with_source
from gateway.v1 import channel_pb2, gateway_pb2, replication_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["LocalRows", "cancel_seed", "check_seedable", "local_rows", "request_seed",
           "resync_report", "seed_response"]

_ROWS_LO, _ROWS_HI = b"r", b"s"


def check_seedable(driver: RaftDriver, name: str, merge: bool) -> None:
    """Raise ``InvalidRequest`` when channel ``name`` cannot be seeded into this cluster:
    it holds rows and ``merge`` is not set."""
    if merge:
        return
    for _ in driver.sm.store.scan(_ROWS_LO, _ROWS_HI):
        raise InvalidRequest("seed", f"this cluster holds rows: a seed of channel {name!r} "
                             f"would overwrite them (add --merge to keep the rows the source "
                             f"lacks and overwrite the others, or seed an empty cluster)")


async def request_seed(driver: RaftDriver, name: str, source_id: int, merge: bool) -> int:
    """Propose the seed request of channel ``name``; its log index."""
    index: int = await driver.submit_entry(messages.pack(channel_pb2.SeedInstall(
        channel=name, source_id=source_id, request=True, merge=merge)))
    return index


async def cancel_seed(driver: RaftDriver, name: str) -> None:
    """Forget the seed state of channel ``name`` (its removal), if it has one: the other
    channels stop waiting for it."""
    if name in driver.sm.seeds:
        await driver.submit_entry(messages.pack(channel_pb2.SeedInstall(channel=name,
                                                                        cancel=True)))


class LocalRows(NamedTuple):
    """What a merge meets in this cluster's store: its rows, those written here, and of
    those the ones the source has not applied (kept by the merge)."""

    rows: int
    written_here: int
    unapplied: int


def local_rows(store: LSMStore, me: int, max_replicated_epoch: int) -> LocalRows:
    """Count the rows of ``store`` (a worker thread: it reads them all)."""
    rows = here = unapplied = 0
    with store.snapshot() as snap:
        for _, v in snap.scan_versions(_ROWS_LO, _ROWS_HI):
            if v.value is None:
                continue
            rows += 1
            if v.author == me:
                here += 1
                if v.epoch > max_replicated_epoch:
                    unapplied += 1
    return LocalRows(rows, here, unapplied)


async def resync_report(driver: RaftDriver, d: replication_pb2.ChannelDefinition,
                        confirm: bool, channel: Callable[[str], grpc.aio.Channel]
                        ) -> tuple[str, int]:
    """``channel resync``: without ``confirm``, what the resync of channel ``d`` would do
    (the report, log index 0): this cluster's rows, and how the source's snapshot differs
    from them (``seed_compare``, over ``channel(address)``); with it, propose the seed
    request and say so."""
    name, source_id = d.name, d.source_id
    sm = driver.sm
    me = driver.opts.cluster_id
    mre = sm.replication.max_replicated_epoch(source_id) if source_id else 0
    got = await asyncio.to_thread(local_rows, sm.store, me, mre)
    held = sm.replication.held(source_id) if source_id else 0
    what = (f"this cluster holds {got.rows} row(s), {got.written_here} written here; a "
            f"snapshot of the source (cluster {source_id or '?'}; this cluster holds its "
            f"epochs up to {held}) overwrites every row it holds and removes none; "
            f"{got.unapplied} row(s) written here in epochs the source has not applied "
            f"(above {mre}) are kept, not overwritten: they reach the source by its channel "
            f"from this cluster, where its conflict rules judge them")
    if not confirm:
        try:
            diff = (await compare_with_source(driver, d, channel)).line()
        except grpc.aio.AioRpcError as exc:
            diff = (f"the source's rows could not be compared ({exc.code().name}: "
                    f"{exc.details()})")
        return (f"channel {name} resync (dry run): {what}; {diff}; run again with --yes to "
                f"resync", 0)
    index = await request_seed(driver, name, source_id, merge=True)
    return f"channel {name}: resync started: {what} (gateway channel status {name})", index


def seed_response(name: str, note: str, index: int) -> gateway_pb2.AdminResponse:
    return gateway_pb2.AdminResponse(
        message=f"channel {name} added{note}; it seeds this cluster from a snapshot of the "
                f"source first (gateway channel status {name})", log_index=index)
