"""The node process's garbage-collector policy, set once the node has started.

A node allocates a handful of container objects per transaction (futures, messages, entries, the
applier's batches) that live for the milliseconds a write takes to commit and apply, on top of the
tens of thousands that live as long as the process (modules, plugins, the gRPC server, the store's
indexes). CPython's defaults (a young-generation collection every 700 net allocations, a full one
whenever the old generation grew by a quarter) made the collector trace all of those again and
again: CPU on every one-row transaction on every node, and every few seconds a collection of the
whole heap that held the event loop (``docs/benchmarks.md``, "The collector").

:func:`settle` collects once, moves every object alive at that point into the permanent
generation (``gc.freeze``: never traced again, still freed by reference counting when its
count drops) and raises the young generation's threshold, so that a collection runs every
:data:`YOUNG_THRESHOLD` net allocations and traces only what the last ones left alive.
Garbage cycles are still collected; they wait a little longer. Only the ``gateway run``
process calls it: tests and libraries that host a node in their own process keep their
interpreter's policy.

A threshold counts allocations, not time: a node that allocates little (an idle one, or one
serving a trickle of requests) would keep the garbage cycles it made -- a failed call's
exception, traceback and frames, with the request they hold -- until 100,000 more container
objects were allocated. :class:`YoungSweeper` bounds that: a daemon thread that collects the
young generation once per ``interval`` (1 s) when it holds anything (:data:`SWEEP_FLOOR`),
so a cycle lives about a second at idle (ten if it was alive at one collection: the middle
generation is collected every tenth); under load the threshold comes first and the sweep
costs one young collection a second.

Why 100,000 and not less: a replica applying a replicated epoch keeps a few container
objects per row alive for the whole epoch (its rows, keys, verdicts and derived rows: tens
of thousands at once); at 10,000 every young collection traced them again and promoted them,
and the middle generation traced them once more -- 11 % of a replica's CPU in a channel
whose epochs are half in conflict. At 100,000 most of them are freed by reference counting
before a collection runs (docs/benchmarks.md, "The collector").
"""

from __future__ import annotations

import gc

from gateway.node.loop.periodic import Periodic

#: Net allocations of container objects between young-generation collections.
YOUNG_THRESHOLD = 100_000
#: Young collections per middle-generation one, middle per old one (CPython's: 10, 10).
OLDER_THRESHOLDS = (10, 10)
#: Young objects below which a sweep leaves the generation alone.
SWEEP_FLOOR = 1


def settle() -> None:
    """Collect, freeze what survives, and set the thresholds above. Call once, after the
    node's start-up allocations (plugins, server, store) are done; calling it again only
    freezes what has been allocated since."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


class YoungSweeper(Periodic):
    """The periodic young collection (module docstring; its life is ``Periodic``'s);
    ``sweeps`` counts the collections it made."""

    name = "gc-sweep"

    def __init__(self, interval: float = 1.0, floor: int = SWEEP_FLOOR) -> None:
        super().__init__(interval)
        self.floor = floor
        self.sweeps = 0

    def tick(self) -> bool:
        return self.sweep()

    def sweep(self) -> bool:
        """One interval's work: collect the young generation if it holds ``floor`` objects
        or more; whether it did."""
        if gc.get_count()[0] < self.floor or not gc.isenabled():
            return False
        gc.collect(0)
        self.sweeps += 1
        return True
