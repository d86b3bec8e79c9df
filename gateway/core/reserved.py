"""Table names clients may not write: the one rule the API, the SQL authorizer and the
conflict machinery share (docs/node.md, "Security"; docs/conflicts.md).

The product writes some tables itself, and a client row in one of them would pass for the
product's own bookkeeping:

- ``_gateway_*``: the embedded SQLite applier's applied GTIDs, SQL statements and table
  schemas (one forged row there makes every node refuse its next start); ``sqlite_*``: SQLite's
  own (both also refused by ``logrules.table_name_problem``, reads included);
- ``*$EX``: the conflict exceptions tables (``schema.table$EX``, MySQL's layout), written by
  the conflict machinery when it rejects a replicated change. Operators may delete handled
  rows: a row DELETE statement on a ``$EX`` table by a caller holding the ``admin``
  permission (or any caller of a node without tokens) is allowed, nothing else;
- the apply-status tables the appliers keep (``APPLY_STATUS_TABLE`` = ``gateway.apply_status``;
  the SQLite applier names tables by their table name alone, so ``apply_status`` is reserved
  in every schema, and the Cassandra applier's ``gateway_apply_status`` likewise).

Names are compared without case (SQLite's identifiers are case-insensitive). Pure functions.
"""

from __future__ import annotations

from .logrules import RESERVED_TABLE_PREFIXES

__all__ = ["APPLY_STATUS_NAMES", "EXCEPTIONS_SUFFIX", "is_exceptions_table",
           "reserved_table_problem", "reserved_write_problem"]

#: The suffix of conflict exceptions tables (``shop.items$EX``).
EXCEPTIONS_SUFFIX = "$EX"
#: Table names (any schema, any case) the appliers keep apply-status rows in.
APPLY_STATUS_NAMES = ("apply_status", "gateway_apply_status")


def is_exceptions_table(table: str) -> bool:
    """Whether ``table`` (the table name, without its schema) is a conflict exceptions table."""
    return table.casefold().endswith(EXCEPTIONS_SUFFIX.casefold())


def reserved_table_problem(table: str) -> str | None:
    """Why clients may not write table ``table`` (the name without its schema), or None."""
    folded = table.casefold()
    for prefix in RESERVED_TABLE_PREFIXES:
        if folded.startswith(prefix):
            return f"table names starting with {prefix!r} are reserved"
    if is_exceptions_table(table):
        return (f"tables ending in {EXCEPTIONS_SUFFIX!r} hold conflict exceptions, written by "
                f"the gateway (an admin token may DELETE handled rows)")
    if folded in APPLY_STATUS_NAMES:
        return f"{table!r} is the name of the gateway's apply-status table"
    return None


def reserved_write_problem(table: str, kind: str, *, admin: bool) -> str | None:
    """Why a client's row statement of ``kind`` (``insert``, ``update``, ``delete``) may not
    write ``table``, or None: :func:`reserved_table_problem`, except a ``delete`` of rows of a
    ``$EX`` table by a caller with the ``admin`` permission."""
    reason = reserved_table_problem(table)
    if reason is None:
        return None
    if is_exceptions_table(table) and kind == "delete" and admin:
        return None
    if is_exceptions_table(table) and kind == "delete":
        return (f"deleting rows of a {EXCEPTIONS_SUFFIX!r} table needs the admin "
                f"permission")
    return reason
