"""The Delta target refuses, in one line and before any work, a Spark its Delta Lake release
does not support (docs/spark.md, "Delta Lake": no delta-spark release supports Spark 4.3)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pyspark
import pytest
from click.testing import CliRunner

from gateway import ApplyError
from gateway.cli import main
from spark_applier import delta_support
from spark_applier.targets import make_target
from tests.spark.test_cli_and_plugin import _lines
from tests.spark.workload import random_log, write_log_file


def _installed(monkeypatch: pytest.MonkeyPatch, version: str | None, requires: list[str]
               ) -> None:
    """Make ``delta-spark`` look installed at ``version`` (None: not installed)."""
    def fake_version(name: str) -> str:
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(delta_support.metadata, "version", fake_version)
    monkeypatch.setattr(delta_support.metadata, "requires", lambda name: requires)


def test_the_delta_target_names_the_spark_its_release_does_not_support(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the requirements of the newest delta-spark on PyPI (4.4.1) when this was written
    _installed(monkeypatch, "4.4.1", ["pyspark<=4.2.0,>=4.0.1",
                                      "importlib_metadata<=8.7.1,>=1.0.0"])
    with pytest.raises(ApplyError) as exc:
        make_target(spark, f"delta:{tmp_path / 'out'}")
    assert str(exc.value) == (
        f"the delta target cannot run here: delta-spark 4.4.1 supports pyspark<=4.2.0,>=4.0.1, "
        f"this is Spark {pyspark.__version__} (docs/spark.md, 'Delta Lake')")
    assert not (tmp_path / "out").exists()
    assert delta_support.delta_mismatch("4.2.0") is None  # inside the range: Delta may run
    _installed(monkeypatch, None, [])
    assert delta_support.delta_mismatch("4.3.0") == (
        "the delta target needs delta-spark, a release built for Spark 4.3.0, which is not "
        "installed (docs/spark.md, 'Delta Lake')")


def test_cli_refuses_the_delta_target_in_one_line(spark, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, None, [])
    log = write_log_file(tmp_path / "log.bin", random_log(2, 5))
    result = CliRunner().invoke(main, ["spark", "apply", "--source", str(log), "--target",
                                       f"delta:{tmp_path / 'out'}", "--state-dir",
                                       str(tmp_path / "state")])
    assert result.exit_code == 2
    assert _lines(result.output) == [
        f"Error: the delta target needs delta-spark, a release built for Spark "
        f"{pyspark.__version__}, which is not installed (docs/spark.md, 'Delta Lake')"]
    assert not (tmp_path / "out").exists()
