"""Code generation for the Go, Java and TypeScript clients (used by ``scripts/gen_proto.py``).

Each client gets the public API -- ``gateway/v1/gateway.proto``, ``gateway/v1/reads.proto`` and
the files they import,
found by following the ``import`` lines -- and nothing of the internal protocols (``peer``,
``wal``, ``applier``). Every generator is pinned so that generation is reproducible:

==========================  ========================================================================
Go messages                 protoc-gen-go ``PROTOC_GEN_GO`` (= google.golang.org/protobuf in go.mod)
Go services                 protoc-gen-go-grpc ``PROTOC_GEN_GO_GRPC``
TypeScript                  ts-proto, the exact version in clients/typescript/package.json
Java                        not here: Maven generates it at build time (clients/java/pom.xml)
==========================  ========================================================================

Go and TypeScript run under the protoc of ``grpcio-tools`` (pinned in pyproject.toml, as for
Python); their tools are fetched on first use with each ecosystem's own client (``go install``,
``npm ci``) into its default cache. Both commit their generated code, as their ecosystems do:
a Go module is built from its repository by ``go get``, which runs no generator, and npm has
no build-time protoc of its own (ts-proto runs under protoc, which here comes from Python).

Java follows its own convention instead: ``io.gateway.v1`` is generated into ``target/`` by
protobuf-maven-plugin with protoc and protoc-gen-grpc-java from Maven Central (versions
pinned in the pom) and never committed. The ``java`` target here only checks that: no file is
committed under ``io/gateway/v1`` (regenerating deletes any), and the pom's ``<includes>``
name exactly the public API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
API_PROTO = "gateway/v1/gateway.proto"
#: The public API's other roots: services of their own beside ``Gateway`` (each with its imports;
#: docs/schema.md for Schema).
API_ROOTS = (API_PROTO, "gateway/v1/reads.proto", "gateway/v1/schema.proto")

PROTOC_GEN_GO = "v1.36.12"
PROTOC_GEN_GO_GRPC = "v1.6.2"

GO_DIR = ROOT / "clients" / "go"
GO_MODULE = "gateway/clients/go"
JAVA_DIR = ROOT / "clients" / "java"
JAVA_SRC = JAVA_DIR / "src" / "main" / "java"
JAVA_GENERATED = JAVA_SRC / "io" / "gateway" / "v1"  # Maven's, under target/; never committed
TS_DIR = ROOT / "clients" / "typescript"
# grpc-js service clients; 64-bit integers as bigint (lossless); oneofs as typed unions
TS_OPTIONS = ("outputServices=grpc-js,forceLong=bigint,oneof=unions-value,esModuleInterop=true,"
              "env=node")

_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)


class GenError(SystemExit):
    """A generator could not be set up or failed; the message says which and why."""

    def __init__(self, message: str) -> None:
        super().__init__(f"gen_proto: {message}")


@dataclass(frozen=True)
class Target:
    """One language: ``generate(tmp)`` writes its files under ``tmp`` with the layout they have
    under ``out_dir``; ``owned()`` lists the committed generated files (relative to
    ``out_dir``), so that files no longer generated are found and removed."""

    name: str
    out_dir: Path
    generate: Callable[[Path], None]
    owned: Callable[[], list[Path]]


def api_protos() -> list[str]:
    """``gateway.proto``, the other :data:`API_ROOTS` and everything they import, transitively
    (paths under proto/)."""
    seen: set[str] = set()
    todo = list(API_ROOTS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = PROTO_ROOT / name
        if not path.is_file():
            if name.startswith("google/protobuf/"):
                continue  # well-known types come with protoc
            raise GenError(f"{name}: imported but not found under proto/")
        seen.add(name)
        todo.extend(_IMPORT.findall(path.read_text()))
    return sorted(seen)


def _run(cmd: list[str], what: str, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise GenError(f"{what}: '{cmd[0]}' is not installed") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise GenError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _grpc_tools_protoc(args: list[str], what: str) -> None:
    from grpc_tools import protoc  # imported late: only a dev dependency

    include = Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{include}", *args])
    if rc != 0:
        raise GenError(f"{what}: protoc failed with exit code {rc}")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gateway-codegen"


def _files_under(root: Path, suffixes: Iterable[str]) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(tuple(suffixes)))


# -- Go ----------------------------------------------------------------------------------------


def _require_version(file: Path, pattern: str, want: str, what: str) -> None:
    """Fail when the runtime pinned in ``file`` is not the one the generator expects."""
    match = re.search(pattern, file.read_text(), re.MULTILINE)
    got = match.group(1) if match else "none"
    if got != want:
        raise GenError(f"{file.relative_to(ROOT)}: {what} is {got}, but the generator is pinned "
                       f"to {want} (scripts/gen_clients.py); change both together")


def _go_tool(package: str, version: str) -> Path:
    name = package.rsplit("/", 1)[1]
    bin_dir = _cache_dir() / "go" / f"{name}@{version}"
    exe = bin_dir / name
    if not exe.is_file():
        bin_dir.mkdir(parents=True, exist_ok=True)
        # pkg@version installs exactly that version whatever module the cwd is in
        _run(["go", "install", f"{package}@{version}"], f"installing {name} {version}",
             cwd=bin_dir, env={**os.environ, "GOBIN": str(bin_dir)})
    return exe


def _generate_go(out: Path) -> None:
    _require_version(GO_DIR / "go.mod", r"^\s*google\.golang\.org/protobuf (\S+)", PROTOC_GEN_GO,
                     "google.golang.org/protobuf")
    gen_go = _go_tool("google.golang.org/protobuf/cmd/protoc-gen-go", PROTOC_GEN_GO)
    gen_grpc = _go_tool("google.golang.org/grpc/cmd/protoc-gen-go-grpc", PROTOC_GEN_GO_GRPC)
    _grpc_tools_protoc([
        f"--plugin=protoc-gen-go={gen_go}", f"--plugin=protoc-gen-go-grpc={gen_grpc}",
        f"--go_out={out}", f"--go_opt=module={GO_MODULE}",
        f"--go-grpc_out={out}", f"--go-grpc_opt=module={GO_MODULE}",
        *api_protos()], "Go")


# -- Java --------------------------------------------------------------------------------------

_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom_includes(pom: Path) -> list[str]:
    """The ``<include>`` entries of protobuf-maven-plugin's configuration in ``pom``."""
    try:
        project = ET.parse(pom).getroot()
    except ET.ParseError as exc:
        raise GenError(f"{pom.relative_to(ROOT)}: not well-formed XML: {exc}") from None
    for plugin in project.iterfind("m:build/m:plugins/m:plugin", _POM_NS):
        if plugin.findtext("m:artifactId", "", _POM_NS) == "protobuf-maven-plugin":
            return [(e.text or "").strip()
                    for e in plugin.iterfind("m:configuration/m:includes/m:include", _POM_NS)]
    raise GenError(f"{pom.relative_to(ROOT)}: no protobuf-maven-plugin in <build><plugins>")


def _check_java(out: Path) -> None:
    """Generate nothing (Maven does, at build time), after checking that the pom compiles
    exactly the public API: a proto missing from ``<includes>`` would leave its classes out
    of the build, an extra one would publish an internal protocol."""
    del out  # no file is generated here: every committed one is then "no longer generated"
    pom = JAVA_DIR / "pom.xml"
    listed, want = _pom_includes(pom), api_protos()
    if sorted(listed) != want:
        missing = sorted(set(want) - set(listed))
        extra = sorted(set(listed) - set(want))
        raise GenError(f"{pom.relative_to(ROOT)}: protobuf-maven-plugin <includes> must list "
                       f"the public API (gateway.proto and its imports): "
                       f"missing {', '.join(missing) or 'none'}; "
                       f"not public {', '.join(extra) or 'none'}")


# -- TypeScript --------------------------------------------------------------------------------


def _ts_proto() -> Path:
    want = json.loads((TS_DIR / "package.json").read_text())["devDependencies"]["ts-proto"]
    if not re.fullmatch(r"\d+\.\d+\.\d+", want):
        raise GenError(f"clients/typescript/package.json: pin ts-proto exactly (got '{want}')")
    installed = TS_DIR / "node_modules" / "ts-proto" / "package.json"
    if not installed.is_file() or json.loads(installed.read_text())["version"] != want:
        _run(["npm", "ci", "--no-audit", "--no-fund"], "npm ci in clients/typescript",
             cwd=TS_DIR)
    plugin = TS_DIR / "node_modules" / ".bin" / "protoc-gen-ts_proto"
    if not plugin.exists():
        raise GenError(f"{plugin}: missing after npm ci")
    return plugin


def _generate_ts(out: Path) -> None:
    _grpc_tools_protoc([f"--plugin=protoc-gen-ts_proto={_ts_proto()}", f"--ts_proto_out={out}",
                        f"--ts_proto_opt={TS_OPTIONS}", *api_protos()], "TypeScript")


TARGETS = {
    "go": Target("go", GO_DIR, _generate_go,
                 lambda: [p.relative_to(GO_DIR) for p in _files_under(GO_DIR / "gatewayv1",
                                                                       [".pb.go"])]),
    # generated at build time by Maven: any file committed there is reported (--check) or
    # deleted (regeneration) as no longer generated
    "java": Target("java", JAVA_SRC, _check_java,
                   lambda: [p.relative_to(JAVA_SRC) for p in _files_under(JAVA_GENERATED, [""])]),
    "typescript": Target("typescript", TS_DIR / "src" / "gen", _generate_ts,
                         lambda: [p.relative_to(TS_DIR / "src" / "gen")
                                  for p in _files_under(TS_DIR / "src" / "gen", [".ts"])]),
}
