"""Linearizability checker for key-value histories (Wing & Gong / Lowe search with memoization,
as in Porcupine), partitioned per key (a KV store is linearizable iff every key's register
history is: locality, Herlihy & Wing 1990).

A history is a list of :class:`Operation`. ``call`` and ``ret`` are timestamps on one global
clock; ``ret=None`` marks an operation whose outcome is unknown (the client timed out): it may
have taken effect at any point after its call, or never. Reads with unknown outcomes constrain
nothing and are ignored.

Equal timestamps are common in histories from other tools (coarse clocks). A return and a call
with the same timestamp are *concurrent*: the call is ordered before the return, as Porcupine
does, so operation B may take effect before A although B's call equals A's return. Only a
call strictly after a return orders the two operations. An operation whose return precedes
its own call is not a history at all: `InvalidHistoryError` names it.

The model is a register per key holding a string or ``None`` (absent):

* ``put(key, value)`` always succeeds;
* ``get(key) -> output`` must return the current value;
* ``cas(key, expected, value) -> True`` succeeds iff the current value equals ``expected``
  (then stores ``value``); ``-> False`` is legal iff it does not.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

PUT = "put"
GET = "get"
CAS = "cas"

#: Search budget per key (states expanded) before the answer is "inconclusive".
DEFAULT_BUDGET = 2_000_000


class InvalidHistoryError(ValueError):
    """The history is malformed (e.g. an operation returns before it is called); ``str()``
    names the operation."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One client operation. ``output`` is the value read (``get``) or success (``cas``)."""

    client: int
    kind: str
    key: str
    call: int
    ret: int | None
    value: str | None = None
    expected: str | None = None
    output: object = None

    def describe(self) -> str:
        if self.kind == PUT:
            body = f"put({self.key}, {self.value!r})"
        elif self.kind == GET:
            body = f"get({self.key}) -> {self.output!r}"
        else:
            body = f"cas({self.key}, {self.expected!r}, {self.value!r}) -> {self.output!r}"
        end = "?" if self.ret is None else str(self.ret)
        return f"client {self.client}: {body} [{self.call}, {end}]"


@dataclass(slots=True)
class CheckResult:
    """``ok`` is True (linearizable), False (not), or None (search budget exhausted)."""

    ok: bool | None
    key: str | None = None
    detail: str = ""
    stuck: list[Operation] = field(default_factory=list)


def _step(state: str | None, op: Operation) -> tuple[bool, str | None]:
    """Apply ``op`` to register ``state``: (legal, new state)."""
    if op.kind == PUT:
        return True, op.value
    if op.kind == GET:
        return op.output == state, state
    if op.ret is None:  # cas with unknown outcome, taking effect: only a success changes state
        return state == op.expected, op.value
    if op.output:
        return state == op.expected, op.value
    return state != op.expected, state


def _validate(ops: list[Operation]) -> None:
    for o in ops:
        if o.ret is not None and o.ret < o.call:
            raise InvalidHistoryError(f"operation returns before it is called: {o.describe()}")


def check_register(ops: list[Operation], budget: int = DEFAULT_BUDGET) -> CheckResult:
    """Check one key's history against the register model. Raises `InvalidHistoryError` for
    an operation whose return precedes its call."""
    _validate(ops)
    ops = [o for o in ops if not (o.ret is None and o.kind == GET)]
    ops.sort(key=lambda o: o.call)
    n = len(ops)
    if n == 0:
        return CheckResult(True)
    known_mask = 0
    for i, o in enumerate(ops):
        if o.ret is not None:
            known_mask |= 1 << i
    inf = 1 << 62
    rets = [o.ret if o.ret is not None else inf for o in ops]
    calls = [o.call for o in ops]

    seen: set[tuple[int, str | None]] = set()
    # DFS over (linearized set, register value); each frame remembers the next candidate.
    stack: list[tuple[int, str | None]] = [(0, None)]
    seen.add((0, None))
    expanded = 0
    best_mask = 0
    while stack:
        mask, state = stack.pop()
        if mask & known_mask == known_mask:
            return CheckResult(True)
        expanded += 1
        if expanded > budget:
            return CheckResult(None, ops[0].key, f"search budget of {budget} states exhausted")
        if bin(mask & known_mask).count("1") > bin(best_mask & known_mask).count("1"):
            best_mask = mask
        # The next linearized op must be called no later than every pending known op returns
        # (a call at the same timestamp as a return is concurrent with it).
        min_ret = inf
        for i in range(n):
            if not (mask >> i) & 1 and rets[i] < min_ret:
                min_ret = rets[i]
        for i in range(n - 1, -1, -1):
            if (mask >> i) & 1 or calls[i] > min_ret:
                continue
            legal, new_state = _step(state, ops[i])
            if not legal:
                continue
            key = (mask | (1 << i), new_state)
            if key not in seen:
                seen.add(key)
                stack.append(key)
    pending = [ops[i] for i in range(n) if not (best_mask >> i) & 1 and ops[i].ret is not None]
    pending.sort(key=lambda o: o.call)
    return CheckResult(
        False,
        ops[0].key,
        "no linearization; after the longest linearizable prefix these completed operations "
        "could not be placed",
        pending[:5],
    )


def check_history(ops: list[Operation], budget: int = DEFAULT_BUDGET) -> CheckResult:
    """Check a whole KV history, one key at a time. Returns the first failing key's result.
    Raises `InvalidHistoryError` for a malformed history (checked before any search)."""
    _validate(ops)
    by_key: dict[str, list[Operation]] = defaultdict(list)
    for o in ops:
        by_key[o.key].append(o)
    inconclusive: CheckResult | None = None
    for key in sorted(by_key):
        r = check_register(by_key[key], budget)
        if r.ok is False:
            return r
        if r.ok is None and inconclusive is None:
            inconclusive = r
    return inconclusive or CheckResult(True)
