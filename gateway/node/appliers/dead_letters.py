"""The ``DeadLetters`` (read) and ``DeadLetterAction`` (admin) RPCs over this node's
appliers: the letters are this node's files (``<state dir>/<applier>.deadletters``), so both
run on the node asked, never forwarded. The work is ``gateway.appliers.deadletter_ops``'s, the
same functions ``gateway deadletter --state-dir`` runs offline. A replay delivers through
the applier this node hosts (the running dispatcher's target, which takes ``apply`` calls
from several threads: ``Capabilities.thread_safe``; a target that is not is replayed while
holding the hosted applier's lock).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Protocol

from gateway.appliers.contract import Applier
from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog
from gateway.appliers.deadletter_ops import act, list_page
from gateway.appliers.dispatcher import Dispatcher
from gateway.node.base.validation import InvalidRequest
from gateway.v1 import gateway_pb2

__all__ = ["dead_letter_action", "list_dead_letters"]


class Hosted(Protocol):
    """What these functions need of an applier this node hosts (``HostedApplier``)."""

    name: str
    applier: Applier
    dispatcher: Dispatcher | None
    lock: threading.Lock


def _log(state_dir: str, a: Hosted) -> DeadLetterLog:
    """The running dispatcher's log (its lock serializes appends with ours), else one over
    the same file."""
    if a.dispatcher is not None:
        return a.dispatcher.dead_letters
    return DeadLetterLog(state_dir, a.applier.name)


def _applier(hosted: Sequence[Hosted], name: str, field: str) -> Hosted:
    for a in hosted:
        if a.name == name:
            return a
    known = ", ".join(a.name for a in hosted) or "none"
    raise InvalidRequest(field, f"no applier {name!r} on this node (appliers: {known})")


async def list_dead_letters(state_dir: str, hosted: Sequence[Hosted],
                            req: gateway_pb2.DeadLettersRequest
                            ) -> gateway_pb2.DeadLettersResponse:
    """One page of ``req.applier``'s letters (or every applier's first page), with every
    applier's counts."""
    appliers = [_applier(hosted, req.applier, "applier")] if req.applier else list(hosted)
    if req.after_id and not req.applier:
        raise InvalidRequest("after_id", "pages are per applier: name the applier")
    out = gateway_pb2.DeadLettersResponse()
    for a in appliers:
        log = _log(state_dir, a)
        try:
            letters, count, more = await asyncio.to_thread(
                list_page, log, include_closed=req.include_closed, after_id=req.after_id,
                limit=req.limit)
        except ValueError as exc:
            raise InvalidRequest("limit", str(exc)) from None
        except DeadLetterError as exc:
            raise InvalidRequest("applier", str(exc)) from None
        count.applier = a.name
        for info in letters:
            info.applier = a.name
        out.letters.extend(letters)
        out.counts.append(count)
        if req.applier:
            out.next_after_id = more
    return out


async def dead_letter_action(state_dir: str, hosted: Sequence[Hosted],
                             req: gateway_pb2.DeadLetterActionRequest
                             ) -> gateway_pb2.DeadLetterActionResponse:
    """Replay or discard letters of one applier of this node."""
    a = _applier(hosted, req.applier, "applier")
    log = _log(state_dir, a)

    def run() -> list[gateway_pb2.DeadLetterOutcome]:
        serial = not getattr(getattr(a.applier, "capabilities", None), "thread_safe", True)
        if serial:
            with a.lock:
                return act(log, req.action, list(req.ids), every=req.all, applier=a.applier,
                           note=req.note)
        return act(log, req.action, list(req.ids), every=req.all, applier=a.applier,
                   note=req.note)

    try:
        outcomes = await asyncio.to_thread(run)
    except ValueError as exc:
        raise InvalidRequest("action" if "action" in str(exc) else "ids", str(exc)) from None
    except DeadLetterError as exc:
        raise InvalidRequest("applier", str(exc)) from None
    return gateway_pb2.DeadLetterActionResponse(outcomes=outcomes)
