"""The Python type of a column value as the client reads it from the node."""
from __future__ import annotations

from typing import TypeAlias

#: A column value as a row read from the node holds it (``from_value``): NULL is None, a
#: DECIMAL its text, a TIMESTAMP its nanoseconds.
FieldValue: TypeAlias = "bool | int | float | str | bytes | None"

__all__ = ["FieldValue"]
