"""Scripted interaction tests in the style of etcd-io/raft's ``testdata/*.txt``.

Each file is a sequence of blocks::

    command arg ...
    ----
    expected output
    <blank line>

``stabilize`` prints every message sent while the cluster settles, ``status`` prints one line
per node. Run with ``RAFT_REWRITE=1`` to regenerate the expected output after an intended
behaviour change (then review the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.raft import ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType

from .harness import Cluster

TESTDATA = Path(__file__).parent / "testdata"
FILES = sorted(TESTDATA.glob("*.txt"))


class Interaction:
    def __init__(self) -> None:
        self.c: Cluster | None = None

    def run(self, cmd: str, args: list[str]) -> str:
        handler = getattr(self, "cmd_" + cmd.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {cmd!r}")
        return handler(*args) or ""

    @property
    def cluster(self) -> Cluster:
        assert self.c is not None, "no cluster: use the 'cluster' command first"
        return self.c

    def cmd_cluster(self, *args: str) -> str:
        ids = [int(x) for x in args[0].split(",")]
        opts: dict[str, object] = {}
        for a in args[1:]:
            k, v = a.split("=")
            opts[k] = int(v) if v.isdigit() else v == "true"
        self.c = Cluster(ids, **opts)
        self.c.trace = True
        return ""

    def _trace(self) -> str:
        out = "\n".join(self.cluster.log)
        self.cluster.log.clear()
        return out

    def cmd_stabilize(self) -> str:
        self.cluster.stabilize()
        return self._trace()

    def cmd_campaign(self, node: str) -> str:
        self.cluster.nodes[int(node)].campaign()
        return ""

    def cmd_tick(self, node: str, n: str = "1") -> str:
        self.cluster.tick(int(node), int(n))
        return ""

    def cmd_tick_all(self, n: str) -> str:
        self.cluster.tick_all(int(n))
        return self._trace()

    def cmd_isolate(self, node: str) -> str:
        self.cluster.isolate(int(node))
        return ""

    def cmd_heal(self) -> str:
        self.cluster.heal()
        return ""

    def cmd_propose(self, node: str, data: str) -> str:
        try:
            self.cluster.nodes[int(node)].propose(data.encode())
        except Exception as exc:
            return f"error: {type(exc).__name__}"
        return ""

    def cmd_transfer_leader(self, node: str, to: str) -> str:
        self.cluster.nodes[int(node)].transfer_leader(int(to))
        return ""

    def cmd_add_node(self, node: str) -> str:
        self.cluster.add_node(int(node))
        return ""

    def cmd_compact(self, node: str) -> str:
        c = self.cluster
        r = c.raft(int(node))
        st = c.storages[int(node)]
        st.create_snapshot(r.raft_log.applied, r.trk.config.conf_state(), b"snapshot-data")
        st.compact(r.raft_log.applied)
        return f"compacted to {r.raft_log.applied}"

    def cmd_propose_conf_change(self, node: str, *changes: str) -> str:
        kinds = {"v": ConfChangeType.ADD_NODE, "r": ConfChangeType.REMOVE_NODE,
                 "l": ConfChangeType.ADD_LEARNER_NODE}
        transition = ConfChangeTransition.AUTO
        singles = []
        for ch in changes:
            if ch.startswith("transition="):
                transition = ConfChangeTransition[ch.split("=")[1].upper()]
                continue
            singles.append(ConfChangeSingle(kinds[ch[0]], int(ch[1:])))
        self.cluster.nodes[int(node)].propose_conf_change(ConfChange(tuple(singles), transition))
        return ""

    def cmd_status(self) -> str:
        lines = []
        c = self.cluster
        for i in sorted(c.nodes):
            r = c.raft(i)
            line = (
                f"{i}: {r.role.name} term={r.term} lead={r.lead} commit={r.raft_log.committed}"
                f" last={r.raft_log.last_index()} {r.trk.config.describe()}"
            )
            if r.removed:
                line += " removed"
            lines.append(line)
        return "\n".join(lines)

    def cmd_progress(self, node: str) -> str:
        r = self.cluster.raft(int(node))
        return "\n".join(f"{i}: {pr!r}" for i, pr in sorted(r.trk.progress.items()))


def _parse(text: str) -> list[tuple[str, str]]:
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        cmd = line
        assert lines[i + 1] == "----", f"line {i + 2}: expected ----"
        i += 2
        out = []
        while i < len(lines) and lines[i] != "":
            out.append(lines[i])
            i += 1
        blocks.append((cmd, "\n".join(out)))
    return blocks


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_interaction(path: Path) -> None:
    text = path.read_text()
    env = Interaction()
    rewrite = os.environ.get("RAFT_REWRITE") == "1"
    out_blocks = []
    for cmd, expected in _parse(text):
        name, *args = cmd.split()
        got = env.run(name, args)
        if rewrite:
            out_blocks.append(f"{cmd}\n----\n{got}\n" if got else f"{cmd}\n----\n")
        else:
            assert got == expected, f"{path.name}: {cmd}\n--- expected\n{expected}\n--- got\n{got}"
    if rewrite:
        header = "".join(line + "\n" for line in text.split("\n") if line.startswith("#"))
        path.write_text(header + "\n" + "\n".join(out_blocks))


def test_interaction_files_exist() -> None:
    names = {p.stem for p in FILES}
    assert {"prevote", "checkquorum", "joint_consensus", "snapshot", "leader_transfer"} <= names
