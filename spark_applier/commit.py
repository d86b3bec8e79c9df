"""The commit protocol of a Parquet table directory, through Hadoop's ``FileSystem`` API.

A table directory (``ROOT/table=<schema>.<table>``, a local path or any Hadoop URI:
``file://``, ``hdfs://``, ``s3a://``...) holds versions of the table's rows and a commit log::

    _data/<version>-<uuid>/part-*.parquet, _SUCCESS     one complete version per directory
    _commits/<version:020d>.json                         {"version": N, "data": "<dir name>"}
    _schema/<table version:020d>.json                     the declared definition (below)

The current version is the highest-numbered commit file that parses and names a data
directory holding ``_SUCCESS``; readers follow it (``TableCommits.current``), never list
``_data``. A new version is published in three steps, none of which renames anything:

1. write the rows to a fresh ``_data/<N+1>-<uuid>`` (Spark's own job commit, ``_SUCCESS``);
2. create ``_commits/<N+1>.json`` (exclusive create: one writer wins);
3. delete the versions before ``N+1`` (their commits, then their data).

A crash after step 1 leaves a data directory no commit names: ``recover`` (run before every
write) deletes it -- the unit is rolled back and redone, since the applied position is saved
only after the unit. A torn commit file does not parse and is deleted the same way. A crash
after step 2 is finished by ``recover`` (step 3). All of this works where renames are
copies (object stores) because only whole new files are created and old ones deleted.

A table a schema event has reached also keeps its definition after each event
(``declare``; ``parquet_schema.Declared``): one file per table version (a replayed event
finds its file made), the highest that parses being the current one (``declared``). It is
not part of a version: the rows after the event are fitted to it.

Everything goes through the JVM's ``org.apache.hadoop.fs`` (``spark._jvm``) with the session's
Hadoop configuration, so the driver needs no local view of the storage. A Spark Connect client
has no driver JVM: ``TableCommits`` refuses such a session (``connect.ConnectUnsupported``).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable
from typing import Any

from .connect import refuse_connect

__all__ = ["TableCommits", "table_uri"]

NEEDS_JVM = "commits each version through Hadoop's FileSystem in the driver's JVM (spark._jvm)"
_COMMIT = re.compile(r"^(\d{20})\.json$")


def table_uri(root: str) -> str:
    """``root`` as a URI every executor resolves alike: a local path becomes an absolute
    ``file:`` URI (resolved on the driver), a URI is kept."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", root):
        return root.rstrip("/")
    return "file://" + os.path.abspath(root)


class TableCommits:
    """The versions of one table directory ``uri``; ``fault(step)`` (tests) is called after
    each step of ``publish``: ``"data"``, ``"commit"``, ``"cleanup"``."""

    def __init__(self, spark: Any, uri: str, *,
                 fault: Callable[[str], None] | None = None) -> None:
        refuse_connect(spark, "the parquet target", NEEDS_JVM)
        jvm = spark._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._IOUtils = jvm.org.apache.commons.io.IOUtils
        self.uri = uri.rstrip("/")
        self.fs = self._Path(self.uri).getFileSystem(spark._jsc.hadoopConfiguration())
        self.fault = fault

    def _p(self, *parts: str) -> Any:
        return self._Path("/".join([self.uri, *parts]))

    def _names(self, sub: str) -> list[str]:
        d = self._p(sub)
        if not self.fs.exists(d):
            return []
        return [s.getPath().getName() for s in self.fs.listStatus(d)]

    def _newest_first(self, sub: str) -> list[str]:
        """The numbered JSON files of ``sub`` (``_commits``, ``_schema``), newest first."""
        return sorted((n for n in self._names(sub) if _COMMIT.match(n)), reverse=True)

    def _read_json(self, sub: str, name: str) -> dict[str, Any] | None:
        """The JSON object file ``sub/name`` holds, or None if it is torn or not an object."""
        stream = self.fs.open(self._p(sub, name))
        try:
            raw = bytes(self._IOUtils.toByteArray(stream))
        finally:
            stream.close()
        try:
            doc = json.loads(raw.decode())
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def _write_json(self, sub: str, name: str, doc: dict[str, Any]) -> None:
        """Create ``sub/name`` holding ``doc`` (exclusively: it must not exist), synced."""
        out = self.fs.create(self._p(sub, name), False)
        try:
            out.write(bytearray(json.dumps(doc).encode()))
            out.hsync()
        finally:
            out.close()

    def _read_commit(self, name: str) -> dict[str, Any] | None:
        """The commit file's content, or None if torn, unreadable or naming no complete data."""
        doc = self._read_json("_commits", name)
        if doc is None:
            return None
        try:
            data = str(doc["data"])
            if int(doc["version"]) != int(name[:20]) or "/" in data:
                return None
        except (ValueError, KeyError, TypeError):
            return None
        if not self.fs.exists(self._p("_data", data, "_SUCCESS")):
            return None
        return {"version": int(doc["version"]), "data": data}

    def current(self) -> tuple[int, str | None]:
        """``(version, URI of its data)``; ``(0, None)`` for a table never written."""
        for name in self._newest_first("_commits"):
            doc = self._read_commit(name)
            if doc is not None:
                return doc["version"], f"{self.uri}/_data/{doc['data']}"
        return 0, None

    def recover(self) -> None:
        """Finish or roll back an interrupted ``publish``: keep only the current version."""
        version, data = self.current()
        keep = data.rsplit("/", 1)[1] if data else None
        for name in self._names("_commits"):
            if name != f"{version:020d}.json":
                self.fs.delete(self._p("_commits", name), False)
        for name in self._names("_data"):
            if name != keep:
                self.fs.delete(self._p("_data", name), True)

    def publish(self, write: Callable[[str], None]) -> int:
        """Publish a new version whose rows ``write(uri)`` writes (a DataFrame writer into a
        new directory); return its number. ``recover`` must have run since the last crash."""
        version, _ = self.current()
        new = version + 1
        data = f"{new}-{uuid.uuid4().hex}"
        write(f"{self.uri}/_data/{data}")
        self._step("data")
        self._write_json("_commits", f"{new:020d}.json", {"version": new, "data": data})
        self._step("commit")
        self.recover()
        self._step("cleanup")
        return new

    def declare(self, version: int, doc: dict[str, Any]) -> None:
        """Keep ``doc`` as the table's definition at schema ``version``. A replay of the
        event that wrote it finds it made; another event at the same version (a log holding
        the losing and the winning change) replaces it, the later in log order counting."""
        name = f"{version:020d}.json"
        path = self._p("_schema", name)
        if self.fs.exists(path):
            if self._read_json("_schema", name) == doc:
                return
            self.fs.delete(path, False)  # another event's, or torn by a crash
        self._write_json("_schema", name, doc)

    def declared(self) -> dict[str, Any] | None:
        """The newest definition ``declare`` kept that parses, or None (none kept, or a
        torn file only: the table is then fitted as undeclared)."""
        for name in self._newest_first("_schema"):
            doc = self._read_json("_schema", name)
            if doc is not None:
                return doc
        return None

    def _step(self, name: str) -> None:
        if self.fault is not None:
            self.fault(name)
