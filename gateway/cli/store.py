"""``gateway store``: offline tools for an LSM store directory.

Exit codes: 0 the store is intact; 1 corruption found (one line per problem on stderr:
``corrupt: <file>: byte offset <n>: <reason>``); 2 bad input (no such directory, not a store,
the store is open elsewhere), one line on stderr, never a traceback.
"""

from __future__ import annotations

import click

from gateway.core.lsm.verify import NotAStoreError, verify_store

__all__ = ["store"]


class BadInput(click.ClickException):
    """Bad input: printed as ``Error: <message>`` on one line, exit code 2."""

    exit_code = 2


class _Corrupt(click.ClickException):
    """Corruption was found (already reported): exit code 1, nothing more printed."""

    exit_code = 1

    def show(self, file: object = None) -> None:
        pass


@click.group("store")
def store() -> None:
    """Inspect and verify LSM store directories."""


@store.command("verify")
@click.argument("directory")
def verify(directory: str) -> None:
    """Check every manifest record, table block and WAL record of DIRECTORY by checksum."""
    try:
        report = verify_store(directory)
    except NotAStoreError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"{directory}: {exc.strerror or exc}") from None
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    if not report.ok:
        for problem in report.problems:
            click.echo(f"corrupt: {problem}", err=True)
        raise _Corrupt("corruption found")
    click.echo(
        f"ok: {report.tables} tables, {report.entries} entries, {report.bytes} bytes, "
        f"applied index {report.applied_index}"
    )
