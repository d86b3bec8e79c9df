"""Corruption matrix: damage of each kind loses only the records that overlap it.

Every record is written with a unique payload. After damaging the byte range ``[a, b)`` of the
stream, every record whose bytes *including both adjacent separators* lie outside the damage
must still be read, and nothing may be read that was never written.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

import pytest

from gateway.core.records import SEPARATOR, encode_record, scan, verify

PAGE = 4096


def _payloads(rng: random.Random, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        size = rng.choice([0, 10, 40, 200, 251, 300, 1500, 5000])
        body = bytes(rng.choice(b"\xfe\xfd\x00ab") for _ in range(size))
        out.append(i.to_bytes(4, "little") + body)
    return out


def _build(payloads: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """The stream, and per record the closed byte span from its leading separator's first
    byte to its trailing separator's last byte."""
    buf = bytearray(SEPARATOR)
    spans = []
    for p in payloads:
        start = len(buf) - 2
        buf += encode_record(p)
        spans.append((start, len(buf) - 1))
    return bytes(buf), spans


Damage = Callable[[bytes, random.Random], tuple[bytes, int, int]]


def flip_bit(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    i = rng.randrange(len(buf))
    out = bytearray(buf)
    out[i] ^= 1 << rng.randrange(8)
    return bytes(out), i, i + 1


def overwrite(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    i = rng.randrange(len(buf))
    n = rng.randrange(1, 64)
    out = bytearray(buf)
    out[i : i + n] = bytes(rng.randrange(256) for _ in range(len(out[i : i + n])))
    return bytes(out), i, i + n


def insert_garbage(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    i = rng.randrange(len(buf))
    junk = bytes(rng.choice(b"\xfe\xfd\x01\x02") for _ in range(rng.randrange(1, 50)))
    return buf[:i] + junk + buf[i:], i, i + 1


def delete_bytes(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    i = rng.randrange(len(buf))
    n = rng.randrange(1, 64)
    return buf[:i] + buf[i + n :], i, i + n


def zero_page(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    page = rng.randrange(max(1, len(buf) // PAGE)) * PAGE
    end = min(page + PAGE, len(buf))
    return buf[:page] + bytes(end - page) + buf[end:], page, end


def duplicate_page(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    page = rng.randrange(max(1, len(buf) // PAGE)) * PAGE
    chunk = buf[page : page + PAGE]
    return buf[:page] + chunk + buf[page:], page, page + 1


def truncate_tail(buf: bytes, rng: random.Random) -> tuple[bytes, int, int]:
    i = rng.randrange(len(buf))
    return buf[:i], i, len(buf)


DAMAGES: list[Damage] = [
    flip_bit, overwrite, insert_garbage, delete_bytes, zero_page, duplicate_page, truncate_tail,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("seed", range(12))
def test_only_records_overlapping_the_damage_are_lost(damage: Damage, seed: int):
    rng = random.Random(seed * 7919 + zlib.crc32(damage.__name__.encode()))
    payloads = _payloads(rng, 40)
    buf, spans = _build(payloads)
    damaged, a, b = damage(buf, rng)
    found = [r.payload for r in scan(damaged)]
    written = set(payloads)
    assert all(p in written for p in found), "read a record that was never written"
    untouched = [p for p, (s, e) in zip(payloads, spans, strict=True) if e < a or s >= b]
    survivors = iter(found)
    for p in untouched:  # in order, as a subsequence of what was read
        assert any(p == q for q in survivors), f"lost untouched record {p[:4].hex()}"


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
def test_verify_reports_damage_where_records_were_lost(damage: Damage):
    rng = random.Random(42)
    payloads = _payloads(rng, 30)
    buf, _ = _build(payloads)
    for _ in range(20):
        damaged, _a, _b = damage(buf, rng)
        report = verify(damaged)
        lost = len(payloads) - len({r.payload for r in scan(damaged)})
        assert report.records == len(list(scan(damaged)))
        if lost and damage is not zero_page:
            assert report.damaged, "records were lost but no damage was reported"


def test_verify_flags_a_torn_tail():
    buf, _ = _build([b"a" * 100, b"b" * 100])
    report = verify(buf[:-40])
    assert report.torn_tail and report.records == 1
    assert report.damaged[-1].end == len(buf) - 40


def test_verify_of_an_intact_stream_is_ok():
    buf, _ = _build([b"a", b"b", b"c"])
    report = verify(buf)
    assert report.ok and report.records == 3 and not report.torn_tail
    assert report.payload_bytes == 3


def test_verify_reports_middle_damage_with_its_byte_range():
    buf, spans = _build([b"a" * 50, b"b" * 50, b"c" * 50])
    broken = bytearray(buf)
    broken[spans[1][0] + 20] ^= 0x10
    report = verify(bytes(broken))
    assert report.records == 2 and not report.torn_tail
    (rng,) = report.damaged
    assert rng.start == spans[1][0] + 2 and rng.end == spans[1][1] - 1
