"""``gateway apply`` and ``gateway deadletter``: run the dispatcher, handle dead letters.

Exit codes: 0 success; 1 the run finished but operations were dead-lettered (or a replay
still fails), or the dispatcher stopped on a failure; 2 bad input (missing file, unknown
applier or option, damaged log), one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format

from gateway import plugins
from gateway.appliers.contract import Applier, ApplierConfigError, ApplierFactory, ApplyError
from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog
from gateway.appliers.deadletter_ops import act, list_page
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig, DispatcherError
from gateway.appliers.durable import reconcile
from gateway.appliers.position import PositionStoreError
from gateway.appliers.source import EntrySourceError, LogFileSource
from gateway.appliers.workers import RetryPolicy
from gateway.cli.plugins import BadInput, plugin_manager
from gateway.plugins import PluginError
from gateway.v1 import applier_pb2, gateway_pb2

__all__ = ["apply_command", "deadletter"]


class _Failed(click.ClickException):
    exit_code = 1


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"invalid -o {pair!r}: expected NAME=VALUE, e.g. path=out.db")
        out[key] = value
    return out


def _factory(ctx: click.Context, name: str) -> ApplierFactory:
    pm = plugin_manager(ctx)
    try:
        factories = plugins.applier_factories(pm)
    except PluginError as exc:
        raise BadInput(str(exc)) from None
    if name not in factories:
        raise BadInput(plugins.missing_applier(pm, name, list(factories)))
    return factories[name]


def _build(ctx: click.Context, name: str, pairs: tuple[str, ...]) -> Applier:
    try:
        return _factory(ctx, name).build(_options(pairs))
    except ApplierConfigError as exc:
        raise BadInput(str(exc)) from None


_applier_opt = click.option("--applier", "applier_name", default="sqlite", show_default=True,
                            help="Applier (from a loaded plugin) to apply to.")
_option_opt = click.option("-o", "--option", "option_pairs", multiple=True,
                           metavar="NAME=VALUE", help="Applier option (repeatable).")


@click.command("apply")
@click.argument("logfile", type=click.Path(dir_okay=False))
@_applier_opt
@_option_opt
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Positions and dead letters. [default: LOGFILE.state]")
@click.option("--threads", type=click.IntRange(1, 256), default=4, show_default=True)
@click.option("--window", type=click.IntRange(1), default=1, show_default=True,
              help="Transactions reduced together (window mode for bulk apply).")
@click.option("--no-reduce", is_flag=True, help="Apply the original statements, unreduced.")
@click.option("--max-attempts", type=click.IntRange(1), default=5, show_default=True,
              help="Attempts per operation before it is dead-lettered.")
@click.option("--follow", is_flag=True, help="Keep applying entries appended to LOGFILE.")
@click.option("--until", "max_index", type=click.IntRange(1), default=None,
              help="Stop after this log index.")
@click.pass_context
def apply_command(ctx: click.Context, logfile: str, applier_name: str,
                  option_pairs: tuple[str, ...], state_dir: str | None, threads: int,
                  window: int, no_reduce: bool, max_attempts: int, follow: bool,
                  max_index: int | None) -> None:
    """Apply the transactions of a standalone log file through an applier.

    Resumes from the applier's durable position in the state directory, so running it again
    applies only what was added since. Example:

        gateway apply log.bin -o path=out.db
    """
    pm = plugin_manager(ctx)
    try:
        source = LogFileSource(logfile)
    except EntrySourceError as exc:
        raise BadInput(str(exc)) from None
    applier = _build(ctx, applier_name, option_pairs)
    config = DispatcherConfig(threads=threads, window=window, reduce=not no_reduce,
                              retry=RetryPolicy(max_attempts=max_attempts))
    dispatcher = Dispatcher(applier, source, state_dir or f"{logfile}.state", config=config,
                            publish_metrics=plugins.publish_metrics(pm),
                            on_dead_letter=plugins.dead_letter_notifier(pm),
                            on_schema_event=plugins.schema_notifier(pm))
    try:
        # from what the target itself durably holds, when it can tell (appliers.durable)
        reconcile(applier, dispatcher.positions, dispatcher.positions.load(),
                  str(getattr(applier, "path", applier.name)))
        position = dispatcher.run(follow=follow, max_index=max_index)
    except EntrySourceError as exc:
        raise BadInput(str(exc)) from None
    except (DispatcherError, PositionStoreError, DeadLetterError, ApplyError) as exc:
        raise _Failed(str(exc)) from None
    except KeyboardInterrupt:
        position = dispatcher.position
    finally:
        applier.close()
    m = dispatcher.metrics
    click.echo(f"{applier.name}: applied {m.applied_ops} operations ({m.ops_in} before "
               f"reduction) from {m.entries_read} entries, {m.transactions} transactions, "
               f"{m.skipped} already applied, {m.rolled_back} rolled back")
    click.echo(f"position {position.log_index}, applied GTIDs {position.applied or '-'}")
    if m.dead_letters:
        raise _Failed(f"{m.dead_letters} operations dead-lettered; see `gateway deadletter "
                      f"list --state-dir {Path(dispatcher.dead_letters.path).parent}`")


# --- dead letters ---------------------------------------------------------------------------


@click.group("deadletter")
def deadletter() -> None:
    """List, replay or discard an applier's dead letters: on a running node (its
    DeadLetters / DeadLetterAction RPCs, --target), or offline on a state directory
    (--state-dir: the same code, on the files)."""


_state_opt = click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                          help="Offline: the state directory (`gateway apply`'s, or a "
                               "stopped node's DATA/appliers) instead of a node's RPCs.")
_dl_applier_opt = click.option("--applier", "applier_name", default=None,
                               help="Applier [default: list: every applier of the node; "
                                    "otherwise sqlite].")


def _log(state_dir: str, applier: str) -> DeadLetterLog:
    if not Path(state_dir).is_dir():
        raise BadInput(f"{state_dir}: no such state directory")
    return DeadLetterLog(state_dir, applier)


def _remote() -> Any:
    """The CLI's client helpers (imported late: ``gateway.cli.node`` imports gRPC)."""
    from gateway.cli import node

    return node


def _letter_line(d: gateway_pb2.DeadLetterInfo) -> str:
    what = d.key if d.kind == "SQL" else f"{d.table} {d.key}".strip()
    return (f"#{d.id} [{d.state}] {d.applier} index {d.log_index} gtid {d.gtid} {d.kind} "
            f"{what}: {d.error_type}: {d.error} (after {d.attempts} attempts)")


@deadletter.command("list")
@_state_opt
@_dl_applier_opt
@click.option("--all", "include_closed", is_flag=True, help="Include replayed and discarded.")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="Letters per applier in this page.")
@click.option("--after", "after_id", type=click.IntRange(0), default=0,
              help="Continue after this letter id (list prints it; one applier).")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True)
@click.option("--target", "-t", default="127.0.0.1:7070", show_default=True,
              envvar="GATEWAY_TARGET", help="API address of the node (HOST:PORT).")
@click.option("--token", envvar="GATEWAY_TOKEN", default=None, help="Bearer token.")
@click.option("--ca", envvar="GATEWAY_CA", default=None, type=click.Path(dir_okay=False),
              help="CA certificate for a TLS API.")
def list_command(state_dir: str | None, applier_name: str | None, include_closed: bool,
                 limit: int, after_id: int, fmt: str, target: str, token: str | None,
                 ca: str | None) -> None:
    """List open dead letters (all with --all), oldest first, a page per applier."""
    if state_dir is not None:
        try:
            letters, count, more = list_page(_log(state_dir, applier_name or "sqlite"),
                                             include_closed=include_closed,
                                             after_id=after_id, limit=limit)
        except DeadLetterError as exc:
            raise BadInput(str(exc)) from None
        counts = [count]
    else:
        node = _remote()
        with node._client(target, token, ca, 30.0) as c:
            res = node._call(lambda: c.dead_letters(
                applier_name or "", include_closed=include_closed, after_id=after_id,
                limit=limit))
        letters, counts, more = list(res.letters), list(res.counts), res.next_after_id
    for d in letters:
        if fmt == "jsonl":
            out = json_format.MessageToDict(d, preserving_proto_field_name=True)
            out["id"] = d.id
            out["message"] = json_format.MessageToDict(
                applier_pb2.DeadLetter.FromString(d.letter), preserving_proto_field_name=True)
            del out["letter"]
            click.echo(json.dumps(out, sort_keys=True))
            continue
        click.echo(_letter_line(d))
    if fmt == "text":
        for n in counts:
            click.echo(f"{n.applier}: {n.open} open dead letter(s) of {n.total}", err=True)
        if more:
            click.echo(f"more: --after {more}", err=True)


def _act(action: str, ids: tuple[int, ...], every: bool, state_dir: str | None,
         applier_name: str | None, note: str, target: str, token: str | None, ca: str | None,
         build: Any = None) -> list[gateway_pb2.DeadLetterOutcome]:
    if not ids and not every:
        raise BadInput("name dead letter ids or pass --all")
    name = applier_name or "sqlite"
    if state_dir is not None:
        log = _log(state_dir, name)
        applier = build(name) if action == "replay" else None
        try:
            return act(log, action, ids, every=every, applier=applier, note=note)
        except (ValueError, DeadLetterError) as exc:
            raise BadInput(str(exc)) from None
        finally:
            if applier is not None:
                applier.close()
    node = _remote()
    with node._client(target, token, ca, 120.0) as c:
        res = node._call(lambda: c.dead_letter_action(name, action, ids, every=every,
                                                      note=note, timeout=120.0))
    return list(res.outcomes)


_remote_opts = [
    click.option("--target", "-t", default="127.0.0.1:7070", show_default=True,
                 envvar="GATEWAY_TARGET", help="API address of the node (HOST:PORT)."),
    click.option("--token", envvar="GATEWAY_TOKEN", default=None,
                 help="Bearer token (admin)."),
    click.option("--ca", envvar="GATEWAY_CA", default=None, type=click.Path(dir_okay=False),
                 help="CA certificate for a TLS API."),
]


def _with_remote(fn: Any) -> Any:
    for opt in reversed(_remote_opts):
        fn = opt(fn)
    return fn


@deadletter.command("replay")
@click.argument("ids", nargs=-1, type=click.IntRange(1))
@click.option("--all", "every", is_flag=True, help="Replay every open dead letter.")
@_state_opt
@_dl_applier_opt
@_option_opt
@_with_remote
@click.pass_context
def replay_command(ctx: click.Context, ids: tuple[int, ...], every: bool,
                   state_dir: str | None, applier_name: str | None,
                   option_pairs: tuple[str, ...], target: str, token: str | None,
                   ca: str | None) -> None:
    """Deliver dead letters through the applier again, in id order; those that succeed are
    closed as replayed. On a node: through the applier it runs (admin permission); offline
    (--state-dir): through one built from -o options.

    A replayed operation is applied now, after everything applied since it failed.
    """
    outcomes = _act("replay", ids, every, state_dir, applier_name, "", target, token, ca,
                    build=lambda name: _build(ctx, name, option_pairs))
    failed = 0
    for o in outcomes:
        if o.outcome == "still-failing":
            failed += 1
            click.echo(f"#{o.id}: still failing: {o.detail}", err=True)
        else:
            click.echo(f"#{o.id}: {o.outcome}")
    if failed:
        raise _Failed(f"{failed} dead letter(s) still failing")


@deadletter.command("discard")
@click.argument("ids", nargs=-1, type=click.IntRange(1))
@click.option("--all", "every", is_flag=True, help="Discard every open dead letter.")
@click.option("--note", default="", help="Why (kept in the log).")
@_state_opt
@_dl_applier_opt
@_with_remote
def discard_command(ids: tuple[int, ...], every: bool, note: str, state_dir: str | None,
                    applier_name: str | None, target: str, token: str | None,
                    ca: str | None) -> None:
    """Close dead letters without applying them (the record stays in the log). On a node:
    admin permission."""
    for o in _act("discard", ids, every, state_dir, applier_name, note, target, token, ca):
        click.echo(f"#{o.id}: {o.outcome}")


def attach(main: click.Group) -> None:
    """Add ``apply`` and ``deadletter`` to the root group."""
    main.add_command(apply_command)
    main.add_command(deadletter)
