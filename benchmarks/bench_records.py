"""Record stream throughput beside its peers, measured in the same run.

Encode+checksum and scan+verify, in records/s and MB/s of payload, for payloads of 40 B,
200 B, 4 KiB and 1 MiB:

- ``gateway``       gateway.core.records with the C accelerator (what the product uses)
- ``gateway-py``    the pure-Python specification (the fallback without a compiler)
- ``cobs``          the ``cobs`` package (C): COBS-encode + zero delimiter; decode by split.
                    No checksum, so it does less work than the others.
- ``len+crc``       length prefix + CRC-32C framing (struct + crc32c package), not
                    self-synchronising.

Usage: python benchmarks/bench_records.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import struct
import time
from collections.abc import Callable

import crc32c
from cobs import cobs

from gateway.core import records

SIZES = [(40, 300_000), (200, 200_000), (4096, 20_000), (1 << 20, 60)]
_LEN_CRC = struct.Struct("<II")


def _best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gateway_encode(payloads: list[bytes]) -> bytes:
    enc = records.encode_record
    return b"".join([enc(p) for p in payloads])


def gateway_scan(buf: bytes) -> int:
    n = 0
    for _ in records.scan(buf):
        n += 1
    return n


def py_encode(payloads: list[bytes]) -> bytes:
    enc = records._encode_py
    return b"".join([enc(p) for p in payloads])


def py_scan(buf: bytes) -> int:
    n = 0
    for _ in records._scan_py(buf, 0, len(buf)):
        n += 1
    return n


def cobs_encode(payloads: list[bytes]) -> bytes:
    enc = cobs.encode
    return b"".join([enc(p) + b"\x00" for p in payloads])


def cobs_scan(buf: bytes) -> int:
    dec = cobs.decode
    n = 0
    for chunk in buf.split(b"\x00"):
        if chunk:
            dec(chunk)
            n += 1
    return n


def lencrc_encode(payloads: list[bytes]) -> bytes:
    pack, crc = _LEN_CRC.pack, crc32c.crc32c
    return b"".join([pack(len(p), crc(p)) + p for p in payloads])


def lencrc_scan(buf: bytes) -> int:
    unpack, crc = _LEN_CRC.unpack_from, crc32c.crc32c
    pos, end, n = 0, len(buf), 0
    while pos < end:
        size, expected = unpack(buf, pos)
        body = buf[pos + 8 : pos + 8 + size]
        if crc(body) == expected:
            n += 1
        pos += 8 + size
    return n


PEERS = {
    "gateway": (gateway_encode, gateway_scan),
    "gateway-py": (py_encode, py_scan),
    "cobs": (cobs_encode, cobs_scan),
    "len+crc": (lencrc_encode, lencrc_scan),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records")
    ns = parser.parse_args()
    print(f"accelerator: {'C' if records.ACCELERATED else 'absent (pure Python)'}")
    header = (
        f"{'size':>7} {'peer':<11} {'enc rec/s':>12} {'enc MB/s':>9} {'enc/cobs':>8} "
        f"{'scan rec/s':>12} {'scan MB/s':>9} {'scan/cobs':>9}"
    )
    print(header)
    print("-" * len(header))
    for size, count in SIZES:
        if ns.quick:
            count = max(10, count // 10)
        payloads = [os.urandom(size) for _ in range(count)]
        mb = size * count / 1e6
        results = {}
        for name, (encode, scan) in PEERS.items():
            buf = encode(payloads)
            assert scan(buf) == count, name
            t_enc = _best_of(lambda encode=encode, p=payloads: encode(p))
            t_scan = _best_of(lambda scan=scan, buf=buf: scan(buf))
            results[name] = (t_enc, t_scan)
        c_enc, c_scan = results["cobs"]
        for name, (t_enc, t_scan) in results.items():
            print(
                f"{size:>7} {name:<11} {count / t_enc:>12,.0f} {mb / t_enc:>9.1f} "
                f"{c_enc / t_enc:>8.2f} {count / t_scan:>12,.0f} {mb / t_scan:>9.1f} "
                f"{c_scan / t_scan:>9.2f}"
            )


if __name__ == "__main__":
    main()
