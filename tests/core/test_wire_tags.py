"""One source of wire keys: the C accelerators' field keys (``gateway/v1/wire_tags.h``) are
generated from the .proto files with the same names and values as ``gateway.v1.wire_tags``,
``gen_proto.py`` regenerates the committed header, and the C code reads varints with the one
reader of ``gateway/core/_protowire.h``."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from gateway.v1 import wire_tags

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "gateway" / "v1" / "wire_tags.h"
_DEFINE = re.compile(r"^#define ([A-Z0-9_]+) (0x[0-9a-f]+|[0-9]+)$")


def _header_values(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _DEFINE.match(line)
        if m and m.group(1) != "GATEWAY_V1_WIRE_TAGS_H":
            assert m.group(1) not in out, f"wire_tags.h: {m.group(1)} defined twice"
            out[m.group(1)] = int(m.group(2), 0)
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_c_header_has_every_python_wire_tag_with_the_same_value() -> None:
    python = {k: v for k, v in vars(wire_tags).items() if k.isupper()}
    header = _header_values(HEADER.read_text())
    assert set(header) == set(python)
    for name, value in python.items():
        if isinstance(value, bytes):  # a key: the header holds the integer its varint reads as
            assert _varint(header[name]) == value, name
        else:
            assert header[name] == value, name
    # spot checks against the protobuf runtime's own numbers
    from gateway.v1 import transaction_pb2, value_pb2

    txn = transaction_pb2.Transaction.DESCRIPTOR.fields_by_name
    assert header["TRANSACTION_STATEMENTS"] == txn["statements"].number
    assert header["TRANSACTION_STATEMENTS_KEY"] == txn["statements"].number << 3 | 2
    assert header["VALUE_TIMESTAMP_NS_KEY"] == (
        value_pb2.Value.DESCRIPTOR.fields_by_name["timestamp_ns"].number << 3 | 1)


def test_gen_proto_writes_the_committed_c_header(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    spec = importlib.util.spec_from_file_location("_gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec.loader.exec_module(gen)
        gen.PYTHON.generate(tmp_path)
        assert Path("gateway/v1/wire_tags.h") in gen.PYTHON.owned()  # so --check covers it
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert (tmp_path / "gateway" / "v1" / "wire_tags.h").read_text() == HEADER.read_text()


def test_c_accelerators_use_one_varint_reader() -> None:
    """Only _protowire.h decodes base-128 varints; every C file includes it instead of keeping
    a copy (a copy drifts: overlong and 64-bit overflow checks must agree everywhere)."""
    sources = sorted(p for d in ("gateway", "spark_applier") for p in (ROOT / d).rglob("*.[ch]"))
    assert sources
    readers = [p.relative_to(ROOT).as_posix() for p in sources
               if re.search(r"&\s*0x7f\)?\s*<<", p.read_text(), re.IGNORECASE)]
    assert readers == ["gateway/core/_protowire.h"]


@pytest.mark.parametrize("source", ["gateway/node/_wire.c", "gateway/core/_columns.c",
                                    "spark_applier/_txndecode.c"])
def test_c_wire_readers_take_their_keys_from_the_generated_header(source: str) -> None:
    text = (ROOT / source).read_text()
    assert re.search(r'#include "[./]*(gateway/)?v1/wire_tags\.h"', text), source
    # no comparison of a read tag with a literal byte: the names say which field it is
    literal = re.findall(r"\b(?:tag|t|got|code)\s*[!=]=\s*0x[0-9a-fA-F]{2}\b", text)
    assert literal == [], f"{source}: literal field keys {literal}"
