#!/usr/bin/env python3
"""A local Gateway cluster for the client test suites (Go, Java, TypeScript, cross-language).

    python clients/testing/cluster.py [--nodes 3] [--secure] [--dir DIR] [--keep]

starts ``--nodes`` ``gateway run`` processes on loopback with free ports in a temporary
directory (or ``DIR``), waits until they agree on a leader and prints ONE line of JSON::

    {"dir": "...", "leader": 2, "ca": null, "tokens": {},
     "nodes": [{"id": 1, "api": "127.0.0.1:21011", "peer": "127.0.0.1:21012", "pid": 4242,
                "log": ".../logs/node-1.log"}, ...]}

With ``--secure`` the API speaks TLS (a throw-away CA; ``ca`` is the path of its PEM) and
needs bearer tokens: ``tokens`` maps ``admin`` (read, write, admin), ``writer`` (read, write)
and ``reader`` (read) to their secrets.

It then reads commands on stdin, one per line, and answers each with one line of JSON
(``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``):

    leader        wait (up to 20 s) until the running nodes agree on a leader: {"leader": ID}
    kill ID       SIGKILL node ID and reap it
    restart ID    start node ID again on its ports and data directory, wait for its API
    status        the start-up JSON again, with current pids (0 = not running)
    stop          stop everything and exit (as does the end of stdin)

The nodes are started by ``gateway.testing.launcher.Launcher``, the one launcher of every
local test cluster: ports below the ephemeral range, each node's output in ``DIR/logs``.
Cleanup: the nodes are SIGKILLed when the launcher stops, when its stdin closes (the test
process died: its end of the pipe closed) and, through ``PR_SET_PDEATHSIG`` on Linux, when
the launcher itself dies; the directory is removed unless ``--keep`` or ``--dir`` was given.
Start-up failures exit 1 with one line on stderr followed by the nodes' log tails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gateway.testing.launcher import Launcher, LaunchError  # noqa: E402

TOKENS = {"admin": ["read", "write", "admin"], "writer": ["read", "write"], "reader": ["read"]}
NODE_ARGS = ["--appliers", "", "--no-fsync", "--tick-ms", "30"]


class Cluster(Launcher):
    """N ``gateway run`` processes, not proxied; see the module docstring."""

    def __init__(self, root: Path, size: int, secure: bool) -> None:
        self.ca: str | None = None
        self.tokens: dict[str, str] = {}
        env = self._secure(root) if secure else {}
        super().__init__(root, size, node_args=NODE_ARGS, env=env, proxied=False,
                         start_timeout=30.0,
                         api_ca=Path(self.ca).read_bytes() if self.ca else None,
                         api_token=self.tokens.get("admin"))

    def _secure(self, root: Path) -> dict[str, str]:
        """A throw-away CA and the tokens file; the environment that makes nodes use them."""
        from gateway.node.api.security import make_test_ca

        tls = root / "tls"
        tls.mkdir(parents=True)
        make_test_ca(str(tls), ("localhost", "127.0.0.1"), ("node",))
        self.ca = str(tls / "ca.pem")
        self.tokens = {name: f"{name}-{os.urandom(12).hex()}" for name in TOKENS}
        lines = []
        for name, perms in TOKENS.items():
            quoted = ", ".join(f'"{p}"' for p in perms)
            lines += ["[[token]]", f'name = "{name}"', f'token = "{self.tokens[name]}"',
                      f"permissions = [{quoted}]", ""]
        tokens_file = root / "tokens.toml"
        tokens_file.write_text("\n".join(lines))
        return {"GATEWAY_TLS_API_CERT": str(tls / "node.pem"),
                "GATEWAY_TLS_API_KEY": str(tls / "node.key"),
                "GATEWAY_TOKENS_FILE": str(tokens_file)}

    def info(self, leader: int | None) -> dict[str, Any]:
        """The JSON description (current pids: 0 = not running)."""
        return {"dir": str(self.root), "leader": leader, "ca": self.ca, "tokens": self.tokens,
                "nodes": [{"id": n.id, "api": n.api_address, "peer": n.peer_address,
                           "pid": n.proc.pid if n.proc is not None and n.running else 0,
                           "log": str(n.log_path)} for n in self.nodes.values()]}


def _answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _command(cluster: Cluster, line: str) -> bool:
    """Run one command line; False when the launcher should stop."""
    words = line.split()
    if not words:
        return True
    cmd, args = words[0], words[1:]
    try:
        if cmd == "stop":
            _answer({"ok": True})
            return False
        if cmd == "leader" and not args:
            _answer({"ok": True, "leader": cluster.wait_for_leader()})
        elif cmd in ("kill", "restart") and len(args) == 1 and args[0].isdigit():
            i = int(args[0])
            if i not in cluster.nodes:
                raise LaunchError(f"{cmd}: no node {i}")
            if cmd == "kill":
                cluster.kill(i)
                _answer({"ok": True, "killed": i})
            else:
                try:
                    cluster.restart(i)
                except LaunchError as exc:
                    msg = str(exc)  # the launcher names the log when the process exited
                    raise LaunchError(msg if "--- node" in msg
                                      else f"{msg}\n{cluster.log_tail(i)}") from None
                proc = cluster.nodes[i].proc
                _answer({"ok": True, "restarted": i, "pid": proc.pid if proc else 0})
        elif cmd == "status" and not args:
            _answer({"ok": True, **cluster.info(cluster.leader())})
        else:
            raise LaunchError(f"unknown command {line.strip()!r} (leader, kill ID, "
                              f"restart ID, status, stop)")
    except LaunchError as exc:
        _answer({"ok": False, "error": str(exc)})
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="cluster size (default 3)")
    parser.add_argument("--secure", action="store_true", help="TLS and bearer tokens on the API")
    parser.add_argument("--dir", help="data directory (kept); default: a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ns = parser.parse_args(argv)
    if ns.nodes < 1:
        parser.error("--nodes: at least 1")
    root = Path(ns.dir) if ns.dir else Path(tempfile.mkdtemp(prefix="gateway-cluster-"))
    keep = ns.keep or bool(ns.dir)
    cluster: Cluster | None = None

    def on_signal(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        root.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(root, ns.nodes, ns.secure)
        try:
            cluster.start(wait_leader=False)
            leader = cluster.wait_for_leader()
        except LaunchError as exc:
            print(f"cluster: {exc}\n{cluster.log_tails()}", file=sys.stderr)
            return 1
        _answer(cluster.info(leader))
        for line in sys.stdin:
            if not _command(cluster, line):
                break
        return 0
    finally:
        if cluster is not None:
            cluster.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
