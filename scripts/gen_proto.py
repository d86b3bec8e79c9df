#!/usr/bin/env python3
"""Generate (or check) the committed code for ``proto/**/*.proto`` in every language.

Python: every ``.proto`` under ``proto/``, with package paths mirrored as directories
(``proto/gateway/v1/log.proto`` is package ``gateway.v1``), so the generated modules land in
the ``gateway`` package as ``gateway/v1/log_pb2.py`` and import each other correctly.
Go, Java, TypeScript: the public API (``gateway.proto`` and its imports) into ``clients/go``,
``clients/java`` and ``clients/typescript``, with pinned generators (``scripts/gen_clients.py``).

    python scripts/gen_proto.py                   # regenerate every language in place
    python scripts/gen_proto.py --check           # exit 1 if any committed code is stale
    python scripts/gen_proto.py --lang python,go  # only these languages
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_clients import ROOT, TARGETS, GenError, Target

PROTO_ROOT = ROOT / "proto"


def _generate_python(out_dir: Path) -> None:
    from grpc_tools import protoc  # imported late: only a dev dependency

    sources = sorted(PROTO_ROOT.rglob("*.proto"))
    if not sources:
        return
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
        raise GenError(f"Python: protoc failed with exit code {rc}")
    # grpc_python_out writes an empty-ish module for protos without services; keep only files
    # that define something.
    for path in out_dir.rglob("*_pb2_grpc.py"):
        if "class " not in path.read_text():
            path.unlink()


def _python_owned() -> list[Path]:
    out = []
    for pattern in ("*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py"):
        out.extend(p.relative_to(ROOT) for p in (ROOT / "gateway").rglob(pattern))
    return sorted(out)


PYTHON = Target("python", ROOT, _generate_python, _python_owned)
ALL = {"python": PYTHON, **TARGETS}


def _sync(target: Target, check: bool) -> bool:
    """Generate ``target`` in a scratch directory, then compare (``check``) or copy it over
    the committed files (removing those no longer generated). Returns False when stale."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        target.generate(tmp_path)
        generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
        owned = set(target.owned())
        if check:
            stale = [rel for rel in generated
                     if not (target.out_dir / rel).exists()
                     or not filecmp.cmp(tmp_path / rel, target.out_dir / rel, False)]
            extra = sorted(owned - set(generated))
            where = target.out_dir.relative_to(ROOT)
            for rel in stale:
                print(f"  {target.name}: differs or missing: {where / rel}", file=sys.stderr)
            for rel in extra:
                print(f"  {target.name}: no longer generated: {where / rel}", file=sys.stderr)
            if not stale and not extra:
                print(f"gen_proto: {target.name}: {len(generated)} generated files are current")
            return not stale and not extra
        for rel in owned - set(generated):
            (target.out_dir / rel).unlink()
        for rel in generated:
            dest = target.out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_path / rel, dest)
        print(f"gen_proto: {target.name}: wrote {len(generated)} files")
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if generated code is stale")
    parser.add_argument("--lang", default=",".join(ALL),
                        help=f"comma-separated languages (default: all of {', '.join(ALL)})")
    ns = parser.parse_args()
    langs = [x.strip() for x in ns.lang.split(",") if x.strip()]
    unknown = [x for x in langs if x not in ALL]
    if unknown or not langs:
        parser.error(f"--lang: unknown language {', '.join(unknown) or '(none)'}; "
                     f"choose from {', '.join(ALL)}")
    stale = [lang for lang in langs if not _sync(ALL[lang], ns.check)]
    if stale:
        print(f"gen_proto: generated code is stale for {', '.join(stale)}; run "
              f"python scripts/gen_proto.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
