"""Listing, replaying and discarding dead letters: the one implementation behind the node's
``DeadLetters`` / ``DeadLetterAction`` RPCs and ``gateway deadletter --state-dir`` (offline,
on a node's or ``gateway apply``'s state directory).

A replay delivers a letter's operations (a whole transaction's, reduced) to the applier again,
now, after everything applied since it failed; a letter whose operations all apply is closed
as ``REPLAYED``, one that fails again stays open (``still-failing`` with the error). A discard
closes open letters without applying them. Both append resolutions to the log
(``DeadLetterLog.resolve``): the log stays the audit trail.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.appliers.contract import Applier
from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog, Letter
from gateway.core.reducer import reduce_ops
from gateway.core.rowops import RowOp, statement_ops
from gateway.v1 import applier_pb2, gateway_pb2

__all__ = ["act", "describe", "list_page"]

Action = applier_pb2.DeadLetterResolution.Action
_DEFAULT_LIMIT, _MAX_LIMIT = 100, 10000


def describe(letter: Letter, applier: str) -> gateway_pb2.DeadLetterInfo:
    """A letter as the API and the CLI show it."""
    msg = letter.message
    info = gateway_pb2.DeadLetterInfo(
        applier=applier, id=msg.id, log_index=msg.log_index, attempts=msg.attempts,
        error_type=msg.error_type, error=msg.error, failed_at_ns=msg.failed_at_ns,
        state="open" if letter.resolution is None else
        Action.Name(letter.resolution.action).lower(),
        letter=msg.SerializeToString())
    op = letter.operation()
    if op is not None:
        info.gtid = f"{op.gtid.server_id}:{op.gtid.trans_id}"
        info.kind = op.kind.name
        if op.sql is not None:
            info.kind, info.table = "SQL", ""
            info.key = op.sql.query
        else:
            info.table = str(op.table)
            info.key = ", ".join(repr(v) for v in op.key)
    else:
        txn = letter.transaction()
        assert txn is not None  # a letter holds a row operation or a transaction
        info.gtid = f"{txn.gtid.server_id}:{txn.gtid.trans_id}"
        info.kind = "TRANSACTION"
    return info


def list_page(log: DeadLetterLog, *, include_closed: bool = False, after_id: int = 0,
              limit: int = 0) -> tuple[list[gateway_pb2.DeadLetterInfo],
                                       gateway_pb2.DeadLetterCount, int]:
    """Up to ``limit`` letters with an id above ``after_id`` (open ones, or all), the
    applier's counts, and the id to continue after (0: no more). Raises
    ``DeadLetterError`` (one line naming the file) when the log cannot be read, and
    ``ValueError`` for a limit above the bound."""
    limit = limit or _DEFAULT_LIMIT
    if limit > _MAX_LIMIT:
        raise ValueError(f"limit {limit}: at most {_MAX_LIMIT}")
    every = log.letters(include_closed=True)
    count = gateway_pb2.DeadLetterCount(applier=log.applier, total=len(every),
                                        open=sum(1 for x in every if x.is_open))
    chosen = [x for x in every if x.id > after_id and (include_closed or x.is_open)]
    page = chosen[:limit]
    more = page[-1].id if len(chosen) > limit else 0
    return [describe(x, log.applier) for x in page], count, more


def ops_of(letter: Letter) -> list[RowOp]:
    """The operations a replay delivers: the letter's one, or its transaction's, reduced."""
    op = letter.operation()
    if op is not None:
        return [op]
    txn = letter.transaction()
    assert txn is not None
    return reduce_ops(statement_ops(txn, letter.message.log_index))


def act(log: DeadLetterLog, action: str, ids: Sequence[int], *, every: bool = False,
        applier: Applier | None = None, note: str = ""
        ) -> list[gateway_pb2.DeadLetterOutcome]:
    """Replay (through ``applier``) or discard the letters ``ids`` (or every open one), in
    id order; one outcome per letter: replayed | discarded | still-failing. Raises
    ``ValueError`` for an unknown action, nothing chosen, or a letter that is unknown or
    not open (before acting on any), and ``DeadLetterError`` when the log cannot be read or
    written. Blocking (file I/O and the applier's own): call it off the event loop."""
    if action not in ("replay", "discard"):
        raise ValueError(f"action {action!r}: give replay or discard")
    if not ids and not every:
        raise ValueError("name dead letter ids or pass all")
    if action == "replay" and applier is None:
        raise ValueError("a replay needs the applier")
    letters = {x.id: x for x in log.letters(include_closed=True)}
    wanted = sorted(x.id for x in letters.values() if x.is_open) if every \
        else list(dict.fromkeys(ids))
    for i in wanted:  # every id checked before any is acted on
        if i not in letters:
            raise ValueError(f"dead letter {i} is unknown (applier {log.applier})")
        if not letters[i].is_open:
            raise ValueError(f"dead letter {i} is not open (applier {log.applier})")
    out: list[gateway_pb2.DeadLetterOutcome] = []
    for i in wanted:
        o = gateway_pb2.DeadLetterOutcome(id=i)
        out.append(o)  # a plain list: o itself, filled below
        letter = letters[i]
        if action == "discard":
            log.resolve(i, applier_pb2.DeadLetterResolution.DISCARDED, note)
            o.outcome = "discarded"
            continue
        assert applier is not None
        try:
            for op in ops_of(letter):
                applier.apply([op])
        except DeadLetterError:
            raise
        except Exception as exc:  # any failure of the target keeps the letter open
            o.outcome, o.detail = "still-failing", f"{type(exc).__name__}: {exc}"
            continue
        log.resolve(i, applier_pb2.DeadLetterResolution.REPLAYED, note)
        o.outcome = "replayed"
    return out
