#!/usr/bin/env python3
"""Generate (or check) the committed Python code for every ``proto/**/*.proto``.

The ``.proto`` sources live under ``proto/`` with package paths mirrored as directories
(``proto/gateway/v1/log.proto`` is package ``gateway.v1``), so the generated modules land in
the ``gateway`` package as ``gateway/v1/log_pb2.py`` and import each other correctly.

    python scripts/gen_proto.py          # regenerate in place
    python scripts/gen_proto.py --check  # exit 1 if the committed code is stale
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"


def _generate(out_dir: Path) -> list[Path]:
    from grpc_tools import protoc  # imported late: only a dev dependency

    sources = sorted(PROTO_ROOT.rglob("*.proto"))
    if not sources:
        return []
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(s.relative_to(PROTO_ROOT)) for s in sources],
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit(f"gen_proto: protoc failed with exit code {rc}")
    generated = []
    for path in sorted(out_dir.rglob("*")):
        if path.is_file():
            # grpc_python_out writes an empty-ish module for protos without services; keep
            # only files that define something.
            if path.name.endswith("_pb2_grpc.py") and "class " not in path.read_text():
                path.unlink()
                continue
            generated.append(path.relative_to(out_dir))
    return generated


def _committed() -> list[Path]:
    out = []
    for pattern in ("*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py"):
        out.extend(p.relative_to(ROOT) for p in (ROOT / "gateway").rglob(pattern))
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if generated code is stale")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        generated = _generate(tmp_path)
        if ns.check:
            stale = [
                str(rel)
                for rel in generated
                if not (ROOT / rel).exists() or not filecmp.cmp(tmp_path / rel, ROOT / rel, False)
            ]
            extra = sorted(set(map(str, _committed())) - set(map(str, generated)))
            if stale or extra:
                print("gen_proto: generated protobuf code is stale; run scripts/gen_proto.py",
                      file=sys.stderr)
                for name in stale:
                    print(f"  differs or missing: {name}", file=sys.stderr)
                for name in extra:
                    print(f"  no longer generated: {name}", file=sys.stderr)
                return 1
            print(f"gen_proto: {len(generated)} generated files are current")
            return 0
        for stale_file in set(_committed()) - set(generated):
            (ROOT / stale_file).unlink()
        for rel in generated:
            dest = ROOT / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_path / rel, dest)
        print(f"gen_proto: wrote {len(generated)} files")
        return 0


if __name__ == "__main__":
    sys.exit(main())
