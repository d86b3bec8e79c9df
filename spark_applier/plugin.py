"""The ``spark`` plugin (entry point ``spark = "spark_applier.plugin"``)."""

from __future__ import annotations
