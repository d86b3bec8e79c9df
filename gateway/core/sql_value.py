"""The Python type of one SQL column value, as it flows through the gateway.

Row operations (:mod:`gateway.core.rowops`), the columnar insert path
(:mod:`gateway.core.insert_columns`), the conflict functions and the appliers all carry column
values as plain Python objects decoded from ``gateway.v1.Value``: ``None`` for NULL, ``int``
for the integer and timestamp (nanoseconds) types, ``float`` for doubles, ``Decimal`` for
decimals, ``str`` for character types, ``bytes`` for binary types, ``bool`` for booleans.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TypeAlias

SqlValue: TypeAlias = "int | float | str | bytes | bool | Decimal | None"
"""One column value (``None`` is SQL NULL)."""

__all__ = ["SqlValue"]
