"""``gateway log write|dump|verify``: the seed's binlog_writer / binlog_reader, end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from google.protobuf import json_format

from gateway.cli import logtool, main
from gateway.core import records
from gateway.core.messages import TypeTag
from gateway.v1 import transaction_pb2

SEED_WRITES = [
    ("mkindahl", "Mats Kindahl"),
    ("krow", "Brian Aker"),
    ("mtaylor", "Monty Taylor"),
]
QUERY = "INSERT INTO whatever VALUES (@nick,@name)"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result: Result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("Error: ")
    assert fragment in result.stderr
    assert "Traceback" not in result.output


def write_seed_log(path: Path) -> None:
    for nick, name in SEED_WRITES:
        result = run("log", "write", str(path), "--trans", "1",
                     "--set", f"nick={nick}", "--set", f"name={name}", QUERY)
        assert result.exit_code == 0, result.output


def scan_records(path: Path) -> list[records.Record]:
    return list(records.scan(path.read_bytes()))


# --- write ----------------------------------------------------------------------------------


def test_write_creates_a_log_that_starts_with_the_separator(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    result = run("log", "write", str(log), "--server-id", "1", "--trans", "1",
                 "--set", "nick=mkindahl", "--set", "name=Mats Kindahl", QUERY)
    assert result.exit_code == 0, result.output
    assert result.stdout == "# Global Id: (1,1)\n"
    data = log.read_bytes()
    assert data.startswith(records.SEPARATOR)
    assert data.endswith(records.SEPARATOR)
    [record] = scan_records(log)
    assert record.payload[0] == TypeTag.TRANSACTION


def test_dump_prints_the_seed_binlog_reader_output(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    result = run("log", "dump", str(log))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("# Global Id")] == ["# Global Id: (1,1)"] * 3
    assert [line for line in lines if not line.startswith("#")] == [
        "set @name = 'Mats Kindahl'", "set @nick = 'mkindahl'", QUERY,
        "set @name = 'Brian Aker'", "set @nick = 'krow'", QUERY,
        "set @name = 'Monty Taylor'", "set @nick = 'mtaylor'", QUERY,
    ]  # fmt: skip
    assert sum(line.startswith("# Timestamp: ") for line in lines) == 3


def test_write_without_trans_takes_the_next_id_of_that_server(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    assert run("log", "write", str(log), "--trans", "41", "SELECT 1").exit_code == 0
    assert run("log", "write", str(log), "SELECT 2").stdout == "# Global Id: (1,42)\n"
    assert run("log", "write", str(log), "--server-id", "7", "SELECT 3").stdout == (
        "# Global Id: (7,1)\n"
    )
    assert run("log", "write", str(log), "SELECT 4").stdout == "# Global Id: (1,43)\n"


def test_write_after_a_torn_tail_keeps_the_new_record_readable(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    log.write_bytes(log.read_bytes()[:-20])  # an interrupted append
    assert run("log", "write", str(log), "--trans", "9", "SELECT 9").exit_code == 0
    result = run("log", "dump", str(log))
    assert "SELECT 9" in result.stdout
    assert result.exit_code == 1  # the torn record is still reported


def test_write_refuses_a_file_that_is_not_a_log(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello, this is not a log\n")
    result = run("log", "write", str(notes), "SELECT 1")
    assert_one_line_error(result, "not a log")
    assert notes.read_text() == "hello, this is not a log\n"


@pytest.mark.parametrize("assignment", ["nick", "=x", "bad name=x", "1x=2"])
def test_write_refuses_a_malformed_set(tmp_path: Path, assignment: str) -> None:
    result = run("log", "write", str(tmp_path / "log.bin"), "--set", assignment, "SELECT 1")
    assert_one_line_error(result, "invalid --set")
    assert not (tmp_path / "log.bin").exists()


def test_write_keeps_equals_signs_in_values(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    assert run("log", "write", str(log), "--set", "expr=a=b", "SELECT @expr").exit_code == 0
    assert "set @expr = 'a=b'" in run("log", "dump", str(log)).stdout


def test_write_records_epoch_author_and_schema(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    result = run("log", "write", str(log), "--server-id", "3", "--epoch", "17", "--author", "2",
                 "--schema", "shop", "--session-id", "99", "DELETE FROM carts")
    assert result.exit_code == 0, result.output
    [entry] = logtool.iter_entries(log.read_bytes())
    txn = entry.message
    assert (txn.epoch, txn.author) == (17, 2)
    assert txn.statements[0].sql.default_schema == "shop"
    assert txn.statements[0].sql.session_id == 99
    assert txn.start_timestamp_ns == txn.commit_timestamp_ns > 0


# --- dump -----------------------------------------------------------------------------------


def test_dump_jsonl_prints_one_parsable_object_per_transaction(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    result = run("log", "dump", str(log), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["offset"] for o in objects] == [r.offset for r in scan_records(log)]
    assert all(o["type"] == "transaction" for o in objects)
    txn = json_format.ParseDict(objects[1]["transaction"], transaction_pb2.Transaction())
    assert txn.statements[0].sql.query == QUERY
    assert {v.name: v.value.string_value for v in txn.statements[0].sql.variables} == {
        "nick": "krow", "name": "Brian Aker",
    }  # fmt: skip


def test_dump_from_gtid_starts_at_the_first_matching_transaction(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    for server, trans in [(1, 1), (2, 1), (1, 2), (2, 2), (1, 3)]:
        result = run("log", "write", str(log), "--server-id", str(server), "--trans", str(trans),
                     f"SELECT {server}{trans}")
        assert result.exit_code == 0
    result = run("log", "dump", str(log), "--from-gtid", "1:2")
    assert result.exit_code == 0
    assert [line for line in result.stdout.splitlines() if line.startswith("# Global")] == [
        "# Global Id: (1,2)", "# Global Id: (2,2)", "# Global Id: (1,3)",
    ]  # fmt: skip


def test_dump_from_a_gtid_past_the_end_prints_nothing(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    result = run("log", "dump", str(log), "--from-gtid", "1:100")
    assert result.exit_code == 0
    assert result.stdout == ""


@pytest.mark.parametrize("gtid", ["x", "1", "1:", ":2", "1:2:3", "-1:2", "4294967296:1"])
def test_dump_refuses_a_malformed_from_gtid(tmp_path: Path, gtid: str) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    assert_one_line_error(run("log", "dump", str(log), "--from-gtid", gtid), "--from-gtid")


def test_dump_of_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    assert_one_line_error(run("log", "dump", str(tmp_path / "nope.bin")), "no such file")


def test_dump_of_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    assert_one_line_error(run("log", "dump", str(tmp_path)), "is a directory")


def test_dump_of_a_file_that_is_not_a_log_is_a_one_line_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"GIF89a" + bytes(range(256)))
    assert_one_line_error(run("log", "dump", str(junk)), "not a log")


def test_dump_of_an_empty_file_prints_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    result = run("log", "dump", str(empty))
    assert (result.exit_code, result.output) == (0, "")


def test_dump_prints_the_good_transactions_and_reports_damage(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    _, second, _ = scan_records(log)
    data = bytearray(log.read_bytes())
    data[second.offset + 12] ^= 0x40
    log.write_bytes(bytes(data))
    result = run("log", "dump", str(log))
    assert result.exit_code == 1
    assert "Mats Kindahl" in result.stdout
    assert "Monty Taylor" in result.stdout
    assert "Brian Aker" not in result.stdout
    assert result.stderr == f"{log}: damaged bytes [{second.offset}, {second.end})\n"


def test_dump_reports_a_record_with_an_unknown_type_tag(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    with log.open("ab") as f:
        f.write(records.encode_record(b"\xc8whatever"))
    result = run("log", "dump", str(log))
    assert result.exit_code == 1
    assert result.stdout.count("# Global Id") == 3
    assert "unknown type tag 200 (0xc8)" in result.stderr


# --- verify ---------------------------------------------------------------------------------


def test_verify_of_an_intact_log_reports_the_record_count(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    result = run("log", "verify", str(log))
    assert result.exit_code == 0
    assert result.stdout == f"{log}: 3 records, {log.stat().st_size} bytes, ok\n"


def test_verify_reports_damaged_ranges_and_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    _, second, _ = scan_records(log)
    data = bytearray(log.read_bytes())
    data[second.offset + 3] ^= 0x01
    log.write_bytes(bytes(data))
    result = run("log", "verify", str(log))
    assert result.exit_code == 1
    assert f"2 records, {len(data)} bytes, damaged [{second.offset}, {second.end})" in result.stdout
    assert "torn tail" not in result.stdout


def test_verify_labels_a_torn_tail(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    log.write_bytes(log.read_bytes()[:-10])
    result = run("log", "verify", str(log))
    assert result.exit_code == 1
    assert result.stdout.rstrip().endswith("(torn tail)")
    assert "2 records" in result.stdout


def test_verify_never_modifies_the_file(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    write_seed_log(log)
    log.write_bytes(log.read_bytes()[:-10] + b"garbage")
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    run("log", "verify", str(log))
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before


def test_verify_of_a_directory_checks_every_file(tmp_path: Path) -> None:
    write_seed_log(tmp_path / "a.log")
    write_seed_log(tmp_path / "b.log")
    (tmp_path / "b.log").write_bytes((tmp_path / "b.log").read_bytes()[:-5])
    (tmp_path / "sub").mkdir()
    result = run("log", "verify", str(tmp_path))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'a.log'}: 3 records")
    assert lines[1].startswith(f"{tmp_path / 'b.log'}: 2 records")
    assert lines[2] == f"{tmp_path}: 2 files, 5 records, 1 damaged"


def test_verify_of_a_clean_directory_exits_0(tmp_path: Path) -> None:
    write_seed_log(tmp_path / "a.log")
    result = run("log", "verify", str(tmp_path))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == f"{tmp_path}: 1 files, 3 records, 0 damaged"


def test_verify_of_a_missing_path_is_a_one_line_error(tmp_path: Path) -> None:
    assert_one_line_error(run("log", "verify", str(tmp_path / "gone")), "no such file")


def test_verify_of_a_file_that_is_not_a_log_is_a_one_line_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("plain text\n")
    assert_one_line_error(run("log", "verify", str(junk)), "not a log")


def test_verify_of_a_log_with_every_record_damaged_is_corruption_not_bad_input(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.bin"
    run("log", "write", str(log), "SELECT 1")
    data = bytearray(log.read_bytes())
    data[6] ^= 0xFF
    log.write_bytes(bytes(data))
    result = run("log", "verify", str(log))
    assert result.exit_code == 1
    assert "0 records" in result.stdout


# --- the installed console script ------------------------------------------------------------


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("gateway")
    return str(beside) if beside.exists() else shutil.which("gateway")


@pytest.mark.skipif(_console_script() is None, reason="gateway console script not installed")
def test_console_script_writes_and_dumps_and_fails_cleanly(tmp_path: Path) -> None:
    script = _console_script()
    assert script is not None
    log = tmp_path / "log.bin"
    write = subprocess.run(
        [script, "log", "write", str(log), "--set", "nick=mkindahl", QUERY],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert write.returncode == 0, write.stderr
    dump = subprocess.run([script, "log", "dump", str(log)], capture_output=True, text=True,
                          check=False)
    assert dump.returncode == 0
    assert "set @nick = 'mkindahl'" in dump.stdout
    missing = subprocess.run([script, "log", "dump", str(tmp_path / "nope")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1
    assert "Traceback" not in missing.stderr
