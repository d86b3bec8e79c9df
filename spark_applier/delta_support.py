"""Whether the installed Delta Lake can run on the installed Spark, said in one line.

Delta Lake is released per Spark minor version: its Python package ``delta-spark`` declares the
PySpark versions it supports, and its jars (``io.delta:delta-spark_<spark>_2.13``,
``io.delta:delta-storage``) are built against one Spark. A Delta jar on another Spark fails
deep inside a job (``NoSuchMethodError`` in Spark's internals), after work has started -- so
the Delta target checks first and refuses with one line naming the mismatch
(docs/spark.md, "Delta Lake").
"""

from __future__ import annotations

import importlib.metadata as metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

__all__ = ["delta_mismatch"]

_DOC = "docs/spark.md, 'Delta Lake'"


def delta_mismatch(pyspark_version: str | None = None) -> str | None:
    """Why the Delta target cannot run here (one line), or None if the installed
    ``delta-spark`` declares support for this PySpark (``pyspark_version``, default the
    installed one)."""
    if pyspark_version is None:
        import pyspark

        pyspark_version = pyspark.__version__
    try:
        delta_version = metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return (f"the delta target needs delta-spark, a release built for Spark "
                f"{pyspark_version}, which is not installed ({_DOC})")
    for text in metadata.requires("delta-spark") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() != "pyspark" or req.marker is not None:
            continue
        try:
            supported = req.specifier.contains(Version(pyspark_version), prereleases=True)
        except InvalidVersion:
            return None  # a PySpark build we cannot compare: let Delta itself decide
        if not supported:
            return (f"the delta target cannot run here: delta-spark {delta_version} supports "
                    f"pyspark{req.specifier}, this is Spark {pyspark_version} ({_DOC})")
    return None
