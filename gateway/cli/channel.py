"""``gateway channel``: replication channels of a cluster (docs/replication.md)."""

from __future__ import annotations

import json

import click

from gateway.v1 import gateway_pb2

from .node import _ca, _call, _client, _target, _token, channel_lines, peer_lines
from .plugins import BadInput

__all__ = ["channel"]


@click.group("channel")
def channel() -> None:
    """Replicate from other clusters: add, list, status, remove, pause, resume."""


@channel.command("add")
@_target
@click.option("--token", envvar="GATEWAY_TOKEN", default=None,
              help="Admin token of THIS cluster, the replica (also GATEWAY_TOKEN); the "
                   "source's token is --source-token.")
@click.option("--ca", envvar="GATEWAY_CA", default=None, type=click.Path(dir_okay=False),
              help="CA certificate of THIS cluster's TLS API; the source's is --source-ca.")
@click.option("--from", "sources", required=True, metavar="HOST:PORT[,...]",
              help="API addresses of nodes of the source cluster.")
@click.option("--source-token", default="",
              help="Read token the channel presents to the source cluster.")
@click.option("--source-ca", default=None, type=click.Path(dir_okay=False),
              help="CA certificate of the source cluster's TLS API (the channel then uses "
                   "TLS).")
@click.option("--source-id", type=int, default=0,
              help="The source's cluster id (default: learned on first contact, then pinned).")
@click.option("--replace", is_flag=True, help="Replace a channel of the same name.")
@click.option("--seed", is_flag=True,
              help="Seed this (empty) cluster from a snapshot of the source first, then "
                   "stream from the snapshot's epoch.")
@click.option("--merge", is_flag=True,
              help="With --seed, on a cluster that holds rows: the snapshot overwrites "
                   "them, except rows written here that the source has not applied.")
@click.argument("name")
def channel_add(target: str, token: str | None, ca: str | None, sources: str,
                source_token: str, source_ca: str | None, source_id: int, replace: bool,
                seed: bool, merge: bool, name: str) -> None:
    """Make this cluster a replica of the cluster at --from (its leader runs the channel)."""
    pem = ""
    if source_ca:
        try:
            with open(source_ca) as f:
                pem = f.read()
        except OSError as exc:
            raise BadInput(f"--source-ca: cannot read {source_ca}: {exc.strerror}") from None
    addrs = [a.strip() for a in sources.split(",") if a.strip()]
    with _client(target, token, ca, 30.0) as c:
        res = _call(lambda: c.add_channel(name, addrs, source_id=source_id, token=source_token,
                                          ca_pem=pem, replace=replace, seed=seed,
                                          merge=merge))
    click.echo(res.message)


def _action(action: str) -> click.Command:
    @_target
    @_token
    @_ca
    @click.argument("name")
    def run(target: str, token: str | None, ca: str | None, name: str) -> None:
        with _client(target, token, ca, 30.0) as c:
            click.echo(_call(lambda: c.channel_action(name, action)).message)

    run.__doc__ = {"remove": "Remove a channel (what it replicated stays).",
                   "pause": "Stop a channel's runner; its position is kept.",
                   "resume": "Start a paused channel again from its position.",
                   "quarantine": "The replicated transactions a channel kept aside (a schema "
                                 "clash with this cluster): GTID, source epoch, cause, then "
                                 "the transaction."}[action]
    return channel.command(action)(run)


for _a in ("remove", "pause", "resume", "quarantine"):
    _action(_a)


@channel.command("resync")
@_target
@_token
@_ca
@click.option("--yes", is_flag=True, help="Do it (without: report what it would change).")
@click.argument("name")
def channel_resync(target: str, token: str | None, ca: str | None, yes: bool,
                   name: str) -> None:
    """Bring a channel that fell behind its source's log back from a snapshot of the
    source: reports what it would overwrite and keep first; --yes does it."""
    with _client(target, token, ca, 120.0) as c:
        click.echo(_call(lambda: c.channel_action(name, "resync", timeout=120.0,
                                                  confirm=yes)).message)


@channel.command("list")
@_target
@_token
@_ca
def channel_list(target: str, token: str | None, ca: str | None) -> None:
    """One line per channel: name, source, state."""
    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    if not st.channels:
        click.echo("no channels")
    for ch in st.channels:
        click.echo(f"{ch.name}\tfrom {','.join(ch.sources)} (cluster {ch.source_id or '?'})"
                   f"\t{ch.state}")


@channel.command("status")
@_target
@_token
@_ca
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.argument("name", required=False)
def channel_status(target: str, token: str | None, ca: str | None, fmt: str,
                   name: str | None) -> None:
    """Per channel: source, state, connected node, applied source epoch, lag, last error;
    per peer cluster: max replicated epoch. Ask the leader for the live fields."""
    from google.protobuf import json_format

    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    chans = [ch for ch in st.channels if name is None or ch.name == name]
    if name is not None and not chans:
        raise BadInput(f"no channel {name!r} (channels: "
                       f"{', '.join(ch.name for ch in st.channels) or 'none'})")
    if fmt == "json":
        click.echo(json.dumps({
            "channels": [json_format.MessageToDict(ch, preserving_proto_field_name=True,
                                                   always_print_fields_with_no_presence=True)
                         for ch in chans],
            "peers": [json_format.MessageToDict(p, preserving_proto_field_name=True,
                                                always_print_fields_with_no_presence=True)
                      for p in st.peers]}, indent=2))
        return
    for line in channel_lines(chans):
        click.echo(line)
    for line in peer_lines(st.peers):
        click.echo(line)


@channel.command("drop-slot")
@_target
@_token
@_ca
@click.argument("name", metavar="CLUSTER/CHANNEL")
def channel_drop_slot(target: str, token: str | None, ca: str | None, name: str) -> None:
    """Drop the slot of another cluster's channel reading THIS cluster's log (admin): the
    log it holds is compacted at the next snapshot; its reader, if it ever returns behind
    the log, must resync."""
    with _client(target, token, ca, 30.0) as c:
        click.echo(_call(lambda: c.channel_action(name, "drop-slot")).message)


def slot_lines(st: gateway_pb2.StatusResponse) -> list[str]:
    """``gateway channel slots``: one line per slot of this cluster's log, then the log's
    retained span and what holds it (a ``StatusResponse``)."""
    import datetime

    out = []
    for s in st.slots:
        sl = s.slot
        at = datetime.datetime.fromtimestamp(sl.acked_at_ns / 1e9, datetime.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ") if sl.acked_at_ns else "-"
        line = (f"slot {sl.reader_cluster_id}/{sl.channel}\tacked epoch {sl.acked_epoch} "
                f"(log index {sl.log_index}) at {at}\tholds {s.held_entries} entries "
                f"({s.held_bytes} bytes)")
        if s.holds_log:
            line += "\tholds the log's start"
        if sl.lost:
            line += f"\tLOST: {sl.lost_reason} (the reader must resync)"
        out.append(line)
    if not out:
        out.append("no slots (no channel of another cluster reads this log)")
    r = st.retention
    bounds = ", ".join(f"{k} {v}" for k, v in (("max_entries", r.max_entries),
                                              ("max_bytes", r.max_bytes),
                                              ("max_age_s", r.max_age_s)) if v) or "none"
    out.append(f"log from index {r.first_index} (epoch {r.first_epoch}), next compaction "
               f"held by {r.held_by or '-'}; retention bounds: {bounds}")
    return out


@channel.command("slots")
@_target
@_token
@_ca
def channel_slots(target: str, token: str | None, ca: str | None) -> None:
    """The slots of other clusters' channels reading THIS cluster's log: reader, acked
    position, when, the log it holds, lost or not; then the retained span and what holds
    it."""
    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    for line in slot_lines(st):
        click.echo(line)
