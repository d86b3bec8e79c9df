"""One segment file: its in-memory offset index and the bytes that create, extend and seal it.

A segment file is a record stream (``docs/formats/wal.md``)::

    FE FD | header | FE FD | entry | FE FD | ... | entry | FE FD | marker | FE FD | entry ...
          ... | marker | FE FD [| index | FE FD | footer | FE FD]

where each *batch* is its entries followed by one commit marker (a ``HARD_STATE`` record); a
batch never spans segments.

named ``<first index, 20 digits>.wal``. Every record in it carries the *segment generation*
``first_index & 0xFFFFFFFF`` in its header's generation field, so a record copied or left over
from another segment is recognised as foreign.

`Segment` keeps, for the entries it holds, ``bounds`` (uint32 byte offsets: entry ``k``'s record
starts at ``bounds[k]`` and ends at the first separator after it; the bytes up to
``bounds[k+1]`` may also hold the markers closing batches; the last bound is where the next
record starts) and
``terms`` (one uint64 per entry), so finding an entry's bytes or term is two array lookups.
It does no I/O locking of its own: `~gateway.core.wal.log.SegmentedWal` serialises writers and
publishes new bounds only after the bytes were written.
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Sequence
from typing import Protocol

import crc32c

from gateway.core.accel import load
from gateway.core.fileio import FileSystem, ReadableFile, WritableFile
from gateway.core.records import SEPARATOR, encode_record
from gateway.core.wal.codec import (
    Marker,
    SegmentFooter,
    SegmentHeader,
    SegmentIndex,
    encode_footer,
    encode_header,
    encode_index,
    encode_marker,
    entry_head,
)

__all__ = ["MAX_SEGMENT_OFFSET", "SUFFIX", "Segment", "generation_of", "segment_name"]

#: File-name suffix of segment files.
SUFFIX = ".wal"
#: Offsets are stored as uint32: no record may start at or beyond this offset.
MAX_SEGMENT_OFFSET = 0xFFFFFFFF


def segment_name(first_index: int) -> str:
    """File name of the segment whose first entry is ``first_index``."""
    return f"{first_index:020d}{SUFFIX}"


def generation_of(first_index: int) -> int:
    """Record generation of every record in the segment starting at ``first_index``."""
    return first_index & 0xFFFFFFFF


#: The C loop of `Segment.encode` (the same records as the comprehension it replaces, which
#: stays the specification): None without the accelerator or under ``GATEWAY_PURE_PYTHON``.
_encode_entries = getattr(load("gateway.core._recordstream"), "encode_entries", None)


class LogEntry(Protocol):
    """What a segment reads of an entry it writes: ``gateway.raft.Entry`` and ``WalEntry``
    both offer it."""

    @property
    def index(self) -> int: ...

    @property
    def term(self) -> int: ...

    @property
    def type(self) -> int: ...

    @property
    def data(self) -> bytes: ...


class Segment:
    """In-memory view of one segment file.

    ``name_index`` is the first index the file was created for (its name); ``base`` is the
    first entry held in the arrays, larger than ``name_index`` once compaction dropped the
    head. ``writer`` is set only for the active (newest, unsealed) segment.
    """

    __slots__ = (
        "_reader",
        "base",
        "bounds",
        "data_start",
        "file_size",
        "fs",
        "generation",
        "last_marker",
        "name_index",
        "path",
        "runs",
        "scan_markers",
        "sealed",
        "terms",
        "writer",
    )

    def __init__(self, fs: FileSystem, path: str, name_index: int) -> None:
        self.fs = fs
        self.path = path
        self.name_index = name_index
        self.generation = generation_of(name_index)
        self.base = name_index
        self.bounds = array("I")
        self.terms = array("Q")
        self.runs: list[tuple[int, int]] = []  # (first index, term) of each run of equal terms
        self.sealed = False
        self.last_marker: Marker | None = None  # the newest marker known in this segment
        # Set by a recovery scan: (entries before it, marker) for every marker, in file order.
        self.scan_markers: list[tuple[int, Marker]] | None = None
        self.data_start = 0
        self.file_size = 0
        self.writer: WritableFile | None = None
        self._reader: ReadableFile | None = None

    # ---------------------------------------------------------------------------- queries

    @property
    def count(self) -> int:
        """Number of entries held."""
        return len(self.terms)

    @property
    def last_index(self) -> int:
        """Index of the last entry held (``base - 1`` when empty)."""
        return self.base + len(self.terms) - 1

    @property
    def end(self) -> int:
        """Offset where the next record goes (for a sealed segment: where its index starts)."""
        return self.bounds[-1]

    def term(self, index: int) -> int:
        """Term of entry ``index`` (which must be held)."""
        return self.terms[index - self.base]

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """Byte range ``[start, end)`` covering the records of entries ``[lo, hi)`` (held,
        ``lo < hi``), without the separator after the last one."""
        return self.bounds[lo - self.base], self.bounds[hi - self.base] - 2

    def reader(self) -> ReadableFile:
        """A shared positional-read handle, opened on first use."""
        if self._reader is None:
            self._reader = self.fs.open_readable(self.path)
        return self._reader

    def forget_reader(self) -> None:
        """Drop the read handle; readers still holding it keep using it until they finish."""
        self._reader = None

    # ---------------------------------------------------------------------------- building

    @classmethod
    def create(cls, fs: FileSystem, directory: str, first_index: int) -> Segment:
        """Create the file for a new segment starting at ``first_index`` (separator + header
        record, not synced) and return it as the active segment."""
        seg = cls(fs, os.path.join(directory, segment_name(first_index)), first_index)
        head = SEPARATOR + encode_record(encode_header(SegmentHeader(first_index)), seg.generation)
        seg.writer = fs.open_writable(seg.path)
        if seg.writer.size():
            seg.writer.truncate(0)
        seg.writer.write(head)
        seg.data_start = len(head)
        seg.bounds.append(len(head))
        return seg

    def set_entries(
        self,
        base: int,
        bounds: Sequence[int],
        terms: Sequence[int],
        runs: list[tuple[int, int]] | None = None,
    ) -> None:
        """Install a loaded index (``len(bounds) == len(terms) + 1``); ``runs`` are rebuilt
        from ``terms`` unless given."""
        self.base = base
        self.bounds = bounds if isinstance(bounds, array) else array("I", bounds)
        self.terms = terms if isinstance(terms, array) else array("Q", terms)
        if runs is None:
            runs = []
            for k, t in enumerate(self.terms):
                if not runs or runs[-1][1] != t:
                    runs.append((base + k, t))
        self.runs = runs

    def encode(self, entries: Sequence[LogEntry], marker: Marker | None = None
               ) -> tuple[list[bytes], list[int], int]:
        """Encode ``entries`` (objects with ``index``, ``term``, ``type``, ``data``) and, if
        given, the ``marker`` closing their batch, as the records to append in order (entry
        records, then the marker's; not joined: the writer hands them to ``writev``, so a
        batch of large entries is not copied once more); also return each entry record's
        length and the marker record's length (separators included)."""
        gen = self.generation
        if _encode_entries is not None:
            recs, lengths = _encode_entries(entries, gen)
        else:
            recs = [
                encode_record(e.data, gen, entry_head(e.index, e.term, int(e.type), len(e.data)))
                for e in entries
            ]
            lengths = [len(r) for r in recs]
        mrec = encode_record(encode_marker(marker), gen) if marker is not None else b""
        if mrec:
            recs.append(mrec)
        return recs, lengths, len(mrec)

    def publish(self, entries: Sequence[LogEntry], lengths: Sequence[int], marker_len: int = 0,
                marker: Marker | None = None) -> None:
        """Record that ``entries`` and their marker were written after the current end
        (lengths as returned by `encode`). Called only after the write completed."""
        pos = self.bounds[-1]
        bounds, terms, runs = self.bounds, self.terms, self.runs
        for e, n in zip(entries, lengths, strict=True):
            pos += n
            bounds.append(pos)
            t = e.term
            terms.append(t)
            if not runs or runs[-1][1] != t:
                runs.append((e.index, t))
        if marker_len:
            bounds[-1] = pos + marker_len
        if marker is not None:
            self.last_marker = marker

    def seal_bytes(self) -> bytes:
        """The index record and footer record that seal this segment, to append at `end`."""
        n = self.count
        runs = array("Q")
        for start, term in self.runs:
            runs.append(start)
            runs.append(term)
        bounds = array("I", self.bounds)
        if sys.byteorder != "little":
            runs.byteswap()
            bounds.byteswap()
        last = encode_marker(self.last_marker)[1:] if self.last_marker is not None else b""
        payload = encode_index(SegmentIndex(self.base, n, bounds.tobytes(), runs.tobytes(),
                                            last))
        index_rec = encode_record(payload, self.generation)
        offset = self.end
        footer = SegmentFooter(
            first_index=self.base,
            count=n,
            index_offset=offset,
            index_end=offset + len(index_rec) - 2,
            index_crc32c=crc32c.crc32c(payload),
        )
        return index_rec + encode_record(encode_footer(footer), self.generation)

    def truncate_entries(self, index: int) -> int:
        """Forget entries ``>= index`` (``base <= index <= last_index + 1``) and any seal;
        return the file length to cut the file to."""
        k = index - self.base
        del self.terms[k:]
        del self.bounds[k + 1 :]
        while self.runs and self.runs[-1][0] >= index:
            self.runs.pop()
        self.sealed = False
        return self.bounds[-1]

    def drop_head(self, index: int) -> None:
        """Forget entries ``< index`` (``base <= index <= last_index + 1``)."""
        k = index - self.base
        if k <= 0:
            return
        del self.terms[:k]
        del self.bounds[:k]
        self.base = index
        runs = [(s, t) for s, t in self.runs if s >= index]
        if self.terms and (not runs or runs[0][0] != index):
            runs.insert(0, (index, self.terms[0]))
        self.runs = runs
