"""Storage failures as clients and operators see them: a gRPC code and one line.

A failure of the node's files reached clients as UNKNOWN with the internal class names and
absolute paths (``Unexpected <class 'WalFailedError'>: OSError: [Errno 28] ... /var/...``).
`client_error` turns one into a `~gateway.node.base.errors.StorageError`, whose class the API
maps to a code, naming the node and the file relative to the data directory:

- out of space (``ENOSPC``/``EDQUOT`` anywhere in the exception chain): `NoSpaceError`,
  RESOURCE_EXHAUSTED -- ``node 2: out of space: raft/wal/0000000000000001.wal``;
- damaged bytes (``WalCorruptionError``, the store's ``CorruptionError``): `DataLossError`,
  DATA_LOSS -- ``node 2: damaged data: store/000012.sst: byte 4096: block checksum ...``;
- any other ``OSError`` of a file (an fsync's ``EIO``), or a WAL or store that an earlier
  failure made inoperable: `StorageFailedError`, UNAVAILABLE -- the node stops and recovers
  from its durable files when restarted, and another node may serve meanwhile.

Anything else is not a storage failure (None): the caller handles it as before.
"""

from __future__ import annotations

import errno
import os

from gateway.core.lsm.errors import BackgroundError, CorruptionError
from gateway.core.wal.errors import WalCorruptionError, WalFailedError
from gateway.node.base.errors import DataLossError, NoSpaceError, StorageError, StorageFailedError

__all__ = ["client_error", "relative"]

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def relative(path: object, data_dir: str) -> str:
    """``path`` relative to ``data_dir`` when it lies inside it, else as it is."""
    text = os.fsdecode(path) if isinstance(path, str | bytes | os.PathLike) else str(path)
    try:
        base = os.path.abspath(data_dir)
        full = os.path.abspath(text)
        if os.path.commonpath([base, full]) == base:
            return os.path.relpath(full, base)
    except ValueError:
        pass
    return text


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not e for e in out):
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def client_error(exc: BaseException, data_dir: str, node_id: int) -> StorageError | None:
    """The client-facing error of storage failure ``exc`` (module docstring), or None when
    ``exc`` is not one. An error that is one already is returned as it is."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, StorageError):
            return e
    for e in chain:
        if isinstance(e, OSError) and e.errno in _NO_SPACE:
            where = relative(e.filename, data_dir) if e.filename else "its data directory"
            return NoSpaceError(f"node {node_id}: out of space: {where}")
    for e in chain:
        if isinstance(e, WalCorruptionError | CorruptionError):
            return DataLossError(f"node {node_id}: damaged data: "
                                 f"{relative(e.path, data_dir)}: byte {e.offset}: {e.reason}")
    for e in chain:
        if isinstance(e, OSError) and e.errno is not None:
            where = f"{relative(e.filename, data_dir)}: " if e.filename else ""
            return StorageFailedError(f"node {node_id}: storage failed: {where}"
                                      f"{e.strerror or errno.errorcode.get(e.errno, e.errno)}; "
                                      f"the node stops and recovers from its durable files "
                                      f"when restarted")
    if any(isinstance(e, WalFailedError | BackgroundError) for e in chain):
        return StorageFailedError(f"node {node_id}: storage failed earlier; the node stops and "
                                  f"recovers from its durable files when restarted")
    return None
