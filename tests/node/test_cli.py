"""`gateway run` as a real process: start, write with `gateway sql`, read with `gateway get`,
`gateway status`, SIGTERM exits 0; plus the pure helpers behind the CLI (SQL, config)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gateway.cli.sql import SqlError, sql_to_statements
from gateway.node.base.config import ConfigError, load_config

from .conftest import free_ports

GATEWAY = [sys.executable, "-m", "gateway.cli"]


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEWAY, *args], capture_output=True, text=True, timeout=timeout)


def test_gateway_run_sql_get_status_and_sigterm(tmp_path):
    api, peer = free_ports(2)
    target = f"127.0.0.1:{api}"
    proc = subprocess.Popen(
        [*GATEWAY, "run", "--api", target, "--listen", f"127.0.0.1:{peer}", "--data-dir",
         str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            st = _cli("status", "--target", target, "--format", "json")
            if st.returncode == 0 and json.loads(st.stdout).get("role") == "leader":
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, st.stderr
            time.sleep(0.3)
        w = _cli("sql", "--target", target,
                 "SET @n = 'a'; INSERT INTO shop.items (id, name) VALUES (1, @n)")
        assert w.returncode == 0, w.stderr
        assert w.stdout.strip() == "1:1"
        g = _cli("get", "--target", target, "shop.items", "1")
        assert g.returncode == 0, g.stderr
        assert json.loads(g.stdout) == {"id": 1, "name": "a"}
        bad = _cli("sql", "--target", target, "INSERT INTO shop.items (id, name) VALUES (2, 3)")
        assert bad.returncode == 2 and "wrong type" in bad.stderr
        assert "Traceback" not in bad.stderr
        missing = _cli("get", "--target", target, "shop.items", "99")
        assert missing.returncode == 1 and "no such row" in missing.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "node 1 stopped" in err
    assert os.path.exists(tmp_path / "data" / "sqlite" / "gateway.db")


def test_run_refuses_half_configured_tls_in_one_line(tmp_path):
    r = subprocess.run([*GATEWAY, "run", "--data-dir", str(tmp_path)], capture_output=True,
                       text=True, timeout=30,
                       env={**os.environ, "GATEWAY_TLS_API_CERT": "cert.pem"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "Error: tls.api_key: TLS on the API is half-configured (need both api_cert and api_key)"]


def test_sql_translation():
    stmts = sql_to_statements("SET @x = 'v'; INSERT INTO s.t (k, id, a) VALUES (1, 2, @x), "
                              "(3, 4, NULL); UPDATE s.t SET a = -5 WHERE id = 2; "
                              "DELETE FROM s.t WHERE id = 4")
    ins, upd, dele = stmts
    assert [f.name for f in ins.insert.key_fields] == ["id"]
    assert [f.name for f in ins.insert.fields] == ["k", "a"]
    assert len(ins.insert.records) == 2
    assert ins.insert.records[0].after_values[1].string_value == "v"
    assert upd.update.records[0].after_values[0].int_value == -5
    assert dele.delete.records[0].key_values[0].int_value == 4
    assert [f.name for f in sql_to_statements("INSERT INTO t (a, b) VALUES (1, 2)",
                                              ["b"])[0].insert.key_fields] == ["b"]
    for bad in ("SELECT 1", "UPDATE t SET a = 1", "INSERT INTO t VALUES (1)",
                "INSERT INTO t (a) VALUES (@nope)", "DELETE FROM t WHERE a > 1"):
        with pytest.raises(SqlError):
            sql_to_statements(bad)


def test_config_precedence_file_env_flags(tmp_path):
    f = tmp_path / "node.toml"
    f.write_text('node_id = 2\napi = "127.0.0.1:9000"\ndata_dir = "d"\n'
                 'peers = { 1 = "127.0.0.1:7101", 2 = "127.0.0.1:7102" }\n'
                 '[appliers.sqlite]\npath = "x.db"\n')
    cfg = load_config(str(f), {"data_dir": "flag-dir"}, env={"GATEWAY_API": "127.0.0.1:9001"})
    assert cfg.node_id == 2 and cfg.api == "127.0.0.1:9001" and cfg.data_dir == "flag-dir"
    assert cfg.peers == {1: "127.0.0.1:7101", 2: "127.0.0.1:7102"}
    assert cfg.appliers == {"sqlite": {"path": "x.db"}}
    with pytest.raises(ConfigError, match=r"^peers: does not name this node"):
        load_config(None, {"node_id": 3, "peers": "1=127.0.0.1:1"}, env={})
    with pytest.raises(ConfigError, match=r"^listen"):
        load_config(None, {"listen": "nope"}, env={})
    with pytest.raises(ConfigError, match=r"^bogus"):
        load_config(None, {"bogus": 1}, env={})


def test_snapshot_log_percent_from_file_or_environment_and_its_bounds(tmp_path):
    f = tmp_path / "node.toml"
    f.write_text("snapshot_log_percent = 50\n")
    assert load_config(str(f), {}, env={}).snapshot_log_percent == 50
    assert load_config(None, {}, env={}).snapshot_log_percent == 100
    cfg = load_config(None, {}, env={"GATEWAY_SNAPSHOT_LOG_PERCENT": "0"})
    assert cfg.snapshot_log_percent == 0
    with pytest.raises(ConfigError, match=r"^snapshot_log_percent: must be 0 or more"):
        load_config(None, {}, env={"GATEWAY_SNAPSHOT_LOG_PERCENT": "-1"})
    with pytest.raises(ConfigError, match=r"^snapshot_log_percent .*expected an integer"):
        load_config(None, {}, env={"GATEWAY_SNAPSHOT_LOG_PERCENT": "half"})


def test_commit_linger_ms_from_file_or_environment_and_its_bounds(tmp_path):
    f = tmp_path / "node.toml"
    f.write_text("commit_linger_ms = 2\n")
    assert load_config(str(f), {}, env={}).commit_linger_ms == 2
    assert load_config(None, {}, env={}).commit_linger_ms == 5
    assert load_config(None, {}, env={"GATEWAY_COMMIT_LINGER_MS": "0"}).commit_linger_ms == 0
    with pytest.raises(ConfigError, match=r"^commit_linger_ms: must be between 0 and one "
                                          r"heartbeat \(50 ms\), not 51"):
        load_config(None, {}, env={"GATEWAY_COMMIT_LINGER_MS": "51"})
    with pytest.raises(ConfigError, match=r"^commit_linger_ms: .*not -1"):
        load_config(None, {"commit_linger_ms": -1}, env={})
    with pytest.raises(ConfigError, match=r"^commit_linger_ms .*expected an integer"):
        load_config(None, {}, env={"GATEWAY_COMMIT_LINGER_MS": "soon"})
