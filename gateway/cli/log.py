"""``gateway log``: write, dump and verify standalone log files (the seed's binlog tools).

Exit codes: 0 success; 1 the data is damaged (damaged byte ranges or undecodable records,
reported on stderr or in the report); 2 bad input (missing file, not a log, malformed option),
reported as one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import click

from gateway.cli import logtool
from gateway.cli.logtool import LogEntry, LogInputError, RecordProblem
from gateway.core import records

__all__ = ["log"]

_U32 = 2**32 - 1
_U64 = 2**64 - 1
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


class BadInput(click.ClickException):
    """Bad input: printed as ``Error: <message>`` on one line, exit code 2."""

    exit_code = 2


class _Damaged(click.ClickException):
    """Damaged data was found (already reported): exit code 1, nothing more printed."""

    exit_code = 1

    def show(self, file: object = None) -> None:
        pass


def _read(path: str, *, require_log: bool = True) -> bytes:
    try:
        return logtool.read_log(path, require_log=require_log)
    except LogInputError as exc:
        raise BadInput(str(exc)) from None


@click.group("log")
def log() -> None:
    """Write, dump and verify standalone log files (record streams of transactions)."""


@log.command("write")
@click.argument("file")
@click.argument("query")
@click.option("--server-id", type=click.IntRange(1, _U32), default=1, show_default=True,
              help="Origin cluster id (the GTID's server part).")
@click.option("--trans", "trans_id", type=click.IntRange(1, _U64), default=None,
              help="Transaction id. [default: the last one of --server-id in FILE, plus 1]")
@click.option("--set", "assignments", multiple=True, metavar="NAME=VALUE",
              help="A session variable the query uses as @NAME (repeatable).")
@click.option("--epoch", type=click.IntRange(0, _U64), default=0, show_default=True)
@click.option("--author", type=click.IntRange(0, _U32), default=None,
              help="Author cluster id. [default: --server-id]")
@click.option("--session-id", type=click.IntRange(0, _U64), default=0, show_default=True)
@click.option("--schema", "default_schema", default="", help="Default schema of the query.")
def write_command(
    file: str,
    query: str,
    server_id: int,
    trans_id: int | None,
    assignments: tuple[str, ...],
    epoch: int,
    author: int | None,
    session_id: int,
    default_schema: str,
) -> None:
    """Append a transaction holding QUERY, with its session variables, to FILE.

    FILE is created (starting with the FE FD separator) if it does not exist. Prints the
    transaction's global id.
    """
    variables = [_parse_assignment(a) for a in assignments]
    if trans_id is None:
        existing = _read(file) if os.path.lexists(file) else b""
        trans_id = logtool.next_trans_id(existing, server_id)
        if trans_id > _U64:
            raise BadInput(f"{file}: transaction ids of server {server_id} are exhausted")
    txn = logtool.sql_transaction(
        server_id=server_id,
        trans_id=trans_id,
        query=query,
        variables=variables,
        timestamp_ns=time.time_ns(),
        epoch=epoch,
        author=author,
        session_id=session_id,
        default_schema=default_schema,
    )
    try:
        logtool.append_transaction(file, txn)
    except LogInputError as exc:
        raise BadInput(str(exc)) from None
    click.echo(f"# Global Id: {logtool.format_gtid(txn.gtid)}")


def _parse_assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    name = name.removeprefix("@")
    if not sep or not _VARIABLE_NAME.fullmatch(name):
        raise BadInput(f"invalid --set {text!r}: expected NAME=VALUE, e.g. nick=mkindahl")
    return name, value


@log.command("dump")
@click.argument("file")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="text: SQL as the seed's binlog_reader; jsonl: JSON lines.")
@click.option("--from-gtid", default=None, metavar="S:T",
              help="Start at the first transaction of server S with trans id >= T.")
def dump_command(file: str, fmt: str, from_gtid: str | None) -> None:
    """Print the transactions of FILE.

    Damaged byte ranges and undecodable records are reported on stderr after the output, and
    the exit code is then 1.
    """
    try:
        start = logtool.parse_gtid(from_gtid) if from_gtid is not None else None
    except LogInputError as exc:
        raise BadInput(f"--from-gtid: {exc}") from None
    data = _read(file)
    problems: list[RecordProblem] = []
    try:
        for entry in _entries_from(data, start, problems):
            if fmt == "jsonl":
                click.echo(json.dumps(logtool.render_json(entry), ensure_ascii=False))
            else:
                for line in logtool.render_text(entry):
                    click.echo(line)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    report = records.verify(data)
    for damage in report.damaged:
        click.echo(f"{file}: damaged bytes [{damage.start}, {damage.end})", err=True)
    for problem in problems:
        click.echo(f"{file}: {problem}", err=True)
    if report.damaged or problems:
        raise _Damaged("")


def _entries_from(
    data: bytes, start: tuple[int, int] | None, problems: list[RecordProblem]
) -> Iterator[LogEntry]:
    """Entries of ``data`` from the first transaction at or after ``start``; collects problems."""
    started = start is None
    for item in logtool.iter_entries(data):
        if isinstance(item, RecordProblem):
            problems.append(item)
            continue
        if not started:
            gtid = logtool.transaction_gtid(item)
            if gtid is None or start is None or gtid[0] != start[0] or gtid[1] < start[1]:
                continue
            started = True
        yield item


@log.command("verify")
@click.argument("path")
def verify_command(path: str) -> None:
    """Check the record stream of PATH (a file, or every file directly in a directory).

    Prints one line per file: record count, size and damaged byte ranges. Exit code 1 if any
    file has damage (including a torn tail). Never modifies a file.

    A node's data directory (DATA: ``raft/`` and ``store/`` in it) is checked whole: the Raft
    WAL (below) and its ``meta``, the snapshots (with every file's CRC-32C), the store's
    ``MANIFEST`` and tables, the applier position and dead-letter files, the SQLite applier's
    database against its position and ``_gateway_applied_ranges``, and that the log still
    covers everything built from it. One ``damaged:`` line per problem, naming the file
    relative to DATA and the byte offset or log index.

    A node's Raft WAL directory (DATA/raft/wal: a ``meta`` file and ``*.wal`` segments) is
    checked the way the node's start would recover it, on a copy: every finding (torn tail,
    torn batch, damaged seal, ...) and any damage recovery may not resolve is printed with its
    file and byte offset. The compacted head of a segment (punched, records cut at its edges)
    is not damage.
    """
    target = Path(path)
    from gateway.node.state.data_verify import is_data_dir

    if target.is_dir() and is_data_dir(str(target)):
        _verify_data_dir(target)
        return
    if _is_raft_wal(target):
        if not _verify_raft_wal(target):
            raise _Damaged("")
        return
    if target.is_dir():
        files = sorted(p for p in target.iterdir() if p.is_file())
        damaged = total_records = 0
        for file in files:
            count, ok = _verify_file(file, require_log=False)
            total_records += count
            damaged += not ok
        click.echo(f"{target}: {len(files)} files, {total_records} records, {damaged} damaged")
    else:
        _, ok = _verify_file(target, require_log=True)
        damaged = int(not ok)
    if damaged:
        raise _Damaged("")


def _verify_data_dir(target: Path) -> None:
    """Check the node data directory ``target`` (``gateway.node.state.data_verify``); exit 1 with
    one line per problem."""
    from gateway.node.state.data_verify import verify_data_dir

    report = verify_data_dir(str(target))
    for line in report.summary:
        click.echo(line)
    for problem in report.problems:
        click.echo(f"damaged: {problem}")
    if not report.ok:
        click.echo(f"{target}: {len(report.problems)} problems")
        raise _Damaged("")
    click.echo(f"{target}: node data directory, ok")


def _is_raft_wal(target: Path) -> bool:
    return target.is_dir() and (target / "meta").is_file() and any(target.glob("*.wal"))


def _verify_raft_wal(directory: Path) -> bool:
    """Open a copy of the Raft WAL in ``directory`` with the WAL's own recovery and print what
    it finds (paths name the original files); True if it found nothing."""
    from gateway.core.wal import FsyncPolicy, SegmentedWal, WalError, WalOptions

    events: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gateway-verify-") as tmp:
        copy = os.path.join(tmp, "wal")
        shutil.copytree(directory, copy)

        def original(text: str) -> str:
            return text.replace(copy, str(directory))

        try:
            wal = SegmentedWal(copy, options=WalOptions(fsync=FsyncPolicy.NEVER),
                               on_recovery_event=lambda e: events.append(original(str(e))))
        except (WalError, ValueError) as exc:
            for event in events:
                click.echo(f"recovery: {event}")
            click.echo(f"damaged: {original(str(exc))}")
            return False
        problems: list[str] = []
        try:
            first, last = wal.first_index(), wal.last_index()
            # Open trusts a sealed segment's footer without reading its entries: read them all.
            lo = first
            while lo <= last:
                hi = min(last + 1, lo + 1024)
                wal.entries(lo, hi)
                lo = hi
            commit = wal.hard_state().commit
            if commit > last:
                problems.append(f"{directory}: the hard state says index {commit} was committed "
                                f"but the log ends at index {last}: committed entries lost")
        except WalError as exc:
            problems.append(original(str(exc)))
        finally:
            wal.close()
    for event in events:
        click.echo(f"recovery: {event}")
    for problem in problems:
        click.echo(f"damaged: {problem}")
    if problems:
        return False
    segments = len(list(directory.glob("*.wal")))
    verdict = "ok" if not events else f"{len(events)} findings (a start would repair them)"
    click.echo(f"{directory}: Raft WAL, {segments} segments, entries {first}..{last}, {verdict}")
    return not events


def _verify_file(file: Path, *, require_log: bool) -> tuple[int, bool]:
    data = _read(str(file), require_log=require_log)
    report = records.verify(data)
    line = f"{file}: {report.records} records, {len(data)} bytes"
    if report.ok:
        click.echo(f"{line}, ok")
    else:
        ranges = " ".join(f"[{d.start}, {d.end})" for d in report.damaged)
        torn = " (torn tail)" if report.torn_tail else ""
        click.echo(f"{line}, damaged {ranges}{torn}")
    return report.records, report.ok
