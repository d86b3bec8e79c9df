"""The node's memory bounds (docs/node.md, "Memory") are the configured ones: the Raft log's
in-memory tail, the store's block cache and its frozen memtables never hold more than the
configuration says, whatever the load (counts and bytes, never timings); bad values are
refused naming the key; and the memory report a benchmark reads says what the node holds."""

from __future__ import annotations

import asyncio
import json
import sys
import threading

import grpc
import pytest

from gateway.client import row_insert
from gateway.node.base.config import ConfigError, NodeConfig, load_config
from gateway.node.loop import memory_report
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, value_pb2

from .conftest import node_configs, run, running

_ROW = 8 << 10  # bytes of each written row's value


async def _write_rows(api: str, n: int, table: str = "t.mem") -> None:
    async with grpc.aio.insecure_channel(api) as ch:
        stub = gateway_pb2_grpc.GatewayStub(ch)
        for i in range(n):
            await stub.Write(gateway_pb2.WriteRequest(statements=[
                row_insert(table, {"id": i}, {"v": f"{i:08d}" + "x" * _ROW})]), timeout=10)


async def _read_rows(api: str, n: int, table: str = "t.mem") -> None:
    async with grpc.aio.insecure_channel(api) as ch:
        stub = gateway_pb2_grpc.GatewayStub(ch)
        for i in range(n):
            resp = await stub.Read(gateway_pb2.ReadRequest(
                table=table, key=[value_pb2.Value(int_value=i)],
                consistency=gateway_pb2.CONSISTENCY_STALE), timeout=10)
            assert resp.found, f"row {i} written before was not found"


def test_log_tail_in_memory_stays_within_log_cache_bytes(tmp_path):
    # 80 entries of ~8 KiB: ~650 KiB appended, 10x the bound; every entry stays readable.
    cfg = node_configs(tmp_path, 1, log_cache_bytes=64 << 10)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            while not node.driver.is_leader:
                await asyncio.sleep(0.02)
            appended = node.storage.appended_bytes
            await _write_rows(cfg.api, 80)
            assert node.storage.appended_bytes - appended > 8 * (64 << 10)
            assert 0 < node.storage.cached_bytes <= 64 << 10
            first = node.storage.first_index()
            ents = node.storage.entries(first, node.storage.last_index() + 1, 1 << 30)
            assert len(ents) == node.storage.last_index() + 1 - first
            await _read_rows(cfg.api, 80)

    run(go())


def test_block_cache_stays_within_block_cache_bytes(tmp_path):
    # Rows enough for several 1 MiB memtables, flushed to tables, then every row read back:
    # the reads fill the block cache up to its bound and no further.
    cfg = node_configs(tmp_path, 1, memtable_bytes=1 << 20, block_cache_bytes=64 << 10)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            while not node.driver.is_leader:
                await asyncio.sleep(0.02)
            await _write_rows(cfg.api, 300)
            await asyncio.to_thread(node.sm.store.flush)
            assert sum(node.sm.store.stats()["levels"]) > 0
            await _read_rows(cfg.api, 300)
            used = node.sm.store.stats()["cache_bytes"]
            assert 0 < used <= 64 << 10

    run(go())


def test_store_holds_at_most_max_immutable_memtables(tmp_path):
    # A flush that cannot finish (its thread is held) while writes go on: the store freezes
    # at most ``max_immutable_memtables`` memtables, then writers wait for the flush.
    cfg = node_configs(tmp_path, 1, memtable_bytes=1 << 20, max_immutable_memtables=1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            while not node.driver.is_leader:
                await asyncio.sleep(0.02)
            store = node.sm.store
            held, flushing = threading.Event(), threading.Event()
            flush = store._flush_one  # the flush of one frozen memtable

            def stalled() -> None:
                flushing.set()
                held.wait(30)
                flush()

            store._flush_one = stalled
            frozen: list[int] = []  # the frozen memtables, sampled while the flush is held

            def sample() -> None:
                flushing.wait(30)
                for _ in range(150):
                    frozen.append(store.stats()["immutable_memtables"])
                    held.wait(0.01)
                held.set()

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                await _write_rows(cfg.api, 400)  # 3 MiB: memtables enough to wait
            finally:
                held.set()
                sampler.join()
            assert frozen and max(frozen) == 1

    run(go())


@pytest.mark.parametrize(("key", "value", "words"), [
    ("memtable_bytes", 1000, "memtable_bytes: must be at least 1048576"),
    ("block_cache_bytes", -1, "block_cache_bytes: must be at least 0"),
    ("log_cache_bytes", -1, "log_cache_bytes: must be at least 0"),
    ("max_immutable_memtables", 0, "max_immutable_memtables: must be at least 1"),
])
def test_memory_bound_out_of_range_is_refused_naming_the_key(key, value, words):
    with pytest.raises(ConfigError, match=words):
        NodeConfig(**{key: value}).validate()


def test_memory_bounds_come_from_the_environment():
    cfg = load_config(env={"GATEWAY_LOG_CACHE_BYTES": "1048576",
                           "GATEWAY_BLOCK_CACHE_BYTES": "0",
                           "GATEWAY_MEMTABLE_BYTES": "2097152",
                           "GATEWAY_MAX_IMMUTABLE_MEMTABLES": "1"})
    assert (cfg.log_cache_bytes, cfg.block_cache_bytes, cfg.memtable_bytes,
            cfg.max_immutable_memtables) == (1 << 20, 0, 2 << 20, 1)


def test_memory_report_writes_what_the_node_holds(tmp_path):
    env = {memory_report.ENV_DIR: str(tmp_path), memory_report.ENV_INTERVAL: "20"}
    stop = threading.Event()  # no report thread outlives its test
    thread = memory_report.start(7, lambda: {"block_cache": 123}, str(tmp_path / "store"),
                                 env, stop)
    assert thread is not None
    path = tmp_path / "node-7.jsonl"
    try:
        for _ in range(500):
            if path.exists() and path.read_text().count("\n") >= 2:
                break
            threading.Event().wait(0.02)
    finally:
        stop.set()
        thread.join(10)
    line = json.loads(path.read_text().splitlines()[0])
    assert line["components"] == {"block_cache": 123}
    assert line["rss"] > 0 and line["hwm"] >= line["rss"]
    assert sum(line["maps"].values()) > 0 and line["maps"]["code"] > 0
    assert memory_report.start(7, dict, "", {}) is None  # off without the variable


def test_gateway_run_reports_its_memory(tmp_path):
    # The process ``bench_memory.py`` measures: ``gateway run`` writes the report with the
    # node's own accounting (also with ``malloc_trim_ms`` set: the trimmer runs beside it).
    import os
    import signal
    import subprocess
    import sys

    from .conftest import free_ports

    api, peer = free_ports(2)
    env = {**os.environ, memory_report.ENV_DIR: str(tmp_path / "mem"),
           memory_report.ENV_INTERVAL: "100", "GATEWAY_MALLOC_TRIM_MS": "100",
           "GATEWAY_LOG_CACHE_BYTES": str(1 << 20)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run", "--api", f"127.0.0.1:{api}", "--listen",
         f"127.0.0.1:{peer}", "--data-dir", str(tmp_path / "data"), "--appliers", ""],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    path = tmp_path / "mem" / "node-1.jsonl"
    try:
        for _ in range(600):
            if path.exists() and path.read_text().count("\n") >= 2:
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            threading.Event().wait(0.1)
        line = json.loads(path.read_text().splitlines()[-1])
        assert set(line["components"]) == {"memtable", "immutable_memtables", "block_cache",
                                           "raft_entry_cache", "log_file_reads"}
        assert line["rss"] > 0 and line["maps"]["code"] > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_memory_report_thread_ends_when_asked(tmp_path):
    stop = threading.Event()
    env = {memory_report.ENV_DIR: str(tmp_path), memory_report.ENV_INTERVAL: "20"}
    thread = memory_report.start(8, dict, str(tmp_path / "store"), env, stop)
    assert thread is not None
    path = tmp_path / "node-8.jsonl"
    for _ in range(500):
        if path.exists() and path.read_text().count("\n") >= 1:
            break
        threading.Event().wait(0.02)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    written = path.read_text().count("\n")
    threading.Event().wait(0.1)
    assert written >= 1 and path.read_text().count("\n") == written


def test_memory_report_holds_no_reference_to_objects_other_threads_build(tmp_path):
    # CI once failed in tests/harness/fingerprints.py with ``SystemError:
    # Objects/tupleobject.c:927: bad argument to internal function`` from ``tuple(<generator>)``:
    # a report thread of an earlier test listed every tracked object (``gc.get_objects``),
    # holding a reference to the tuple the main thread was still building, whose resize then
    # refused a reference count of 2 (CPython 3.11). The report may take the GIL at any
    # switch: an object this thread holds alone must keep its reference count meanwhile.
    probe: list[int] = []  # tracked by the collector, referenced here only
    alone = sys.getrefcount(probe)
    stop = threading.Event()
    env = {memory_report.ENV_DIR: str(tmp_path), memory_report.ENV_INTERVAL: "1"}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over at every chance the report gives
    try:
        thread = memory_report.start(9, dict, str(tmp_path / "store"), env, stop)
        assert thread is not None
        path = tmp_path / "node-9.jsonl"
        seen = set()
        while thread.is_alive() and (not path.exists()
                                     or path.read_text().count("\n") < 30):
            seen.add(sys.getrefcount(probe))
    finally:
        stop.set()
        sys.setswitchinterval(interval)
    thread.join(10)
    assert path.read_text().count("\n") >= 30
    assert seen == {alone}
