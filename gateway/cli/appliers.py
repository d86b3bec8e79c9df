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
from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog, Letter
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig, DispatcherError
from gateway.appliers.durable import reconcile
from gateway.appliers.position import PositionStoreError
from gateway.appliers.source import EntrySourceError, LogFileSource
from gateway.appliers.workers import RetryPolicy
from gateway.cli.plugins import BadInput, plugin_manager
from gateway.core.reducer import reduce_ops
from gateway.core.rowops import RowOp, statement_ops
from gateway.plugins import PluginError
from gateway.v1 import applier_pb2

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
                            on_dead_letter=plugins.dead_letter_notifier(pm))
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
    """List, replay or discard an applier's dead letters."""


_state_opt = click.option("--state-dir", type=click.Path(file_okay=False), required=True,
                          help="The state directory `gateway apply` used.")


def _log(state_dir: str, applier: str) -> DeadLetterLog:
    if not Path(state_dir).is_dir():
        raise BadInput(f"{state_dir}: no such state directory")
    return DeadLetterLog(state_dir, applier)


def _describe(letter: Letter) -> dict[str, Any]:
    msg = letter.message
    out: dict[str, Any] = {"id": msg.id, "log_index": msg.log_index, "attempts": msg.attempts,
                           "error_type": msg.error_type, "error": msg.error,
                           "state": "open" if letter.resolution is None else
                           applier_pb2.DeadLetterResolution.Action.Name(
                               letter.resolution.action).lower()}
    op = letter.operation()
    if op is not None:
        out.update(gtid=str(op.gtid), kind=op.kind.name, table=str(op.table),
                   key=[repr(v) for v in op.key])
        if op.sql is not None:
            out["query"] = op.sql.query
    else:
        txn = letter.transaction()
        assert txn is not None  # a letter holds a row operation or a transaction
        out.update(gtid=f"({txn.gtid.server_id},{txn.gtid.trans_id})", kind="TRANSACTION")
    return out


@deadletter.command("list")
@_state_opt
@_applier_opt
@click.option("--all", "include_closed", is_flag=True, help="Include replayed and discarded.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True)
def list_command(state_dir: str, applier_name: str, include_closed: bool, fmt: str) -> None:
    """List open dead letters (all with --all)."""
    try:
        letters = _log(state_dir, applier_name).letters(include_closed=include_closed)
    except DeadLetterError as exc:
        raise BadInput(str(exc)) from None
    for letter in letters:
        d = _describe(letter)
        if fmt == "jsonl":
            d["message"] = json_format.MessageToDict(letter.message,
                                                     preserving_proto_field_name=True)
            click.echo(json.dumps(d, sort_keys=True))
            continue
        what = d.get("query") or f"{d.get('table', '')} {', '.join(d.get('key', []))}".strip()
        click.echo(f"#{d['id']} [{d['state']}] index {d['log_index']} gtid {d['gtid']} "
                   f"{d['kind']} {what}: {d['error_type']}: {d['error']} "
                   f"(after {d['attempts']} attempts)")
    if fmt == "text":
        click.echo(f"{len(letters)} dead letter(s)", err=True)


def _select(log: DeadLetterLog, ids: tuple[int, ...], every: bool) -> list[Letter]:
    if not ids and not every:
        raise BadInput("name dead letter ids or pass --all")
    try:
        open_letters = {x.id: x for x in log.letters()}
        if every:
            return list(open_letters.values())
        chosen = []
        for i in ids:
            if i not in open_letters:
                state = "not open" if any(x.id == i for x in log.letters(include_closed=True)) \
                    else "unknown"
                raise BadInput(f"dead letter {i} is {state}")
            chosen.append(open_letters[i])
        return chosen
    except DeadLetterError as exc:
        raise BadInput(str(exc)) from None


def _ops_of(letter: Letter) -> list[RowOp]:
    op = letter.operation()
    if op is not None:
        return [op]
    txn = letter.transaction()
    assert txn is not None
    return reduce_ops(statement_ops(txn, letter.message.log_index))


@deadletter.command("replay")
@click.argument("ids", nargs=-1, type=click.IntRange(1))
@click.option("--all", "every", is_flag=True, help="Replay every open dead letter.")
@_state_opt
@_applier_opt
@_option_opt
@click.pass_context
def replay_command(ctx: click.Context, ids: tuple[int, ...], every: bool, state_dir: str,
                   applier_name: str, option_pairs: tuple[str, ...]) -> None:
    """Apply dead letters again, in id order; those that succeed are closed as replayed.

    A replayed operation is applied now, after everything applied since it failed.
    """
    log = _log(state_dir, applier_name)
    letters = _select(log, ids, every)
    applier = _build(ctx, applier_name, option_pairs)
    failed = 0
    try:
        for letter in letters:
            try:
                ops = _ops_of(letter)
                for op in ops:
                    applier.apply([op])
            except Exception as exc:  # any failure keeps the letter open
                failed += 1
                click.echo(f"#{letter.id}: still failing: {type(exc).__name__}: {exc}", err=True)
                continue
            log.resolve(letter.id, applier_pb2.DeadLetterResolution.REPLAYED)
            click.echo(f"#{letter.id}: replayed")
    finally:
        applier.close()
    if failed:
        raise _Failed(f"{failed} dead letter(s) still failing")


@deadletter.command("discard")
@click.argument("ids", nargs=-1, type=click.IntRange(1))
@click.option("--all", "every", is_flag=True, help="Discard every open dead letter.")
@click.option("--note", default="", help="Why (kept in the log).")
@_state_opt
@_applier_opt
def discard_command(ids: tuple[int, ...], every: bool, note: str, state_dir: str,
                    applier_name: str) -> None:
    """Close dead letters without applying them (the record stays in the log)."""
    log = _log(state_dir, applier_name)
    for letter in _select(log, ids, every):
        try:
            log.resolve(letter.id, applier_pb2.DeadLetterResolution.DISCARDED, note)
        except DeadLetterError as exc:
            raise BadInput(str(exc)) from None
        click.echo(f"#{letter.id}: discarded")


def attach(main: click.Group) -> None:
    """Add ``apply`` and ``deadletter`` to the root group."""
    main.add_command(apply_command)
    main.add_command(deadletter)
