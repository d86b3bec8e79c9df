"""A leader's commit-index updates, held briefly so that the next append carries them.

When a leader's commit index moves on its followers' acknowledgements, the Raft core (etcd's
``bcastAppend`` after ``maybeCommit``) sends every follower an append without entries whose only
news is the new commit index. With one write in flight that doubles the messages per write: each
follower receives it, persists its hard state, answers, and the leader steps two more answers --
measured with one client, a large share of a follower's CPU per write and a smaller one of the
leader's, on a machine where the three nodes share two cores (docs/benchmarks.md, "Commit linger").

``CommitLinger`` sits between the driver and the transport on a leader. It holds an append
that carries no entries to a follower in ``REPLICATE`` state that has been sent every entry
(``next == last index + 1``: the message says nothing but the commit index) for up to
``delay`` seconds. Any later append to that follower carries a commit index at least as new
(it only grows within a leader's term) and makes it redundant, as does a heartbeat carrying
one at least as new; otherwise it is sent when the delay ends. Every other message passes at
once, in order.

The delay runs from when a follower's commit was first held (a newer commit-only append
replacing it keeps that time: the delay bounds how long a follower's knowledge of the commit
lags). The timer, when it fires, sends only the appends held that long and is set again for
the others; a timer set for a commit absorbed long ago would otherwise flush the commit held
for the next write a moment before that write's append carries it: with one writer at ~1.2 ms
per write, every fourth or fifth write paid a commit-only append on each follower (received,
its hard state written, answered, the answers stepped by the leader) just ahead of its own
append. The timer is not cancelled when a held append is absorbed (once per write): it fires
at most once per ``delay`` and finds nothing due.

Safe because Raft tolerates delayed and lost messages: holding or dropping an append without
entries changes nothing about what is committed or when the leader answers a write. What
waits is a follower's knowledge of the commit: with no write following, a follower applies
an entry -- and shows it to its stale reads and its appliers -- up to ``delay`` later. A
read-index round (linearizable reads) is not held up: its heartbeats carry the commit index.
Held messages are dropped when this node stops leading or its term moves (``drop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gateway.raft import Entry, EntryType, Message
from gateway.raft.core import Raft
from gateway.raft.tracker import ProgressState
from gateway.raft.types import MessageType

__all__ = ["DEFAULT_DELAY", "CommitLinger"]

#: Longer than a client's turn-around between one write's answer and its next write on one
#: machine, short beside what a reader of a follower notices.
DEFAULT_DELAY = 0.005

#: A held append due this close to its time is sent with the flush rather than by a timer of
#: its own (the loop's timers fire up to its clock resolution early).
_EARLY = 0.001

_APP, _HEARTBEAT = MessageType.APP, MessageType.HEARTBEAT
_CONF = EntryType.CONF_CHANGE


class CommitLinger:
    """Forwards a leader's messages to ``send``, holding commit-only appends (module
    docstring). Event-loop bound: ``send`` and the flush run on the loop that created it."""

    def __init__(self, send: Callable[[list[Message]], None],
                 delay: float = DEFAULT_DELAY) -> None:
        self._send = send
        self._delay = delay
        self._held: dict[int, Message] = {}
        #: When each follower's held commit was first held (the event loop's clock).
        self._since: dict[int, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._raft: Raft | None = None
        #: Commit-only appends held, and those of them a later message made redundant.
        self.held = 0
        self.absorbed = 0

    def send(self, msgs: list[Message], raft: Raft, committed: Sequence[Entry] = ()) -> None:
        """Forward ``msgs`` (from ``raft``, which leads, in a Ready committing ``committed``),
        holding their commit-only appends unless ``committed`` holds a membership change (every
        member learns that at once); a message that makes a held one redundant replaces it.
        ``committed`` is looked at only when there is an append to hold (a busy leader's
        Readies carry entries in their appends and hundreds of committed entries)."""
        held = self._held
        since = self._since
        last = raft.raft_log.last_index()
        progress = raft.trk.progress
        hold: bool | None = None  # decided at the first commit-only append
        out: list[Message] = []
        for m in msgs:
            t = m.type
            if t == _APP and not m.entries:
                pr = progress.get(m.to)
                if pr is not None and pr.state == ProgressState.REPLICATE \
                        and pr.next == last + 1 and m.index == last:
                    if hold is None:
                        hold = not any(e.type == _CONF for e in committed)
                    if hold:
                        if m.to in held:
                            self.absorbed += 1
                        else:
                            since[m.to] = self._now()
                        held[m.to] = m
                        self.held += 1
                        continue
            if held and t in (_APP, _HEARTBEAT):
                old = held.get(m.to)
                if old is not None and m.term == old.term and m.commit >= old.commit:
                    del held[m.to]
                    del since[m.to]
                    self.absorbed += 1
            out.append(m)
        if out:
            self._send(out)
        if held:
            self._raft = raft
            if self._timer is None:
                self._arm()

    def _now(self) -> float:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop.time()

    def _arm(self) -> None:
        """Set the timer for the oldest held append's delay."""
        assert self._loop is not None  # set when the first append was held
        self._timer = self._loop.call_at(min(self._since.values()) + self._delay, self._flush)

    def _flush(self) -> None:
        """Send the held appends whose delay has run out; re-arm for the others."""
        self._timer = None
        raft = self._raft
        if not self._held or raft is None:
            return
        due_by = self._now() - self._delay + _EARLY
        due = [to for to, t in self._since.items() if t <= due_by]
        # A leader of the same term only: a message of an older term is stale anyway.
        live = []
        for to in due:
            m = self._held.pop(to)
            del self._since[to]
            if m.term == raft.term and raft.lead == raft.id:
                live.append(m)
        if self._since:
            self._arm()
        if live:
            self._send(live)

    def drop(self) -> None:
        """Forget held messages (the node stopped leading, or is stopping)."""
        self._held.clear()
        self._since.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
