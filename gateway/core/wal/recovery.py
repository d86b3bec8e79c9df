"""Loading a segment file on open: trust a sealed segment's footer, or scan and check.

Two paths:

- **Footer** (sealed segments): read the last 256 bytes, find the footer record that ends the
  file, read the index record it points to, check both records' CRCs, the footer's CRC of the
  index payload and the counts, and install the index. The entries are not read at all.
- **Scan** (the newest segment, or a sealed one whose footer or index does not verify): read
  the whole file and walk its valid records in order. Rules:

  * a record is *contiguous* when it starts right after the previous record's separator (or
    right after the leading separator of the file);
  * a non-contiguous record means damaged bytes lie before it: `WalCorruptionError` naming the
    file and the first damaged byte, unless that damage is in the compacted head of the file
    (before the log's first index, where hole punching may have zeroed and cut records);
  * entries must carry consecutive indexes, the header must match the file name, only a
    footer may follow the index record, and every record must carry the segment generation
    (a foreign record counts as damage);
  * commit markers (``HARD_STATE`` records) are collected in ``Segment.scan_markers``; which
    entries they leave incomplete (a torn batch) is decided by the caller, which also knows
    the meta file (`gateway.core.wal.log.SegmentedWal`);
  * bytes after the last valid record are a *torn tail*: in the newest segment they are cut
    (the file is truncated and synced) and reported; in an older segment they can only be the
    seal (index + footer), which is reported as damaged, and the caller checks that the
    entries join up with the next segment.
"""

from __future__ import annotations

import os
import sys
from array import array

import crc32c

from gateway.core.fileio import FileSystem
from gateway.core.records import SEPARATOR, decode_record, encode_record, scan
from gateway.core.wal.codec import (
    FORMAT_VERSION,
    Marker,
    PayloadError,
    SegmentHeader,
    WalHardState,
    WalTag,
    decode_fields,
    decode_footer,
    decode_header,
    decode_index,
    decode_marker,
    decode_wal_entry,
    encode_header,
)
from gateway.core.wal.errors import WalCorruptionError, WalFormatError
from gateway.core.wal.report import RecoveryEvent, RecoveryEventKind, RecoveryReport
from gateway.core.wal.segment import Segment, generation_of

__all__ = ["load_segment", "read_hard_state"]

#: How many bytes at the end of a sealed segment are read to find its footer (the footer
#: record is under 80 bytes; the slack lets the scan resynchronise on a separator).
TAIL_READ = 256


def load_segment(
    fs: FileSystem,
    path: str,
    name_index: int,
    *,
    is_last: bool,
    log_first: int,
    report: RecoveryReport,
) -> Segment:
    """Load the segment file ``path`` (named for ``name_index``).

    ``log_first`` is the log's first index: entries below it are not kept and damage before
    it is tolerated. The newest segment (``is_last``) gets its torn tail cut and keeps an open
    writer unless it is sealed. Raises `WalCorruptionError` / `WalFormatError`.
    """
    segment, reason = _load_by_footer(fs, path, name_index)
    if segment is not None:
        return segment
    if not is_last:
        report.events.append(
            RecoveryEvent(RecoveryEventKind.SEAL_DAMAGED, path, 0, 0,
                          f"footer not usable ({reason}); segment rescanned")
        )
    return _load_by_scan(fs, path, name_index, is_last=is_last, log_first=log_first,
                         report=report)


def _load_by_footer(fs: FileSystem, path: str, name_index: int) -> tuple[Segment | None, str]:
    """Install a sealed segment's index from its footer; ``(None, why)`` if it does not verify."""
    gen = generation_of(name_index)
    size = fs.size(path)
    if size < 16:
        return None, "file too short"
    reader = fs.open_readable(path)
    tail_at = max(0, size - TAIL_READ)
    tail = reader.pread(tail_at, size - tail_at)
    if not tail.endswith(SEPARATOR):
        return None, "file does not end with a separator"
    footer_rec = None
    for rec in scan(tail):
        if rec.end == len(tail) - 2:
            footer_rec = rec
    if footer_rec is None or footer_rec.generation != gen:
        return None, "no valid record ends the file"
    payload = footer_rec.payload
    if not payload or payload[0] != WalTag.SEGMENT_FOOTER:
        return None, "the last record is not a footer"
    try:
        ft = decode_footer(payload)
    except PayloadError as exc:
        return None, f"footer does not parse: {exc}"
    if ft.format_version > FORMAT_VERSION:
        raise WalFormatError(path, tail_at + footer_rec.offset,
                             f"segment format version {ft.format_version} is newer than "
                             f"{FORMAT_VERSION}")
    if ft.first_index < name_index or ft.index_end + 2 != tail_at + footer_rec.offset or (
        ft.index_offset >= ft.index_end
    ):
        return None, "footer fields are inconsistent"
    stuffed = reader.pread(ft.index_offset, ft.index_end - ft.index_offset)
    decoded = decode_record(stuffed)
    if decoded is None or decoded[0] != gen:
        return None, "index record does not verify"
    index_payload = decoded[1]
    if crc32c.crc32c(index_payload) != ft.index_crc32c or not index_payload or (
        index_payload[0] != WalTag.SEGMENT_INDEX
    ):
        return None, "index record does not match the footer"
    try:
        ix = decode_index(index_payload)
    except PayloadError as exc:
        return None, f"index record does not parse: {exc}"
    n = ix.count
    if ix.first_index != ft.first_index or n != ft.count or len(ix.bounds) != 4 * (n + 1) or (
        len(ix.term_runs) % 16
    ):
        return None, "index record sizes do not match"
    bounds = array("I")
    bounds.frombytes(ix.bounds)
    flat = array("Q")
    flat.frombytes(ix.term_runs)
    if sys.byteorder != "little":
        bounds.byteswap()
        flat.byteswap()
    if bounds[-1] != ft.index_offset:
        return None, "index bounds do not end at the index record"
    runs = [(flat[k], flat[k + 1]) for k in range(0, len(flat), 2)]
    terms = array("Q")
    for k, (start, term) in enumerate(runs):
        stop = runs[k + 1][0] if k + 1 < len(runs) else ix.first_index + n
        if stop < start:
            return None, "term runs out of order"
        terms.extend(array("Q", [term]) * (stop - start))
    if len(terms) != n or (runs and runs[0][0] != ix.first_index):
        return None, "term runs do not cover the entries"
    seg = Segment(fs, path, name_index)
    seg.set_entries(ix.first_index, bounds, terms, runs)
    if ix.last_marker:
        try:
            seg.last_marker = decode_marker(ix.last_marker, 0)
        except PayloadError as exc:
            return None, f"index record's last marker does not parse: {exc}"
    seg.data_start = bounds[0]
    seg.sealed = True
    seg.file_size = size
    seg._reader = reader
    return seg, ""


def _load_by_scan(
    fs: FileSystem,
    path: str,
    name_index: int,
    *,
    is_last: bool,
    log_first: int,
    report: RecoveryReport,
) -> Segment:
    gen = generation_of(name_index)
    buf = fs.read_all(path)
    n = len(buf)
    head_compacted = log_first > name_index
    pos = 2 if buf.startswith(SEPARATOR) else 0
    header_seen = False
    data_start = pos
    base: int | None = None
    bounds: list[int] = []
    terms: list[int] = []
    last_term = 0
    index_at: int | None = None
    footer_seen = False
    any_record = False
    markers: list[tuple[int, Marker]] = []
    for rec in scan(buf):
        if rec.generation != gen:
            continue  # a foreign record: damage, caught by the contiguity check below
        payload = rec.payload
        tag = payload[0] if payload else -1
        if rec.offset != pos and not (base is None and head_compacted):
            if tag in (WalTag.SEGMENT_INDEX, WalTag.SEGMENT_FOOTER) and index_at is None and (
                _seal_accounts_for(payload, base, len(terms))
            ):
                # Only the seal's own bytes are damaged: its counts prove no entry is missing.
                report.events.append(RecoveryEvent(
                    RecoveryEventKind.SEAL_DAMAGED, path, pos, rec.offset - pos,
                    "damaged bytes between the last entry and the seal"))
                index_at = pos
            else:
                raise WalCorruptionError(
                    path, pos, f"{rec.offset - pos} damaged bytes before a valid record at "
                    f"byte {rec.offset}"
                )
        if footer_seen:
            raise WalFormatError(path, rec.offset, "record after the segment footer")
        try:
            if tag == WalTag.ENTRY:
                if index_at is not None:
                    raise WalFormatError(path, rec.offset, "entry after the segment index")
                entry = decode_wal_entry(payload)
                if entry.index < log_first:
                    pass  # compacted away
                elif base is None:
                    want = max(name_index, log_first)
                    if entry.index != want:
                        raise WalCorruptionError(
                            path, rec.offset,
                            f"first entry is {entry.index}, expected {want}")
                    base = entry.index
                    bounds.append(rec.offset)
                    terms.append(entry.term)
                    last_term = entry.term
                else:
                    want = base + len(terms)
                    if entry.index != want:
                        raise WalCorruptionError(
                            path, rec.offset, f"entry {entry.index} where {want} was expected")
                    if entry.term < last_term:
                        raise WalCorruptionError(
                            path, rec.offset,
                            f"entry {entry.index} has term {entry.term} below {last_term}")
                    bounds.append(rec.offset)
                    terms.append(entry.term)
                    last_term = entry.term
            elif tag == WalTag.HARD_STATE:
                if index_at is not None:
                    raise WalFormatError(path, rec.offset, "marker after the segment index")
                markers.append((len(terms), decode_marker(payload)))
            elif tag == WalTag.SEGMENT_HEADER:
                if any_record:
                    raise WalFormatError(path, rec.offset, "segment header is not first")
                header = decode_header(payload)
                if header.first_index != name_index:
                    raise WalCorruptionError(
                        path, rec.offset, f"header says the segment starts at "
                        f"{header.first_index}, the file name says {name_index}")
                if header.format_version > FORMAT_VERSION:
                    raise WalFormatError(path, rec.offset,
                                         f"segment format version {header.format_version} is "
                                         f"newer than {FORMAT_VERSION}")
                header_seen = True
                data_start = rec.end + 2
            elif tag == WalTag.SEGMENT_INDEX:
                if index_at is not None and index_at != pos:
                    raise WalFormatError(path, rec.offset, "second segment index")
                if index_at is None:
                    index_at = rec.offset
            elif tag == WalTag.SEGMENT_FOOTER:
                if index_at is None and rec.offset == pos:
                    raise WalFormatError(path, rec.offset, "footer without an index")
                footer_seen = True
            else:
                raise WalFormatError(path, rec.offset, f"unexpected record type tag {tag}")
        except PayloadError as exc:
            raise WalFormatError(path, rec.offset + exc.offset, exc.reason) from None
        any_record = True
        pos = rec.end + 2

    seg = Segment(fs, path, name_index)
    seg.data_start = data_start
    if base is None:
        base = max(name_index, log_first)
        bounds.append(max(pos, data_start) if index_at is None else index_at)
    else:
        bounds.append(index_at if index_at is not None else pos)
    seg.set_entries(base, bounds, terms)
    seg.scan_markers = markers
    if markers:
        seg.last_marker = markers[-1][1]
    end_of_entries = seg.end

    if not is_last:
        if not footer_seen or pos < n:
            report.events.append(RecoveryEvent(
                RecoveryEventKind.SEAL_DAMAGED, path, end_of_entries, n - end_of_entries,
                "seal (index + footer) missing or damaged after the last entry"))
        seg.sealed = True
        seg.file_size = n
        return seg

    # The newest segment: keep a complete seal, cut anything else after the last entry.
    if footer_seen and pos == n:
        seg.sealed = True
        seg.file_size = n
        return seg
    writer = fs.open_writable(path)
    if not header_seen and not terms:
        # Creation itself was interrupted: start the file over.
        report.events.append(RecoveryEvent(
            RecoveryEventKind.TORN_TAIL, path, 0, n, "segment header missing; file rewritten"))
        writer.truncate(0)
        head = SEPARATOR + encode_record_header(name_index)
        writer.write(head)
        seg.data_start = len(head)
        seg.set_entries(name_index if log_first <= name_index else base, [len(head)], [])
    elif end_of_entries != n:
        cut = end_of_entries
        if cut > n:  # the last record ends the file without its separator
            cut = n
            detail = "final separator missing; restored"
        elif index_at is not None:
            detail = "interrupted seal cut"
        else:
            detail = "bytes after the last valid record cut"
        report.events.append(RecoveryEvent(RecoveryEventKind.TORN_TAIL, path, cut, n - cut,
                                           detail))
        writer.truncate(cut)
        if cut < end_of_entries:
            writer.write(SEPARATOR[: end_of_entries - cut])
    else:
        seg.writer = writer
        return seg
    writer.sync()
    seg.writer = writer
    return seg


def _seal_accounts_for(payload: bytes, base: int | None, count: int) -> bool:
    """Whether an index or footer record says its segment ends exactly after the ``count``
    entries found from ``base``."""
    try:
        fields = decode_fields(payload)
    except PayloadError:
        return False
    first, n = fields.get(1, 0), fields.get(2, 0)
    if base is None or not isinstance(first, int) or not isinstance(n, int):
        return False
    return first + n == base + count and first <= base


def encode_record_header(name_index: int) -> bytes:
    """The header record (with its separator) of the segment named for ``name_index``."""
    return encode_record(encode_header(SegmentHeader(name_index)), generation_of(name_index))


def segment_first_index(name: str) -> int | None:
    """The first index encoded in a segment file name, or ``None`` if it is not one."""
    stem, ext = os.path.splitext(name)
    if ext != ".wal" or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def read_hard_state(fs: FileSystem, directory: str) -> WalHardState:
    """The current hard state of the WAL in ``directory`` without opening it (read-only, for
    log tools): the record with the highest ``seq`` among the meta file's and the commit
    markers of the newest segment that has any. Unreadable records are skipped."""
    from gateway.core.wal.meta import META_NAME

    best = Marker()
    meta = os.path.join(directory, META_NAME)
    if fs.exists(meta):
        for rec in scan(fs.read_all(meta)):
            if rec.payload[:1] == bytes((WalTag.HARD_STATE,)):
                try:
                    best = decode_marker(rec.payload)
                except PayloadError:
                    continue
    names = sorted((idx, name) for name in fs.listdir(directory)
                   if (idx := segment_first_index(name)) is not None)
    for idx, name in reversed(names):
        gen = generation_of(idx)
        last: Marker | None = None
        for rec in scan(fs.read_all(os.path.join(directory, name))):
            if rec.generation == gen and rec.payload[:1] == bytes((WalTag.HARD_STATE,)):
                try:
                    last = decode_marker(rec.payload)
                except PayloadError:
                    continue
        if last is not None:
            if last.seq > best.seq:
                best = last
            break
    return best.hard_state
