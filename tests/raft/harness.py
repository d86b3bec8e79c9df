"""An in-process cluster of RawNodes with a perfect, inspectable network, for tests.

Messages are queued and delivered in FIFO order by :meth:`Cluster.stabilize` or one by one by
:meth:`Cluster.deliver`; links can be cut. Each node persists its ``Ready`` into its
``MemoryStorage`` exactly as a real driver would (snapshot, entries, hard state, then send,
then apply).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable

from gateway.raft import (
    ConfChange,
    Config,
    EntryType,
    MemoryStorage,
    Message,
    RawNode,
    SplitMix64,
)
from gateway.raft.errors import StepPeerNotFoundError
from gateway.raft.snapshot_transfer import SnapshotReceiver, SnapshotSender
from gateway.raft.types import Entry, Role, Snapshot, message_name


def describe(m: Message) -> str:
    """One line per message, etcd-style."""
    s = f"{m.from_}->{m.to} {message_name(m.type)} Term:{m.term}"
    if m.log_term or m.index:
        s += f" Log:{m.log_term}/{m.index}"
    if m.commit:
        s += f" Commit:{m.commit}"
    if m.reject:
        s += " Rejected"
        if m.reject_hint:
            s += f" (Hint: {m.reject_hint})"
    if m.entries:
        s += " Entries:[" + ", ".join(describe_entry(e) for e in m.entries) + "]"
    if m.chunk is not None:
        c = m.chunk
        s += f" Chunk:{c.metadata.index}/{c.metadata.term} [{c.offset}+{len(c.data)} of {c.total}]"
    if m.context:
        s += f" Ctx:{m.context.decode(errors='replace')}"
    return s


def describe_entry(e: Entry) -> str:
    if e.type == EntryType.CONF_CHANGE:
        cc = ConfChange.decode(e.data)
        if cc.leave_joint():
            body = "leave-joint"
        else:
            body = " ".join(
                {0: "v", 1: "r", 2: "l"}[c.type] + str(c.node_id) for c in cc.changes
            )
        return f"{e.term}/{e.index} CC[{body}]"
    return f"{e.term}/{e.index} {e.data.decode(errors='replace') or 'EntryNormal'}"


class Cluster:
    def __init__(
        self,
        ids: Iterable[int],
        *,
        seed: int = 0,
        storages: dict[int, MemoryStorage] | None = None,
        **cfg: object,
    ) -> None:
        ids = list(ids)
        self.cfg = cfg
        self.seed = seed
        self.storages: dict[int, MemoryStorage] = storages or {
            i: MemoryStorage.bootstrap(tuple(ids)) for i in ids
        }
        self.nodes: dict[int, RawNode] = {}
        for i in self.storages:
            self.nodes[i] = self._make(i)
        self.queue: deque[Message] = deque()
        self.cut: set[tuple[int, int]] = set()
        self.applied: dict[int, list[Entry]] = {i: [] for i in self.nodes}
        self.log: list[str] = []
        self.trace = False
        self.drop_filter: Callable[[Message], bool] | None = None

    def _make(self, i: int) -> RawNode:
        cfg = dict(self.cfg)
        cfg.setdefault("rng", SplitMix64(self.seed * 1000 + i))
        applied = self.storages[i].snapshot().metadata.index
        return RawNode(Config(id=i, storage=self.storages[i], applied=applied, **cfg))

    def add_node(self, i: int) -> None:
        self.storages[i] = MemoryStorage()
        self.nodes[i] = self._make(i)
        self.applied[i] = []

    def restart(self, i: int) -> None:
        self.nodes[i] = self._make(i)

    # -- driving ----------------------------------------------------------------------------

    def raft(self, i: int):  # type: ignore[no-untyped-def]
        return self.nodes[i].raft

    def leader(self) -> int | None:
        leaders = [i for i, n in self.nodes.items() if n.raft.role == Role.LEADER]
        return max(leaders, key=lambda i: self.nodes[i].raft.term) if leaders else None

    def process_ready(self, i: int) -> bool:
        n = self.nodes[i]
        if not n.has_ready():
            return False
        rd = n.ready()
        st = self.storages[i]
        st.persist(rd)
        for m in rd.messages:
            if self.trace:
                self.log.append(describe(m))
            self.queue.append(m)
        conf_changed = False
        for e in rd.committed_entries:
            self.applied[i].append(e)
            if e.type == EntryType.CONF_CHANGE:
                n.apply_conf_change(ConfChange.decode(e.data))
                conf_changed = True
        n.advance(rd)
        if conf_changed and not n.raft.removed:
            # Like the simulator's application: snapshot after a membership change so that
            # nodes added by it can be caught up with a snapshot that includes them.
            applied = n.raft.raft_log.applied
            if applied > st.snapshot().metadata.index:
                st.create_snapshot(applied, n.raft.trk.config.conf_state(), b"")
        return True

    def deliver(self, m: Message) -> None:
        if (m.from_, m.to) in self.cut or m.to not in self.nodes:
            return
        if self.drop_filter is not None and self.drop_filter(m):
            return
        with contextlib.suppress(StepPeerNotFoundError):
            self.nodes[m.to].step(m)

    def stabilize(self, max_rounds: int = 10_000) -> None:
        for _ in range(max_rounds):
            progressed = False
            for i in sorted(self.nodes):
                progressed |= self.process_ready(i)
            while self.queue:
                progressed = True
                self.deliver(self.queue.popleft())
            if not progressed:
                return
        raise AssertionError("cluster did not stabilize")

    def tick(self, i: int, n: int = 1) -> None:
        for _ in range(n):
            self.nodes[i].tick()

    def tick_all(self, n: int = 1, stabilize: bool = True) -> None:
        for _ in range(n):
            for i in sorted(self.nodes):
                self.nodes[i].tick()
            if stabilize:
                self.stabilize()

    def isolate(self, i: int) -> None:
        for j in self.nodes:
            if j != i:
                self.cut.add((i, j))
                self.cut.add((j, i))

    def heal(self) -> None:
        self.cut.clear()

    def elect(self, i: int) -> None:
        self.nodes[i].campaign()
        self.stabilize()
        assert self.nodes[i].raft.role == Role.LEADER, f"{i} failed to become leader"

    def data(self, i: int) -> list[bytes]:
        return [e.data for e in self.applied[i] if e.type == EntryType.NORMAL and e.data]


def transfer(snap: Snapshot, receiver: SnapshotReceiver, chunk_size: int,
             window: int) -> Snapshot:
    """``snap`` sent through a ``SnapshotSender`` (chunks of ``chunk_size``, ``window`` in
    flight) into ``receiver``, every window acknowledged with the bytes the receiver holds:
    the snapshot the receiver completed. Asserts that it completed one and that the sender
    saw every byte acknowledged."""
    sender = SnapshotSender(chunk_size, window)
    sender.start(2, snap)
    got, held = None, 0
    while batch := sender.next_chunks(2):
        for c in batch:
            held, done = receiver.receive(c)
            got = done or got
        sender.ack(2, snap.metadata.index, held)
    assert sender.complete(2) and got is not None
    return got
