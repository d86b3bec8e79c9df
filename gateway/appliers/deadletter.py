"""The dead-letter log: operations an applier gave up on, kept until an operator acts.

One file per applier, ``directory/<applier>.deadletters``, a record stream (it begins with
``FE FD``) of two tagged messages: ``DeadLetter`` (tag 113; an operation, or a whole
transaction the reducer rejected, with its error and attempt count) and
``DeadLetterResolution`` (tag 114; letter ``id`` was replayed or discarded). Both are only
ever appended and fsynced, so the log is also the audit trail. A letter without a resolution
is *open*. Ids are 1, 2, 3, ... per file.

``gateway deadletter list|replay|discard`` are thin commands over ``DeadLetterLog``.

Every letter added is also logged at warning level (logger ``gateway.deadletter``: letter id,
applier, table, key, GTID, log index, error), rate-limited per applier to a burst of 10 and one
line a second after it; the next line logged says how many were suppressed meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gateway.core import messages, records
from gateway.core.fileio import FileSystem, local_fs
from gateway.core.messages import MessageDecodeError
from gateway.core.ratelimit import LogRateLimiter
from gateway.core.rowops import RowOp, op_from_proto, op_to_proto
from gateway.core.stuffing import SEPARATOR
from gateway.v1 import applier_pb2, transaction_pb2

__all__ = ["DeadLetterError", "DeadLetterLog", "Letter"]

Action = applier_pb2.DeadLetterResolution.Action

log = logging.getLogger("gateway.deadletter")


def describe_item(item: RowOp | transaction_pb2.Transaction) -> str:
    """``table key (..) gtid S:T log index I`` of an operation, or the GTID and tables of a
    transaction segment: what an operator needs to find the row."""
    if isinstance(item, RowOp):
        if item.sql is not None:
            what = f"SQL statement {item.statement}"
        else:
            what = f"{item.table} key {item.key!r}"
        return (f"{what} gtid {item.gtid.server_id}:{item.gtid.trans_id} "
                f"log index {item.log_index}")
    names: set[str] = set()
    for stmt in item.statements:
        kind = stmt.WhichOneof("kind")
        table = getattr(getattr(stmt, kind), "table", None) if kind else None
        if table is not None:
            names.add(f"{table.schema_name}.{table.table_name}")
    return (f"transaction gtid {item.gtid.server_id}:{item.gtid.trans_id} "
            f"(tables {', '.join(sorted(names)) or '-'})")


class DeadLetterError(Exception):
    """The dead-letter log cannot be read or written, or an id is unknown; one line."""


@dataclass(frozen=True, slots=True)
class Letter:
    """A dead letter read back: the message and its resolution (``None`` while open)."""

    message: applier_pb2.DeadLetter
    resolution: applier_pb2.DeadLetterResolution | None

    @property
    def id(self) -> int:
        return self.message.id

    @property
    def is_open(self) -> bool:
        return self.resolution is None

    def operation(self) -> RowOp | None:
        """The dead operation, or ``None`` if the letter holds a whole transaction."""
        if self.message.WhichOneof("item") == "operation":
            return op_from_proto(self.message.operation)
        return None

    def transaction(self) -> transaction_pb2.Transaction | None:
        if self.message.WhichOneof("item") == "transaction":
            return self.message.transaction
        return None


class DeadLetterLog:
    """Append-only dead-letter file of one applier. Thread-safe within one process."""

    def __init__(self, directory: str | os.PathLike[str], applier: str, *,
                 fs: FileSystem | None = None) -> None:
        self.applier = applier
        self.path = Path(directory) / f"{applier}.deadletters"
        self._fs = fs or local_fs()
        self._lock = threading.Lock()
        self._next_id: int | None = None
        self._log_limit = LogRateLimiter(burst=10, per_seconds=10.0)
        # An append failed (its fsync may have lost the pages it could not write): the next
        # one rewrites the file whole, with its valid records, instead of appending after a
        # record the disk may not hold (which would read as damage before valid letters).
        self._suspect = False

    # -- writing -------------------------------------------------------------------------------

    def _append(self, msg: applier_pb2.DeadLetter | applier_pb2.DeadLetterResolution) -> None:
        record = records.encode_record(messages.pack(msg))
        path = str(self.path)
        try:
            self._fs.makedirs(str(self.path.parent))
            if self._suspect and self._fs.exists(path):
                kept = [records.encode_record(r.payload)
                        for r in records.scan(self._fs.read_all(path))]
                self._fs.write_atomic(path, SEPARATOR + b"".join(kept) + record)
            else:
                self._fs.append_synced(path, record, boundary=SEPARATOR)
            self._suspect = False
        except OSError as exc:
            self._suspect = True
            raise DeadLetterError(f"{self.path}: cannot write: "
                                  f"{exc.strerror or exc}") from exc  # errno kept

    def add(self, item: RowOp | transaction_pb2.Transaction, error: BaseException, *,
            attempts: int, log_index: int = 0) -> int:
        """Append a dead letter for ``item`` failed with ``error``; return its id."""
        text = " ".join(str(error).split()) or type(error).__name__
        msg = applier_pb2.DeadLetter(
            applier=self.applier, attempts=attempts, error_type=type(error).__name__,
            error=text[:2000], failed_at_ns=time.time_ns(),
            log_index=item.log_index if isinstance(item, RowOp) else log_index)
        if isinstance(item, RowOp):
            msg.operation.CopyFrom(op_to_proto(item))
        else:
            msg.transaction.CopyFrom(item)
        with self._lock:
            if self._next_id is None:
                self._next_id = max((m.id for m in self._messages()
                                     if isinstance(m, applier_pb2.DeadLetter)), default=0) + 1
            msg.id = self._next_id
            self._append(msg)
            self._next_id += 1
        admitted, suppressed = self._log_limit.admit()
        if admitted:
            more = (f" ({suppressed} more dead letters of this applier not logged)"
                    if suppressed else "")
            log.warning("dead letter #%d of applier %s: %s%s: %s: %s", msg.id, self.applier,
                        describe_item(item), f" at log index {log_index}"
                        if not isinstance(item, RowOp) and log_index else "",
                        msg.error_type, msg.error + more)
        return msg.id

    def resolve(self, letter_id: int, action: applier_pb2.DeadLetterResolution.Action,
                note: str = "") -> None:
        """Close open letter ``letter_id`` as ``REPLAYED`` or ``DISCARDED``; raises
        ``DeadLetterError`` if it is unknown or already closed."""
        with self._lock:
            letters = {letter.id: letter for letter in self._letters()}
            letter = letters.get(letter_id)
            if letter is None:
                raise DeadLetterError(f"{self.path}: no dead letter {letter_id}")
            if letter.resolution is not None:  # not open
                raise DeadLetterError(f"{self.path}: dead letter {letter_id} is already "
                                      f"{Action.Name(letter.resolution.action).lower()}")
            self._append(applier_pb2.DeadLetterResolution(
                id=letter_id, action=action, resolved_at_ns=time.time_ns(), note=note))

    def check(self) -> str | None:
        """Check the file's records. Damage followed by valid records (letters that can no
        longer be read) raises ``DeadLetterError`` naming the file and byte offset; a damaged
        tail (an append interrupted by a crash, never acknowledged) is returned as a one-line
        description (``None`` when the file is intact or missing)."""
        try:
            data = self._fs.read_all(str(self.path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DeadLetterError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        report = records.verify(data)
        if not data:
            return f"{self.path}: byte 0: empty file (no letters)"
        for damage in report.damaged:
            if not (report.torn_tail and damage is report.damaged[-1]):
                raise DeadLetterError(
                    f"{self.path}: byte {damage.start}: {damage.end - damage.start} damaged "
                    f"bytes before valid letters (letters in them are lost; inspect with "
                    f"`gateway deadletter list` and move the file aside to continue)")
        if report.torn_tail:
            last = report.damaged[-1]
            return f"{self.path}: byte {last.start}: torn tail of {last.end - last.start} bytes"
        list(self._messages())  # a valid record that does not decode raises
        return None

    @property
    def torn_path(self) -> Path:
        """Where `recover_tail` keeps the bytes of a letter cut short: ``<log>.torn``."""
        return self.path.with_name(self.path.name + ".torn")

    def recover_tail(self) -> str | None:
        """Check the file as :meth:`check` does (damage before valid letters raises) and deal
        with a damaged tail so that the next append cannot turn it into damage before valid
        letters, never dropping a letter silently. Returns one line saying what was found
        and done (file and byte offset), or ``None`` when the file is intact or missing:

        - the last letter intact but the separator after it cut short (the file ends with
          the separator's first byte): the separator is completed; every letter is kept;
        - the last record cut short: its bytes are appended to `torn_path` (fsynced, one
          fragment after a separator each) and cut from the log; they count in :meth:`count`.
        """
        with self._lock:
            found = self.check()
            if found is None or not self._fs.exists(str(self.path)):
                return found
            data = self._fs.read_all(str(self.path))
            if not data:
                return found
            report = records.verify(data)
            if not report.torn_tail:
                return found
            last = report.damaged[-1]
            try:
                if data.endswith(SEPARATOR[:1]) and \
                        not records.verify(data + SEPARATOR[1:]).damaged:
                    self._fs.append_synced(str(self.path), SEPARATOR[1:])
                    return (f"{self.path}: byte {len(data) - 1}: the separator after the last "
                            f"dead letter was cut short; completed it (every letter kept)")
                self._fs.append_synced(str(self.torn_path), data[last.start:last.end],
                                       boundary=SEPARATOR)
                self._fs.write_atomic(str(self.path), data[:last.start])
            except OSError as exc:
                raise DeadLetterError(
                    f"{self.path}: cannot set aside its damaged tail: "
                    f"{exc.strerror or exc}") from None
            return (f"{self.path}: byte {last.start}: a dead letter cut short "
                    f"({last.end - last.start} bytes) cannot be read; its bytes are kept in "
                    f"{self.torn_path} (counted as a dead letter; not in `gateway deadletter "
                    f"list`)")

    def count(self) -> int:
        """Dead letters on disk: every letter of the log, open or resolved (ids are never
        reused), plus every unreadable fragment `recover_tail` kept in `torn_path`."""
        with self._lock:
            letters = sum(1 for m in self._messages() if isinstance(m, applier_pb2.DeadLetter))
            try:
                torn = self._fs.read_all(str(self.torn_path))
            except FileNotFoundError:
                torn = b""
            except OSError as exc:
                raise DeadLetterError(
                    f"{self.torn_path}: cannot read: {exc.strerror or exc}") from None
            return letters + sum(1 for part in torn.split(SEPARATOR) if part)

    # -- reading -------------------------------------------------------------------------------

    def _messages(self) -> Iterator[object]:
        try:
            data = self._fs.read_all(str(self.path))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise DeadLetterError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        for rec in records.scan(data):
            try:
                yield messages.unpack(rec.payload, base_offset=rec.offset)
            except MessageDecodeError as exc:
                raise DeadLetterError(f"{self.path}: {exc}") from None

    def _letters(self) -> list[Letter]:
        letters: dict[int, applier_pb2.DeadLetter] = {}
        resolutions: dict[int, applier_pb2.DeadLetterResolution] = {}
        for msg in self._messages():
            if isinstance(msg, applier_pb2.DeadLetter):
                letters[msg.id] = msg
            elif isinstance(msg, applier_pb2.DeadLetterResolution):
                resolutions.setdefault(msg.id, msg)
        return [Letter(m, resolutions.get(i)) for i, m in sorted(letters.items())]

    def letters(self, *, include_closed: bool = False) -> list[Letter]:
        """Letters in id order: the open ones, or all with ``include_closed``."""
        with self._lock:
            return [x for x in self._letters() if include_closed or x.is_open]

    def get(self, letter_id: int) -> Letter:
        for letter in self.letters(include_closed=True):
            if letter.id == letter_id:
                return letter
        raise DeadLetterError(f"{self.path}: no dead letter {letter_id}")
