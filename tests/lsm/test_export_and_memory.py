"""Snapshot export/import for InstallSnapshot, and memory bounded by memtable plus caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from gateway.core.lsm import CorruptionError, LSMStore, export_snapshot, import_snapshot

from .conftest import fill


def test_export_then_import_reproduces_state_and_applied_index(open_store, tmp_path):
    s = open_store()
    fill(s, 3000)
    s.put(b"meta", b"v", epoch=4, author=3, commit_ts=2, log_index=41)
    applied = export_snapshot(s, str(tmp_path / "exp"))
    assert applied == 41
    s.put(b"later", b"not exported")
    import_snapshot(str(tmp_path / "exp"), str(tmp_path / "copy"))
    with LSMStore(str(tmp_path / "copy"), background=False) as c:
        assert c.durable_applied_index == 41
        assert c.get(b"later") is None
        assert c.get_entry(b"meta") == s.get_entry(b"meta")
        assert dict(c.scan()) == {k: v for k, v in s.scan() if k != b"later"}


def test_import_refuses_a_file_whose_checksum_differs(open_store, tmp_path):
    s = open_store()
    fill(s, 500)
    export_snapshot(s, str(tmp_path / "exp"))
    table = sorted(f for f in os.listdir(tmp_path / "exp") if f.endswith(".sst"))[0]
    # Break the hard link first so the live store's file stays intact.
    data = bytearray((tmp_path / "exp" / table).read_bytes())
    os.unlink(tmp_path / "exp" / table)
    data[len(data) // 2] ^= 1
    (tmp_path / "exp" / table).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=table):
        import_snapshot(str(tmp_path / "exp"), str(tmp_path / "copy"))
    assert not os.path.exists(tmp_path / "copy")


def test_import_refuses_a_damaged_snapshot_manifest(open_store, tmp_path):
    s = open_store()
    fill(s, 100)
    export_snapshot(s, str(tmp_path / "exp"))
    path = tmp_path / "exp" / "SNAPSHOT"
    data = bytearray(path.read_bytes())
    data[20] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="SNAPSHOT"):
        import_snapshot(str(tmp_path / "exp"), str(tmp_path / "copy"))


_RSS_SCRIPT = textwrap.dedent(
    """
    import json, os, random, sys
    from gateway.core.lsm import LSMStore

    def anon_kib():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])

    rnd = random.Random(3)
    pool = rnd.randbytes(1 << 16)
    before = anon_kib()
    peak = 0
    with LSMStore(sys.argv[1], memtable_bytes=4 << 20, cache_bytes=4 << 20,
                  target_file_bytes=4 << 20, base_level_bytes=16 << 20) as s:
        for i in range(300_000):
            o = (i * 131) % 60000
            s.put(rnd.randbytes(16), pool[o:o + 100])
            if i % 20000 == 0:
                peak = max(peak, anon_kib() - before)
        s.compact()
        for i in range(100_000):
            s.get(rnd.randbytes(16))
        for _ in range(50):
            for _ in zip(range(1000), s.scan(rnd.randbytes(16))):
                pass
        peak = max(peak, anon_kib() - before)
        data = sum(t.size for _, t in s._version.tables())
    print(json.dumps({"peak_kib": peak, "data_kib": data // 1024}))
    """
)


@pytest.mark.slow
def test_memory_stays_bounded_by_memtable_budget_plus_caches(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(tmp_path / "db")],
        check=True,
        capture_output=True,
        text=True,
        timeout=110,
    )
    r = json.loads(out.stdout)
    # Budget: 3 memtables (active + 2 frozen) of 4 MiB, 4 MiB cache, index and bloom of ~40 MiB
    # of tables (~1 MiB), compaction working set and allocator slack: well under the data size.
    assert r["data_kib"] > 30_000
    assert r["peak_kib"] < 32_000, r


def test_export_under_concurrent_writes_is_the_state_at_its_index(open_store, tmp_path):
    """A writer thread keeps writing (batch ``i`` carries log index ``i`` and sets key
    ``i % 300`` to ``i``) with background flushes and compactions running; each export must be
    exactly the state at the index it returns, which covers every write made before it."""
    s = open_store(background=True)
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        i = 0
        while not stop.is_set() or i < 3000:
            i += 1
            s.write_batch([(b"k%04d" % (i % 300), b"%d" % i * 20)], log_index=i)
            written[0] = i

    t = threading.Thread(target=writer)
    t.start()
    try:
        exports = []
        for n in range(3):
            while written[0] < 500 * (n + 1):
                time.sleep(0.001)
            before = s.applied_index
            dest = str(tmp_path / f"exp{n}")
            exports.append((before, export_snapshot(s, dest), dest))
    finally:
        stop.set()
        t.join()
    for n, (before, index, dest) in enumerate(exports):
        assert index >= before
        model = {b"k%04d" % (i % 300): b"%d" % i * 20 for i in range(1, index + 1)}
        import_snapshot(dest, str(tmp_path / f"copy{n}"))
        with LSMStore(str(tmp_path / f"copy{n}"), background=False) as c:
            assert c.durable_applied_index == index
            assert dict(c.scan()) == model
