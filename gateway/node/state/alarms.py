"""The NOSPACE alarm: writes stop, cluster-wide, before a node's log disk is full.

Like etcd's ``NOSPACE`` alarm, but on free disk space rather than a database quota:

- Every node checks the file system holding its Raft log (``DATA/raft/wal``) every
  ``space_check_ms`` with one ``statvfs`` (`SpaceMonitor.check`; never per write). Below
  ``min_free_bytes`` it refuses writes itself at once and proposes an ``AlarmCommand`` (tag
  ``ALARM_COMMAND``) raising its alarm; a follower's proposal reaches the leader through Raft's
  proposal forwarding (the peer stream). The proposal is repeated at every check until the
  alarm is applied, so a lost one (no leader yet) costs a check interval.
- Applied on every node (`apply_alarm_command`), the alarm is replicated state
  (``m alarm:<node id>``, in snapshots too): every node refuses writes (Write, WriteBatch,
  StreamWrite, SQL) with RESOURCE_EXHAUSTED naming the node and its path; reads, Status and
  admin calls go on. Status lists the alarms.
- Cleared automatically by the node that raised it once its free space is back at or above
  ``min_free_bytes`` (it proposes the disarm), or by an operator (``gateway alarm disarm``;
  admin permission): an alarm of a node that is gone or down would otherwise stay. An alarm
  disarmed while its node is still short of space is raised again at that node's next check.

The alarm entries themselves are a few bytes; the threshold leaves room for them, for the
leader's epoch markers, and for snapshots and compaction, which free log space.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

from google.protobuf.message import DecodeError

from gateway.core.messages import TypeTag
from gateway.node.base.errors import NoSpaceError
from gateway.node.base.validation import InvalidRequest
from gateway.node.state import keys
from gateway.node.state.store_ops import Ops
from gateway.raft import ProposalDroppedError, RawNode
from gateway.v1 import gateway_pb2, replication_pb2

__all__ = ["ALARM_PREFIX", "SpaceMonitor", "alarm_entry", "alarm_message", "apply_alarm_command",
           "disarm", "disarm_entry", "driver_proposer", "load_alarms", "refusal", "run_monitor"]

log = logging.getLogger("gateway.node")

ALARM_PREFIX = keys.meta_key("alarm:")
_TAG = bytes([TypeTag.ALARM_COMMAND])

Alarms = Mapping[int, replication_pb2.SpaceAlarm]


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def alarm_message(alarm: replication_pb2.SpaceAlarm) -> str:
    """One line: which node, which path, how much is free, the threshold."""
    return (f"NOSPACE alarm of node {alarm.node_id}: {alarm.path or '.'} has "
            f"{_mib(alarm.free_bytes)} free, below its min_free_bytes "
            f"({_mib(alarm.min_free_bytes)}); writes are refused until it is cleared "
            f"(space returns, or `gateway alarm disarm {alarm.node_id}`)")


def alarm_entry(alarm: replication_pb2.SpaceAlarm) -> bytes:
    """The log entry raising ``alarm``."""
    return _TAG + replication_pb2.AlarmCommand(alarm=alarm).SerializeToString()


def disarm_entry(node_id: int) -> bytes:
    """The log entry clearing the alarm of ``node_id``."""
    return _TAG + replication_pb2.AlarmCommand(disarm=node_id).SerializeToString()


def load_alarms(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]]
                ) -> dict[int, replication_pb2.SpaceAlarm]:
    """The raised alarms stored under ``m alarm:<node id>`` (``scan_prefix``: the store's)."""
    out: dict[int, replication_pb2.SpaceAlarm] = {}
    for k, v in scan_prefix(ALARM_PREFIX):
        with contextlib.suppress(DecodeError, ValueError):
            out[int(k[len(ALARM_PREFIX):])] = replication_pb2.SpaceAlarm.FromString(v)
    return out


def apply_alarm_command(alarms: Alarms, data: bytes, ops: Ops
                        ) -> dict[int, replication_pb2.SpaceAlarm] | None:
    """Apply an ``AlarmCommand`` entry (``data`` with its tag byte): the new alarm mapping
    (a new dict; the caller replaces its own) with the store writes appended to ``ops``, or
    None when it changes nothing (does not parse, names no node, clears no alarm)."""
    try:
        cmd = replication_pb2.AlarmCommand.FromString(data[1:])
    except DecodeError:
        return None
    if cmd.HasField("alarm") and cmd.alarm.node_id:
        out = dict(alarms)
        out[cmd.alarm.node_id] = cmd.alarm
        ops.append((ALARM_PREFIX + str(cmd.alarm.node_id).encode(),
                    cmd.alarm.SerializeToString(), 0, 0, 0))
        return out
    if cmd.disarm and cmd.disarm in alarms:
        out = dict(alarms)
        del out[cmd.disarm]
        ops.append((ALARM_PREFIX + str(cmd.disarm).encode(), None, 0, 0, 0))
        return out
    return None


def refusal(replicated: Alarms, local: replication_pb2.SpaceAlarm | None
            ) -> NoSpaceError | None:
    """The error a write gets while an alarm is raised (this node's own first), else None."""
    if local is None and not replicated:
        return None  # every write asks: no alarm raised costs one test
    alarm = local if local is not None else next(
        (replicated[n] for n in sorted(replicated)), None)
    return None if alarm is None else NoSpaceError(alarm_message(alarm))


class SpaceMonitor:
    """This node's side of the alarm (module docstring). ``check`` runs on the event loop
    every ``space_check_ms``; ``propose(data)`` proposes an entry from any role (fire and
    forget); ``replicated()`` is the applied alarm mapping."""

    def __init__(self, node_id: int, data_dir: str, wal_dir: str, min_free_bytes: int,
                 free_bytes: Callable[[str], int], propose: Callable[[bytes], None],
                 replicated: Callable[[], Alarms]) -> None:
        self.node_id = node_id
        self.wal_dir = wal_dir
        self.path = os.path.relpath(wal_dir, data_dir)
        self.min_free_bytes = min_free_bytes
        #: Measures the free bytes of a directory (``FileSystem.free_bytes``; tests replace it
        #: to fill a disk without filling one).
        self.measure = free_bytes
        self._propose = propose
        self._replicated = replicated
        #: This node's alarm while its disk is short of space (refuses its writes before the
        #: replicated alarm is applied, and while there is no leader to apply it).
        self.local: replication_pb2.SpaceAlarm | None = None

    def check(self) -> None:
        """Measure the free space once; raise, repeat or clear this node's alarm."""
        if not self.min_free_bytes:
            return
        try:
            free = self.measure(self.wal_dir)
        except OSError as exc:  # cannot tell: leave the alarm as it is, say so once a check
            log.warning("cannot measure free space of %s: %s", self.path, exc.strerror or exc)
            return
        mine = self._replicated().get(self.node_id)
        if free < self.min_free_bytes:
            alarm = replication_pb2.SpaceAlarm(node_id=self.node_id, path=self.path,
                                               free_bytes=free,
                                               min_free_bytes=self.min_free_bytes)
            if self.local is None:
                log.error("%s", alarm_message(alarm))
            self.local = alarm
            if mine is None:
                self._propose(alarm_entry(alarm))
            return
        if self.local is not None:
            log.warning("node %d: %s has %s free again (min_free_bytes %s): clearing its "
                        "NOSPACE alarm", self.node_id, self.path, _mib(free),
                        _mib(self.min_free_bytes))
            self.local = None
        if mine is not None:
            self._propose(disarm_entry(self.node_id))

    def alarms(self) -> list[replication_pb2.SpaceAlarm]:
        """Every raised alarm for Status: the replicated ones, and this node's own while it
        is not replicated yet."""
        replicated = self._replicated()
        out = [replicated[n] for n in sorted(replicated)]
        if self.local is not None and self.node_id not in replicated:
            out.append(self.local)
        return out

    def refusal(self) -> NoSpaceError | None:
        """The error a write gets now, or None (`refusal`)."""
        return refusal(self._replicated(), self.local)


def driver_proposer(control: Callable[[Callable[[RawNode], None]], None]
                    ) -> Callable[[bytes], None]:
    """``propose(data)`` over a driver's ``control``: proposes from any role -- a follower's
    proposal is forwarded to the leader by Raft -- and drops it quietly when there is no
    leader (the monitor proposes again at its next check)."""

    def propose(data: bytes) -> None:
        def go(raw: RawNode) -> None:
            with contextlib.suppress(ProposalDroppedError):
                raw.propose(data)

        control(go)

    return propose


async def run_monitor(monitor: SpaceMonitor, interval_s: float) -> None:
    """Check every ``interval_s`` seconds until cancelled (the node's stop)."""
    while True:
        monitor.check()
        await asyncio.sleep(interval_s)


class _AlarmState(Protocol):
    @property
    def alarms(self) -> Alarms: ...


class _EntryProposer(Protocol):
    def submit_entry(self, data: bytes, /) -> Awaitable[int]: ...


class AlarmNode(Protocol):
    """What ``disarm`` needs of the node (``GatewayNode``): its state machine's raised alarms
    and its driver's ``submit_entry``."""

    @property
    def sm(self) -> _AlarmState: ...

    @property
    def driver(self) -> _EntryProposer: ...


async def disarm(node: AlarmNode, req: gateway_pb2.AlarmRequest) -> gateway_pb2.AdminResponse:
    """Clear the alarm ``req`` names (``disarm``: a node id; ``disarm_all``) through the log,
    on the leader (the API's ``Alarm``, admin permission); returns once applied. A node id
    with no alarm raised is INVALID_ARGUMENT naming the raised ones."""
    sm, driver = node.sm, node.driver
    raised = sorted(sm.alarms)
    if req.disarm_all == bool(req.disarm):
        raise InvalidRequest("disarm", "name one node id, or set disarm_all")
    targets = raised if req.disarm_all else [req.disarm]
    if not req.disarm_all and req.disarm not in sm.alarms:
        raise InvalidRequest("disarm", f"node {req.disarm} has no alarm raised (raised: "
                             f"{', '.join(map(str, raised)) or 'none'})")
    index = 0
    for node_id in targets:
        index = await driver.submit_entry(disarm_entry(node_id))
    what = ", ".join(f"node {n}" for n in targets) or "nothing (no alarm raised)"
    return gateway_pb2.AdminResponse(
        message=f"disarmed the NOSPACE alarm of {what}; a node still short of space raises "
                f"it again at its next check", log_index=index)

