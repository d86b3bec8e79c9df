"""Blocked bloom filter with one 64-bit word per probe.

A key is hashed once with two C-speed 32-bit hashes: ``h1 = crc32c(key)`` picks the word
(``h1 % nwords``) and the top 14 bits of ``h2 = zlib.crc32(key)`` pick one of 16384 precomputed
masks of ``K`` bits. Membership is ``words[h1 % nwords] & mask == mask``: one array lookup and
two integer operations in Python, versus a loop of k bit probes in a classic filter. With 12
bits per key and ``K = 6`` the false-positive rate is about 1% (a blocked filter pays ~0.2
points over a classic one for the speed).

The hashes are computed once per lookup (:func:`key_hash`) and shared by every table probed,
so a miss across ten tables costs one hash and ten word tests.

Contract: no false negatives for keys added with :meth:`BloomBuilder.add_keys`; the masks and
hashes are part of the on-disk format (``docs/formats/sstable.md``) and never change for
format version 1.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from typing import Protocol, cast

import crc32c as _crc32c

from gateway.core import accel
from gateway.core.lsm.format import TAG_BLOOM

__all__ = ["BITS_PER_KEY", "MASKS", "BloomBuilder", "K", "decode_bloom", "key_hash", "key_hashes",
           "maybe_present"]

BITS_PER_KEY = 12
K = 6
MASK_BITS = 14
_SHIFT = 32 - MASK_BITS
_crc = _crc32c.crc32c
_zcrc = zlib.crc32
_HEAD = struct.Struct("<BBBI")
_LITTLE = sys.byteorder == "little"


class _BloomC(Protocol):
    """The functions of the C accelerator ``_bloom.c`` (their Python specifications are the
    ``_py`` functions of this module). ``hashes`` gives the native-order bytes of the uint32
    word selectors and the uint64 masks."""

    def hashes(self, keys: list[bytes], masks: array[int], /) -> tuple[bytes, bytes]: ...

    def maybe(self, words: array[int], h1s: Sequence[int], masks: Sequence[int], start: int,
              stop: int, /) -> list[int]: ...

    def build(self, h1s: array[int], masks: array[int], nwords: int, /) -> bytes: ...


# None: the Python loop serves
_accel = cast("_BloomC | None", accel.load("gateway.core.lsm._bloom"))


def _build_masks() -> list[int]:
    """The 2**14 masks: mask j sets K distinct bits drawn from a splitmix64 stream seeded by j."""
    masks = []
    for j in range(1 << MASK_BITS):
        x = j
        mask = 0
        bits = 0
        while bits < K:
            x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
            z ^= z >> 31
            bit = 1 << (z & 63)
            if not mask & bit:
                mask |= bit
                bits += 1
        masks.append(mask)
    return masks


MASKS: list[int] = _build_masks()
_MASK_ARRAY = array("Q", MASKS)


def key_hash(key: bytes) -> tuple[int, int]:
    """Return ``(h1, mask)`` for ``key``: the word selector and the bit mask to test."""
    return _crc(key), MASKS[_zcrc(key) >> _SHIFT]


def _key_hashes_py(keys: list[bytes]) -> tuple[array[int], array[int]]:
    """The specification of ``key_hashes`` (and its fallback)."""
    return (array("I", map(_crc, keys)),
            array("Q", [MASKS[h >> _SHIFT] for h in map(_zcrc, keys)]))


def key_hashes(keys: list[bytes]) -> tuple[Sequence[int], Sequence[int]]:
    """``key_hash`` of every key of ``keys`` (a list of bytes), as sequences ``(h1s,
    masks)`` of uint32 and uint64 for ``maybe_present``; in C when the accelerator is
    built."""
    if _accel is not None:
        h1s, masks = _accel.hashes(keys, _MASK_ARRAY)
        return memoryview(h1s).cast("I"), memoryview(masks).cast("Q")
    return _key_hashes_py(keys)


def _maybe_present_py(words: array[int], h1s: Sequence[int], masks: Sequence[int], start: int,
                      stop: int) -> list[int]:
    """The specification of ``maybe_present`` (and its fallback)."""
    n = len(words)
    return [i for i in range(start, stop) if (words[h1s[i] % n] & masks[i]) == masks[i]]


def maybe_present(words: array[int], h1s: Sequence[int], masks: Sequence[int], start: int, stop: int
                  ) -> list[int]:
    """The indices ``i`` in ``[start, stop)`` of keys (hashed by ``key_hashes``) that the
    filter ``words`` may hold: no false negatives, about 1% false positives. In C when the
    accelerator is built (one call per table, not one Python step per key)."""
    if _accel is not None:
        return _accel.maybe(words, h1s, masks, start, stop)
    return _maybe_present_py(words, h1s, masks, start, stop)


def _build_words_py(h1s: Sequence[int], masks: Sequence[int], nwords: int) -> list[int]:
    """The filter's ``nwords`` words: ``words[h1 % nwords] |= mask`` for every key (the
    specification of the accelerator's ``build``)."""
    words = [0] * nwords
    for h1, m in zip(h1s, masks, strict=True):
        words[h1 % nwords] |= m
    return words


class BloomBuilder:
    """Collects key hashes (12 bytes per key: ``key_hash``'s word selector and mask) and
    builds the filter once the count is known; in C when the accelerator is built (one call
    per ``add_keys`` and one per ``finish``, not one Python step per key)."""

    def __init__(self) -> None:
        self._h1 = array("I")
        self._m = array("Q")

    def add_keys(self, keys: Iterable[bytes] | list[bytes]) -> None:
        """Add every key of ``keys`` (any order, duplicates allowed)."""
        keys = keys if type(keys) is list else list(keys)
        if _accel is not None:  # native-order bytes of uint32 and uint64
            h1s, masks = _accel.hashes(keys, _MASK_ARRAY)
            self._h1.frombytes(h1s)
            self._m.frombytes(masks)
        else:
            h1_arr, mask_arr = _key_hashes_py(keys)
            self._h1.extend(h1_arr)
            self._m.extend(mask_arr)

    def __len__(self) -> int:
        return len(self._h1)

    def finish(self) -> bytes:
        """Return the bloom record payload (tag, version, K, nwords, words)."""
        n = len(self._h1)
        nwords = max(1, (n * BITS_PER_KEY + 63) // 64)
        head = _HEAD.pack(TAG_BLOOM, 1, K, nwords)
        if _accel is not None and _LITTLE:
            return head + _accel.build(self._h1, self._m, nwords)
        arr = array("Q", _build_words_py(self._h1, self._m, nwords))
        if not _LITTLE:  # pragma: no cover
            arr.byteswap()
        return head + arr.tobytes()


def decode_bloom(payload: bytes) -> array[int]:
    """Return the filter words of a bloom record payload; ``ValueError`` if malformed."""
    tag, version, k, nwords = _HEAD.unpack_from(payload)
    if tag != TAG_BLOOM or version != 1 or k != K:
        raise ValueError(f"not a version-1 bloom record (tag {tag:#x}, version {version}, k {k})")
    if len(payload) != _HEAD.size + 8 * nwords or nwords == 0:
        raise ValueError(f"bloom record of {len(payload)} bytes does not hold {nwords} words")
    arr = array("Q")
    arr.frombytes(payload[_HEAD.size :])
    if not _LITTLE:  # pragma: no cover
        arr.byteswap()
    return arr
