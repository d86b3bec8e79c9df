"""Code generation for the Go, Java and TypeScript clients (used by ``scripts/gen_proto.py``).

Each client gets the public API -- ``gateway/v1/gateway.proto`` and the files it imports,
found by following the ``import`` lines -- and nothing of the internal protocols (``peer``,
``wal``, ``applier``). Every generator is pinned so that generation is reproducible:

==========================  ========================================================================
Go messages                 protoc-gen-go ``PROTOC_GEN_GO`` (= google.golang.org/protobuf in go.mod)
Go services                 protoc-gen-go-grpc ``PROTOC_GEN_GO_GRPC``
Java messages               protoc ``PROTOC_JAVA`` from Maven Central (= protobuf-java in pom.xml)
Java services               protoc-gen-grpc-java ``PROTOC_GEN_GRPC_JAVA`` from Maven Central
TypeScript                  ts-proto, the exact version in clients/typescript/package.json
==========================  ========================================================================

Go and TypeScript run under the protoc of ``grpcio-tools`` (pinned in pyproject.toml, as for
Python); the grpcio-tools protoc has no Java generator, so Java uses Maven Central's protoc
build of the same protobuf release. Tools are fetched on first use with each ecosystem's own
client (``go install``, ``mvn dependency:get``, ``npm ci``) into its default cache.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
API_PROTO = "gateway/v1/gateway.proto"

PROTOC_GEN_GO = "v1.36.12"
PROTOC_GEN_GO_GRPC = "v1.6.2"
PROTOC_JAVA = "4.35.1"
# 1.84.0 and later have no protoc-gen-grpc-java executables on Maven Central; the generated
# stubs only use API that the newer grpc-java runtime in pom.xml keeps.
PROTOC_GEN_GRPC_JAVA = "1.83.1"

GO_DIR = ROOT / "clients" / "go"
GO_MODULE = "gateway/clients/go"
JAVA_DIR = ROOT / "clients" / "java"
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
    """``gateway.proto`` and everything it imports, transitively (paths under proto/)."""
    seen: set[str] = set()
    todo = [API_PROTO]
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


def _maven_classifier() -> str:
    system = {"Linux": "linux", "Darwin": "osx", "Windows": "windows"}.get(platform.system())
    machine = platform.machine().lower()
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch_64",
            "arm64": "aarch_64"}.get(machine)
    if system is None or arch is None:
        raise GenError(f"no protoc build on Maven Central for {platform.system()}/{machine}")
    return f"{system}-{arch}"


def _maven_exe(group: str, artifact: str, version: str) -> Path:
    classifier = _maven_classifier()
    repo = Path(os.environ.get("MAVEN_REPO_LOCAL") or Path.home() / ".m2" / "repository")
    exe = (repo / group.replace(".", "/") / artifact / version
           / f"{artifact}-{version}-{classifier}.exe")
    if not exe.is_file():
        _run(["mvn", "-q", "-B", "dependency:get", "-Dtransitive=false",
              f"-Dartifact={group}:{artifact}:{version}:exe:{classifier}"],
             f"fetching {artifact} {version} from Maven Central")
    if not os.access(exe, os.X_OK):
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return exe


def _generate_java(out: Path) -> None:
    pom = JAVA_DIR / "pom.xml"
    _require_version(pom, r"<protobuf\.version>([^<]+)</protobuf\.version>", PROTOC_JAVA,
                     "protobuf.version")
    protoc = _maven_exe("com.google.protobuf", "protoc", PROTOC_JAVA)
    plugin = _maven_exe("io.grpc", "protoc-gen-grpc-java", PROTOC_GEN_GRPC_JAVA)
    _run([str(protoc), f"-I{PROTO_ROOT}", f"--plugin=protoc-gen-grpc-java={plugin}",
          f"--java_out={out}", f"--grpc-java_out=@generated=omit:{out}", *api_protos()],
         "Java (protoc)", cwd=ROOT)


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
    "java": Target("java", JAVA_DIR / "src" / "main" / "java", _generate_java,
                   lambda: [p.relative_to(JAVA_DIR / "src" / "main" / "java")
                            for p in _files_under(JAVA_DIR / "src/main/java/io/gateway/v1",
                                                  [".java"])]),
    "typescript": Target("typescript", TS_DIR / "src" / "gen", _generate_ts,
                         lambda: [p.relative_to(TS_DIR / "src" / "gen")
                                  for p in _files_under(TS_DIR / "src" / "gen", [".ts"])]),
}
