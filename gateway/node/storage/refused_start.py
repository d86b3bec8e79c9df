"""A refused start leaves the data directory as it found it (docs/node.md, "Damage and
recovery").

The node's start changes files before it knows whether it may start: the WAL's recovery cuts a
torn tail (journaled by ``RaftLogStorage``: ``undo_recovery``), the store takes its ``LOCK``,
an applier opens (or initializes) its database. When a later check refuses the start, the
operator's next step -- the next start, ``gateway log verify``, a backup -- must see the
damage as it was, and a second start must refuse the same way.

``paths_under`` lists the directory before the start; ``undo_refused_start`` puts the WAL's
changes back and removes what the start made. Before ``keep_recovery`` nothing was told to
another node, so everything goes; after it (the node may have voted or applied), only what the
start made outside ``raft/`` and ``store/`` (an applier's new database, SQLite's ``-wal`` and
``-shm``), the lock files, and the empty files there it wrote to (an applier that initialized
an empty database before refusing it) -- Raft and store state stay.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.node.storage.storage import RaftLogStorage

__all__ = ["paths_under", "remove_made", "undo_refused_start"]

log = logging.getLogger("gateway.node.server")

#: Top-level entries of a data directory that hold Raft and store state.
_STATE = ("raft", "store")


def paths_under(root: str) -> dict[str, int]:
    """Every file (its size) and directory (-1) under ``root``, by path relative to it."""
    out: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames:
            out[os.path.normpath(os.path.join(rel, name))] = -1
        for name in filenames:
            with contextlib.suppress(OSError):
                out[os.path.normpath(os.path.join(rel, name))] = \
                    os.lstat(os.path.join(dirpath, name)).st_size
    return out


def undo_refused_start(root: str, found: dict[str, int], storage: RaftLogStorage) -> None:
    """Undo what a refused start changed in the data directory ``root`` (``found``: its
    ``paths_under`` before the start; ``storage``: closed). See the module docstring."""
    undone = storage.recovery_pending()
    for path in storage.undo_recovery():
        log.info("refused start: put %s back as it was", path)
    now = paths_under(root)
    for rel, size in now.items():
        if found.get(rel) == 0 and size > 0 and _top(rel) not in _STATE:
            with contextlib.suppress(OSError):
                os.truncate(os.path.join(root, rel), 0)
    for rel in sorted(set(now) - set(found), key=lambda p: p.count(os.sep), reverse=True):
        if not undone and os.path.basename(rel) != "LOCK" and _top(rel) in _STATE:
            continue  # the node may have voted or applied: Raft and store state stay
        path = os.path.join(root, rel)
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)  # only when emptied by the removals before it
            else:
                os.remove(path)


def _top(rel: str) -> str:
    return rel.split(os.sep, 1)[0]


def remove_made(path: str, keep_dir: bool) -> None:
    """Remove what a failed start made in the data directory ``path``: its contents, and
    the directory itself unless it existed before (``keep_dir``: e.g. a mounted volume)."""
    if not keep_dir:
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            child = os.path.join(path, name)
            if os.path.isdir(child) and not os.path.islink(child):
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(child)
