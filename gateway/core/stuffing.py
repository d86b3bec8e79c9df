"""Word stuffing: Backtrace's self-synchronising variant of consistent-overhead byte stuffing.

The encoding removes every occurrence of the two-byte *forbidden sequence* ``FE FD`` from the
input so that the sequence can separate records in a stream (see ``docs/formats/record-stream.md``
and the seed post "Stuff your logs"). It is byte-for-byte the encoding of
``crdb_word_stuff_encode`` / ``crdb_word_stuff_decode`` in ``backtrace-labs/stuffed-record-stream``:

- The input is cut into *runs* of literal bytes. Each run is preceded by its length: the first
  length is one byte (radix 253, at most 252); every later length is two bytes, little-endian in
  radix 253 (at most 253*253 - 1 = 64008). No length digit can be ``FD`` or ``FE``, so lengths
  never create a forbidden sequence.
- A run shorter than its maximum is implicitly followed by one forbidden sequence (which the
  encoder consumed from the input); a run of exactly the maximum length is not.
- The input is conceptually followed by one forbidden sequence; the decoder strips it. So the
  empty input encodes to ``00`` and every encoding ends with a run shorter than its maximum.

Contracts: ``unstuff(stuff(x)) == x`` for every ``x``; ``stuff(x)`` never contains ``FE FD``;
``unstuff`` raises :class:`StuffingError` (a ``ValueError``) on input no encoder could produce
in a way that would make it read out of bounds (the checks are the reference decoder's).
"""

from __future__ import annotations

__all__ = [
    "MAX_INITIAL_RUN",
    "MAX_REMAINING_RUN",
    "RADIX",
    "SEPARATOR",
    "StuffingError",
    "stuff",
    "stuffed_size",
    "unstuff",
]

#: The forbidden two-byte sequence; also the record separator of a record stream.
SEPARATOR = b"\xfe\xfd"
#: Radix of the run-length digits (``0xFD``): digits are 0..252, never ``FD`` or ``FE``.
RADIX = 0xFD
#: Longest first run (one-byte length).
MAX_INITIAL_RUN = RADIX - 1
#: Longest later run (two-byte length).
MAX_REMAINING_RUN = RADIX * RADIX - 1

_SMALL_LENGTH = [bytes((i,)) for i in range(MAX_INITIAL_RUN + 1)]


class StuffingError(ValueError):
    """The bytes are not a valid word-stuffed encoding (truncated or out-of-range length)."""


def stuffed_size(size: int) -> int:
    """Upper bound of ``len(stuff(x))`` for ``len(x) == size`` (exact when ``x`` has no FE FD)."""
    if size < MAX_INITIAL_RUN:
        return size + 1
    return size + 1 + 2 * (1 + (size - MAX_INITIAL_RUN) // MAX_REMAINING_RUN)


def stuff(data: bytes | bytearray | memoryview) -> bytes:
    """Return the word-stuffed encoding of ``data`` (contains no ``FE FD``)."""
    data = bytes(data)
    size = len(data)
    # Fast path: a short input without forbidden sequences is one terminal run.
    if size < MAX_INITIAL_RUN and SEPARATOR not in data:
        return _SMALL_LENGTH[size] + data
    find = data.find
    out: list[bytes] = []
    pos = 0
    limit = MAX_INITIAL_RUN
    while True:
        window_end = min(pos + limit, size)
        hit = find(SEPARATOR, pos, window_end)
        end = window_end if hit < 0 else hit
        run = end - pos
        if limit == MAX_INITIAL_RUN:
            out.append(_SMALL_LENGTH[run])
        else:
            out.append(bytes((run % RADIX, run // RADIX)))
        out.append(data[pos:end])
        pos = end
        if run < limit:
            if pos == size:
                break
            pos += 2  # consume the forbidden sequence the run length implies
        limit = MAX_REMAINING_RUN
    return b"".join(out)


def unstuff(data: bytes | bytearray | memoryview) -> bytes:
    """Decode a word-stuffed encoding; raise :class:`StuffingError` when it is malformed."""
    data = bytes(data)
    size = len(data)
    if size == 0:
        raise StuffingError("empty input: a stuffed encoding has at least one length byte")
    first = data[0]
    if first > MAX_INITIAL_RUN:
        raise StuffingError(f"first run length {first} exceeds {MAX_INITIAL_RUN} at offset 0")
    # Fast path: one terminal run.
    if first == size - 1:
        if first == MAX_INITIAL_RUN:
            raise StuffingError(f"truncated: a {first}-byte run must be followed by a length")
        return data[1:]
    out: list[bytes] = []
    pos = 0
    limit = MAX_INITIAL_RUN
    while True:
        if limit == MAX_INITIAL_RUN:
            run = data[pos]
            pos += 1
        else:
            if size - pos < 2:
                raise StuffingError(f"truncated run length at offset {pos}")
            run = data[pos] + RADIX * data[pos + 1]
            pos += 2
        if run > limit or size - pos < run:
            raise StuffingError(f"run length {run} at offset {pos} overruns the input")
        out.append(data[pos : pos + run])
        pos += run
        if run < limit:
            if pos == size:
                break
            if size - pos < 2:
                raise StuffingError(f"truncated run length at offset {pos}")
            out.append(SEPARATOR)
        limit = MAX_REMAINING_RUN
    return b"".join(out)
