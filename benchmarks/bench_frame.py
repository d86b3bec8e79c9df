"""Transport frame throughput beside the record stream, measured in the same run.

Encode and decode (with CRC check), in frames/s and MB/s of payload, for payloads of 40 B,
200 B and 4 KiB:

- ``frame``        gateway.core.frame: encode_frame / decode_frame over one buffer
- ``frame-reader`` FrameReader over io.BytesIO (the streaming path)
- ``records``      gateway.core.records encode_record / scan (the on-disk format), for scale

Usage: python benchmarks/bench_frame.py [--quick]
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable
from typing import Any

from gateway.core import records
from gateway.core.frame import FrameReader, decode_frame, encode_frame

SIZES = [(40, 200_000), (200, 100_000), (4096, 10_000)]


def _best_of(fn: Callable[[Any], object], arg: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def frame_encode(payloads: list[bytes]) -> bytes:
    return b"".join([encode_frame(1, p) for p in payloads])


def frame_decode(buf: bytes) -> int:
    pos, n, end = 0, 0, len(buf)
    while pos < end:
        _, _, pos = decode_frame(buf, pos)
        n += 1
    return n


def reader_decode(buf: bytes) -> int:
    return sum(1 for _ in FrameReader(io.BytesIO(buf)))


def records_encode(payloads: list[bytes]) -> bytes:
    return b"".join([records.encode_record(p) for p in payloads])


def records_scan(buf: bytes) -> int:
    return sum(1 for _ in records.scan(buf))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the work")
    ns = parser.parse_args()
    print(f"{'size':>6} {'peer':<13} {'encode rec/s':>13} {'MB/s':>8} "
          f"{'decode rec/s':>13} {'MB/s':>8} {'decode/records':>15}")
    for size, count in SIZES:
        count = count // 10 if ns.quick else count
        payloads = [os.urandom(size) for _ in range(count)]
        frames = frame_encode(payloads)
        stream = records_encode(payloads)
        assert frame_decode(frames) == reader_decode(frames) == records_scan(stream) == count
        rows = [
            ("frame", _best_of(frame_encode, payloads), _best_of(frame_decode, frames)),
            ("frame-reader", float("nan"), _best_of(reader_decode, frames)),
            ("records", _best_of(records_encode, payloads), _best_of(records_scan, stream)),
        ]
        records_dec = rows[-1][2]
        mb = size * count / 1e6
        for name, enc, dec in rows:
            print(f"{size:>6} {name:<13} {count / enc:>13,.0f} {mb / enc:>8.1f} "
                  f"{count / dec:>13,.0f} {mb / dec:>8.1f} {records_dec / dec:>14.2f}x")


if __name__ == "__main__":
    main()
