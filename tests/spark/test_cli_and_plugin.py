"""``gateway spark apply`` and the micro-batch runner of the ``spark`` plugin."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gateway import plugins
from gateway.cli import main
from spark_applier.position import SparkPositionStore
from spark_applier.runner import MicroBatchRunner
from spark_applier.writers import SqliteTarget
from tests.spark.workload import random_log, reference_state, sqlite_state, write_log_file


def _lines(output: str) -> list[str]:
    """The lines of a command's output but the warnings about installed plugins that cannot
    be loaded in this environment (they are not the command's own output)."""
    return [line for line in output.strip().splitlines()
            if not line.startswith("warning: plugin ")]


def test_the_spark_plugin_is_installed_and_adds_its_command() -> None:
    assert "spark" in {p.name for p in plugins.installed_plugins()}
    pm = plugins.load_plugins(["spark"])
    assert plugins.hooks_of(pm, "spark") == ["gateway_register_commands"]


def test_cli_applies_a_log_to_parquet_and_resumes(spark, tmp_path: Path) -> None:
    log = write_log_file(tmp_path / "log.bin", random_log(12, 40, segments=False))
    args = ["spark", "apply", "--source", str(log), "--target", f"parquet:{tmp_path / 'out'}",
            "--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(main, [*args, "--until", "25"])
    assert result.exit_code == 0, result.output
    assert "position 0 -> 25" in result.output
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "position 25 -> 40" in result.output
    assert (tmp_path / "out" / "table=shop.orders" / "_commits").is_dir()
    assert spark.range(1).count() == 1  # the shared session is still alive


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    log = write_log_file(tmp_path / "log.bin", random_log(1, 3))
    result = CliRunner().invoke(main, ["spark", "apply", "--source", str(log), "--target",
                                       "nosuch:x"])
    assert result.exit_code == 2
    assert _lines(result.output) == [
        "Error: unknown target kind 'nosuch' in 'nosuch:x' (parquet, sqlite, delta, "
        "cassandra)"]


def test_micro_batches_apply_at_most_max_entries_from_the_durable_position(
        spark, tmp_path: Path) -> None:
    txns = random_log(15, 50, segments=False)
    log = write_log_file(tmp_path / "log.bin", txns[:30])
    target = SqliteTarget(str(tmp_path / "out.db"))
    runner = MicroBatchRunner(spark, str(log), target, str(tmp_path / "state"),
                              interval=0.2, max_entries=20, poll=0.05)
    ends = []
    assert runner.run(on_batch=lambda r: ends.append(r.end.log_index), max_batches=2) == 2
    assert ends == [20, 30]
    write_log_file(log, txns)  # the log grew: the next batch starts from the saved position
    assert runner.run_once().start.log_index == 30
    assert SparkPositionStore(tmp_path / "state", "sqlite").load().log_index == 50
    assert sqlite_state(tmp_path / "out.db") == reference_state(log, tmp_path / "ref.db")
