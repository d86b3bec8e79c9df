"""Guards of the state machine's replicated-epoch path (docs/conflicts.md, "Guards").

Three decisions the state machine takes on every node alike when it applies a replicated
epoch, kept here so ``state_machine`` only calls them:

- ``check_ruled_shapes``: a conflict rule is checked against the shape of every table it
  judges when an epoch first brings a change of that table -- so a rule set before its table
  existed (``NDB$MAX(ts)`` with ``ts`` then written as VARCHAR) is refused with the reason
  instead of comparing strings;
- quarantine (``quarantine_op``, ``read_quarantined``): a replicated transaction whose
  statements clash with this cluster's first-seen schema of a table (the same table first
  written with other columns elsewhere) is not applied; its GTID counts as applied (so it is
  not fetched again and the channel goes on with every other transaction) and the whole
  transaction is kept, with its cause, under ``m qt:<channel>:<server_id>:<trans_id>`` --
  counted in the channel's ``quarantined_trans_count`` and listed by ``gateway channel
  quarantine NAME``;
- ``derived_problem``: the exception rows of a conflict that cannot be written (an
  application wrote ``schema.table$EX`` with another shape first) refuse the epoch, so the
  channel stops with the reason instead of dropping the exceptions and the refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from gateway.conflict import ConflictConfigError, RuleSet
from gateway.core.reserved import EXCEPTIONS_SUFFIX
from gateway.node.base.validation import InvalidRequest, TableSchema, check_statements
from gateway.node.state import keys
from gateway.v1 import replication_pb2, statement_pb2, transaction_pb2

__all__ = ["EXCEPTIONS_SUFFIX", "Quarantined", "check_ruled_shapes", "derived_problem",
           "emptied", "quarantine_op", "quarantine_prefix", "read_quarantined"]

# EXCEPTIONS_SUFFIX (re-exported): tables named ``schema.table$EX`` are the exceptions tables
# conflict detection writes; gateway.core.reserved keeps the one definition, with the rule
# that refuses clients' writes to them at the API.


def _tables(txns: Iterable[transaction_pb2.Transaction]) -> Iterator[tuple[str, str]]:
    for txn in txns:
        for stmt in txn.statements:
            kind = stmt.WhichOneof("kind")
            if kind in ("insert", "update", "delete"):
                t = getattr(stmt, kind).table
                yield t.schema_name, t.table_name


def check_ruled_shapes(txns: Iterable[transaction_pb2.Transaction], rules: RuleSet,
                       schemas: Mapping[str, TableSchema],
                       checked: dict[tuple[object, str], TableSchema]) -> None:
    """Raise ``ConflictConfigError`` naming the table when the rule that judges one of the
    tables ``txns`` change does not fit the table's known shape (a resolution column of a
    non-numeric type, or in its key; one the table has not had yet is left to the judgement,
    which takes a change without it as a conflict). ``checked`` remembers the shape each
    (rule, table) pair was last found good with (a shape is replaced, never changed).
    Exceptions tables are not checked: a pattern such as ``shop.*`` matches them, and they
    hold ``col$OLD`` / ``col$NEW``, never ``col``."""
    for schema, table in _tables(txns):
        if table.endswith(EXCEPTIONS_SUFFIX):
            continue
        rule = rules.rule_for(schema, table)
        if rule is None or not rule.args:
            continue
        name = f"{schema}.{table}"
        shape = schemas.get(name)
        if shape is None:
            continue
        seen = (rule, name)
        if checked.get(seen) is shape:
            continue
        columns = {**dict(shape.key_fields), **shape.columns}
        if rule.args[0] not in columns:
            # not written yet: a change without it is judged a conflict (the functions err
            # towards recording), and the column's type is checked once it is known
            continue
        try:
            rules.check(rule, columns)
        except ConflictConfigError as exc:
            raise ConflictConfigError(str(exc).replace(
                f"table {rule.pattern}:", f"table {name} (rule {rule.pattern}, set before "
                f"the table's shape was known):", 1)) from None
        if rule.args[0] in {k for k, _ in shape.key_fields}:
            raise ConflictConfigError(
                f"table {name} (rule {rule.pattern}): {rule.text}: column {rule.args[0]!r} "
                f"is part of the primary key; the resolution column must be one the writers "
                f"set on every change")
        checked[seen] = shape


def derived_problem(exceptions: list[statement_pb2.Statement],
                    schemas: Mapping[str, TableSchema]) -> str | None:
    """Why the exception rows of a judged epoch cannot be written here, or None."""
    if not exceptions:
        return None
    try:
        check_statements(exceptions, dict(schemas), rows=False)
    except InvalidRequest as exc:
        tables = sorted({f"{s.insert.table.schema_name}.{s.insert.table.table_name}"
                         for s in exceptions})
        return (f"cannot record this epoch's conflicts in {', '.join(tables)}: {exc}; the "
                f"$EX suffix is reserved for the exceptions tables conflict detection writes "
                f"-- the epoch is neither applied nor dropped: the channel stops here (a "
                f"table's shape never changes: unset the table's conflict rule to apply it "
                f"unjudged, or re-seed this cluster without that table)")
    return None


def emptied(txn: transaction_pb2.Transaction) -> transaction_pb2.Transaction:
    """``txn`` with its GTID, times and author but no statements (what a transaction that
    is not applied here leaves in the epoch, as one rejected whole by conflicts does)."""
    out = transaction_pb2.Transaction()
    out.CopyFrom(txn)
    del out.statements[:]
    return out


def _qkey(channel: str, server_id: int, trans_id: int) -> bytes:
    return keys.meta_key(f"qt:{channel}:{server_id:010d}:{trans_id:020d}")


def quarantine_op(unit: replication_pb2.ReplicatedEpoch, txn: transaction_pb2.Transaction,
                  cause: str) -> tuple[bytes, bytes, int, int, int]:
    """The store op keeping ``txn`` (of replicated epoch ``unit``) quarantined with
    ``cause``: a ``ReplicatedEpoch`` of that one transaction (channel, source, epochs), after
    the cause and a NUL byte."""
    rec = replication_pb2.ReplicatedEpoch(channel=unit.channel, source_id=unit.source_id,
                                          source_epoch=unit.source_epoch,
                                          local_epoch=unit.local_epoch)
    rec.items.add(transaction=txn)
    g = txn.gtid
    return (_qkey(unit.channel, g.server_id, g.trans_id),
            cause.replace("\0", " ").encode() + b"\0" + rec.SerializeToString(), 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One quarantined transaction: where it came from, why, and the transaction."""

    channel: str
    source_id: int
    source_epoch: int
    local_epoch: int
    cause: str
    transaction: transaction_pb2.Transaction

    @property
    def gtid(self) -> str:
        g = self.transaction.gtid
        return f"{g.server_id}:{g.trans_id}"


def read_quarantined(scan: Iterable[tuple[bytes, bytes]]) -> list[Quarantined]:
    """Decode the records of a scan of ``m qt:<channel>:`` (see ``quarantine_op``)."""
    out = []
    for _, raw in scan:
        cause, _, body = raw.partition(b"\0")
        rec = replication_pb2.ReplicatedEpoch.FromString(body)
        out.append(Quarantined(rec.channel, rec.source_id, rec.source_epoch, rec.local_epoch,
                               cause.decode(errors="replace"), rec.items[0].transaction))
    return out


def quarantine_prefix(channel: str) -> bytes:
    """The store prefix of channel ``channel``'s quarantined transactions."""
    return keys.meta_key(f"qt:{channel}:")
