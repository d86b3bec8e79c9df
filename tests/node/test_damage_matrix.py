"""The damage matrix (issue 52, item 4): one damage per row, one expected outcome per row.

Each row names a file of a stopped node's data directory, what is done to it (flip bytes, cut,
delete, zero a page, ...) and what must follow, on one line:

- the start (``GatewayNode.start``, the path ``gateway run`` takes): ``STARTS`` (the damage is
  recovered; the row's text is in a logged warning naming the file), or ``REFUSES`` (one line
  naming the file, containing the row's text; the data directory is byte-for-byte as it was --
  hashed before and after -- and a second start refuses with the same line);
- ``gateway log verify DATA``: the row's text is in one of its ``damaged:`` lines (exit 1), or
  ``OK`` (exit 0).

Two directories are damaged, copied per row: ``compacted`` (``test_damage_recovery``'s
pristine node: a snapshot, the WAL compacted under it, two SSTables, the SQLite applier, one
dead letter) and ``sealed`` (the same writes over WAL segments of 16 KiB, never compacted: the
older segments are sealed and trusted by their footers at open).

The rows of ``test_damage_recovery``'s former tables (refused, recovered, verified) are rows
here with the same assertions; the LSM store's own corruption tests (``tests/lsm``) and the
WAL's crash-point property test (``tests/core/test_wal_crash.py``) stay at their layer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.appliers.contract import ApplierConfigError
from gateway.cli.sql import sql_to_statements
from gateway.client import AsyncGatewayClient
from gateway.core import records
from gateway.core.lsm.format import TAG_BLOCK
from gateway.core.wal import WalOptions
from gateway.node import GatewayNode
from gateway.node.server import NodeStartError
from gateway.node.state.consistency import RECOVER_HINT

from .conftest import leader_of, node_configs, run, running
from .test_damage_recovery import _cli, pristine, wait_applied  # noqa: F401 (fixture)

# -- what is done to a file ---------------------------------------------------------------------

Damage = Callable[[Path], None]


def _bytes(fn: Callable[[bytes], bytes], name: str) -> Damage:
    def damage(path: Path) -> None:
        path.write_bytes(fn(path.read_bytes()))
    damage.__name__ = name
    return damage


def flip(at: float) -> Damage:
    """XOR 8 bytes at ``at`` of the file's length."""
    def fn(b: bytes) -> bytes:
        k = int(len(b) * at)
        return b[:k] + bytes(x ^ 0x5A for x in b[k:k + 8]) + b[k + 8:]
    return _bytes(fn, f"flip{at}")


def cut(n: int) -> Damage:
    """Remove the last ``n`` bytes."""
    return _bytes(lambda b: b[:-n], f"cut{n}")


def zero_page(at: float) -> Damage:
    """Zero the 4 KiB page holding byte ``at`` of the file's length."""
    def fn(b: bytes) -> bytes:
        k = int(len(b) * at) // 4096 * 4096
        return b[:k] + bytes(min(4096, len(b) - k)) + b[k + 4096:]
    return _bytes(fn, f"zeropage{at}")


empty = _bytes(lambda b: b"", "empty")
half = _bytes(lambda b: b[: len(b) // 2], "half")
garbage = _bytes(lambda b: bytes((i * 151 + 7) % 251 for i in range(len(b))), "garbage")
torn_append = _bytes(lambda b: b + b"\x01\x02torn append", "torn_append")


def delete(path: Path) -> None:
    path.unlink()


def flip_data_block(path: Path) -> None:
    """Flip one byte inside the first data block of a table (its CRC no longer checks)."""
    data = bytearray(path.read_bytes())
    rec = next(r for r in records.scan(bytes(data)) if r.payload[0] == TAG_BLOCK)
    data[rec.end - 3] ^= 0x20
    path.write_bytes(bytes(data))


def set_position_past_the_log(path: Path) -> None:
    from gateway.appliers.position import ApplierPosition, PositionStore

    PositionStore(path.parent, path.name[: -len(".position")]).save(ApplierPosition(10_000))


# -- the matrix ---------------------------------------------------------------------------------

STARTS, REFUSES, OK = "starts", "refuses", ""


@dataclasses.dataclass(frozen=True)
class Row:
    dir: str  # "compacted" | "sealed"
    file: str  # glob under the data directory; the last match (the newest) is damaged
    damage: Damage
    start: str  # STARTS | REFUSES
    says: str  # in the refusal's line, or (STARTS) in a warning naming the file
    verify: str  # in a `damaged:` line of `gateway log verify DATA`; OK: it exits 0

    @property
    def id(self) -> str:
        return f"{self.dir}:{self.file}:{self.damage.__name__}"


C, S = "compacted", "sealed"
R, ST = REFUSES, STARTS
WAL, SEALED = "raft/wal/*.wal", "raft/wal/0*[0-9].wal"  # SEALED: one in the middle (_target)
META, CUR = "raft/wal/meta", "raft/snapshots/CURRENT"
SNAP, SNAPT = "raft/snapshots/*.snapdir/SNAPSHOT", "raft/snapshots/*.snapdir/*.sst"
SST, MAN = "store/*.sst", "store/MANIFEST"
POS, DEAD, DB = "appliers/sqlite.position", "appliers/sqlite.deadletters", "sqlite/gateway.db"
OLDEST = "raft/wal/00000000000000000002.wal"

MATRIX = [
    # dir file  damage            start says in the line / warning   verify says
    Row(C, WAL, garbage,          R,  "are lost",                   "raft/wal/"),
    Row(C, WAL, half,             R,  "are lost",                   "are lost"),
    Row(C, WAL, cut(3000),        R,  "rejoining the cluster",      "torn-tail"),
    Row(C, WAL, flip(0.9),        R,  "byte",                       "raft/wal/"),
    Row(C, WAL, zero_page(0.9),   R,  "byte",                       "raft/wal/"),
    Row(C, WAL, empty,            R,  "are lost",                   "are lost"),
    Row(C, WAL, delete,           R,  "are lost",                   "are lost"),
    Row(C, WAL, torn_append,      ST, "torn-tail",                  "torn-tail"),
    Row(C, META, empty,           R,  "byte",                       "cannot open the Raft log"),
    Row(C, META, flip(0.5),       R,  "byte",                       "raft/wal/meta"),
    Row(C, META, cut(20),         ST, "byte",                       "raft/wal/meta"),
    Row(C, META, delete,          R,  "meta: byte 0: missing",      "meta: byte 0: missing"),
    Row(C, CUR, empty,            R,  "byte",                       "raft/snapshots/CURRENT"),
    Row(C, CUR, half,             R,  "byte",                       "raft/snapshots/CURRENT"),
    Row(C, CUR, garbage,          R,  "byte",                       "raft/snapshots/CURRENT"),
    Row(C, CUR, delete,           R,  "no snapshot at index",       "raft/snapshots/CURRENT"),
    Row(C, SNAP, empty,           R,  "byte",                       "SNAPSHOT"),
    Row(C, SNAP, half,            R,  "byte",                       "SNAPSHOT"),
    Row(C, SNAP, flip(0.5),       R,  "byte",                       "SNAPSHOT"),
    Row(C, SNAPT, empty,          R,  "byte",                       ".snapdir/"),
    Row(C, SNAPT, half,           R,  "byte",                       ".snapdir/"),
    Row(C, SNAPT, flip(0.5),      ST, "",                           "crc32c"),
    Row(C, SST, empty,            R,  "byte",                       "store/"),
    Row(C, SST, half,             R,  "byte",                       "store/"),
    Row(C, SST, flip_data_block,  R,  "fails its checksum",         "fails its checksum"),
    Row(C, "store/000001.sst", flip_data_block, R, "fails its checksum", "fails its checksum"),
    Row(C, SST, zero_page(0.0),   R,  "byte",                       "store/"),
    Row(C, SST, delete,           R,  "missing",                    "missing"),
    Row(C, MAN, empty,            R,  "byte",                       "store/MANIFEST"),
    Row(C, MAN, flip(0.5),        R,  "byte",                       "store/MANIFEST"),
    Row(C, MAN, delete,           ST, "MANIFEST: missing",          "MANIFEST: byte 0: missing"),
    Row(C, POS, empty,            R,  "byte",                       "appliers/sqlite.position"),
    Row(C, POS, garbage,          R,  "byte",                       "appliers/sqlite.position"),
    Row(C, POS, cut(20),          ST, "byte",                       "appliers/sqlite.position"),
    Row(C, POS, set_position_past_the_log, R, "applied up to index 10000", "up to index 10000"),
    Row(C, DEAD, flip(0.3),       R,  "byte",                       "appliers/sqlite.deadletters"),
    Row(C, DEAD, cut(20),         ST, "byte",                       "appliers/sqlite.deadletters"),
    Row(C, DB, half,              R,  "gateway.db",                 "sqlite/gateway.db"),
    # behind its position: rebuilt from the store (issue 52 item 2: the database is the truth)
    Row(C, DB, empty,             ST, "holds up to log index 0",    "gateway.db: new or empty"),
    Row(S, SEALED, flip(0.5),     R,  "cannot read the Raft log",   "does not verify"),
    Row(S, SEALED, zero_page(0.5), R, "cannot read the Raft log",   "raft/wal/"),
    Row(S, WAL, delete,           R,  "are lost",                   "are lost"),
    Row(S, OLDEST, delete,        R,  "byte",                       "raft/wal/"),
]


# -- the two data directories -------------------------------------------------------------------

WRITES = 300


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cleanly stopped node whose WAL is several sealed segments and one active one."""
    base = tmp_path_factory.mktemp("sealed")
    cfg = node_configs(base, 1, appliers={"sqlite": {}}, snapshot_entries=1_000_000)[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gateway.node.storage.storage.WalOptions",
                   functools.partial(WalOptions, max_segment_bytes=16384))

        async def body() -> None:
            async with running(cfg) as (node,):
                await leader_of([node])
                async with AsyncGatewayClient(cfg.api) as c:
                    for i in range(WRITES):
                        await c.write(sql_to_statements(
                            f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 200}')", []))
                for _ in range(500):
                    st = node.status()
                    if st.appliers and st.appliers[0].position >= st.applied_index:
                        break
                    await asyncio.sleep(0.02)

        run(body(), timeout=120)
    data = Path(cfg.data_dir)
    assert len(list((data / "raft" / "wal").glob("*.wal"))) >= 4
    return data


def _target(data: Path, row: Row) -> Path:
    found = sorted(data.glob(row.file))
    assert found, row.file
    if row.file == SEALED:
        return found[len(found) // 2]  # a sealed segment in the middle of the log
    return found[-1]


def _tree(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(data.rglob("*"))}


def _start(data: Path) -> str:
    """Start a node on ``data`` and stop it: ``"started"`` or the refusal's text."""
    cfg = dataclasses.replace(node_configs(data.parent, 1, appliers={"sqlite": {}})[0],
                              data_dir=str(data))

    async def body() -> str:
        node = GatewayNode(cfg)
        try:
            await node.start()
        except (NodeStartError, ApplierConfigError) as exc:
            return str(exc)
        await node.stop()
        return "started"

    return run(body())


@pytest.mark.parametrize("row", MATRIX, ids=[r.id for r in MATRIX])
def test_damage(row: Row, request: pytest.FixtureRequest, tmp_path: Path,
                caplog: pytest.LogCaptureFixture) -> None:
    source = request.getfixturevalue("pristine" if row.dir == C else "sealed")
    data = tmp_path / "data"
    shutil.copytree(source, data)
    path = _target(data, row)
    row.damage(path)
    named = str(path.relative_to(data))

    code, out = _cli("log", "verify", str(data))
    damaged = [line for line in out.splitlines() if line.startswith("damaged: ")]
    if row.verify is OK:
        assert code == 0 and not damaged, out
    else:
        assert code == 1 and any(row.verify in line for line in damaged), out
    assert str(data) not in "\n".join(damaged), out  # files named relative to DATA

    before = _tree(data)
    with caplog.at_level(logging.WARNING):
        got = _start(data)
    if row.start == STARTS:
        assert got == "started", got
        if row.says:
            assert any(row.says in r.getMessage() and (str(path) in r.getMessage() or named in
                       r.getMessage()) for r in caplog.records), \
                [r.getMessage() for r in caplog.records]
        return
    assert got != "started", "the node started over damaged state"
    assert "\n" not in got and "Traceback" not in got, got
    assert row.says in got, got
    assert str(path) in got or str(path.parent) in got or named in got, got  # names the file
    # ... and where (SQLite says only that its file is malformed)
    assert "byte" in got or "index" in got or (row.file == DB and "malformed" in got), got
    assert _tree(data) == before, "a refused start changed the data directory"
    assert _start(data) == got  # nothing was "repaired" by the first attempt


def test_the_matrix_covers_every_kind_of_damage_on_every_file_kind() -> None:
    """The table stays a matrix: every file kind is damaged, and every kind of damage is
    used; the recovery hint is what refusals over lost entries point to."""
    kinds = {r.damage.__name__.rstrip("0123456789.") for r in MATRIX}
    assert {"flip", "cut", "delete", "zeropage", "empty", "half", "garbage"} <= kinds
    files = {r.file.split("/")[0] + "/" + r.file.split("/")[1].split("*")[0] for r in MATRIX}
    assert len(files) >= 7, files
    assert "rejoining the cluster" in RECOVER_HINT


@pytest.mark.parametrize("which", ["pristine", "sealed"])
def test_log_verify_passes_an_intact_data_directory(which: str, request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    """No false alarm: a cleanly stopped node's directory (a compacted log under a snapshot
    and a dead-lettered transaction, or sealed segments) verifies, and the node starts."""
    data = tmp_path / "data"
    shutil.copytree(request.getfixturevalue(which), data)
    before = _tree(data)
    code, out = _cli("log", "verify", str(data))
    assert code == 0 and out.rstrip().endswith("node data directory, ok"), out
    assert "damaged" not in out, out
    assert _tree(data) == before  # verify changes nothing
    assert _start(data) == "started"
