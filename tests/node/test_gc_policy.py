"""The node process's collector policy (gateway.node.loop.gc_policy): start-up objects frozen, the
young threshold raised, and garbage cycles still collected without an explicit collect.

Each case runs in a fresh interpreter: the policy changes process-wide state."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


#: ``make_cycles(n)``: n two-object cycles made and dropped (reference counting alone never
#: frees them); the list it returns gets a 1 as each one is freed.
_CYCLES = textwrap.dedent("""
    import weakref
    class Node:
        pass
    def make_cycles(n):
        dead = []
        for _ in range(n):
            a, b = Node(), Node()
            a.other, b.other = b, a
            weakref.finalize(a, dead.append, 1)
            del a, b
        return dead
""")


def _run(body: str, prelude: str = "") -> dict:
    code = prelude + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_settle_freezes_what_is_alive_and_raises_the_young_threshold() -> None:
    got = _run("""
        import gc, json
        from gateway.node.loop import gc_policy
        keep = [[i] for i in range(5000)]
        gc_policy.settle()
        print(json.dumps({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(),
                          "young": gc.get_count()[0]}))
    """)
    from gateway.node.loop import gc_policy
    assert got["frozen"] >= 5000
    assert tuple(got["threshold"]) == (gc_policy.YOUNG_THRESHOLD, *gc_policy.OLDER_THRESHOLDS)
    assert got["young"] < 100


def test_cycles_made_after_settle_are_still_collected_by_allocation_alone() -> None:
    got = _run("""
        import gc, json
        from gateway.node.loop import gc_policy
        gc_policy.settle()
        dead = make_cycles(50)
        before = len(dead)
        churn = []
        for i in range(3 * gc_policy.YOUNG_THRESHOLD):  # net allocations, no gc.collect()
            churn.append([i])
        print(json.dumps({"before": before, "after": len(dead)}))
    """, _CYCLES)
    assert got["before"] == 0
    assert got["after"] == 50


def test_objects_frozen_at_start_are_still_freed_when_their_count_drops() -> None:
    got = _run("""
        import gc, json, weakref
        from gateway.node.loop import gc_policy
        class Box:
            pass
        box = Box()
        freed = []
        weakref.finalize(box, freed.append, 1)
        gc_policy.settle()
        del box
        print(json.dumps({"freed": len(freed)}))
    """)
    assert got["freed"] == 1


def test_a_sweeper_frees_cycles_of_an_idle_process_within_its_interval() -> None:
    """With the young threshold at 100,000 allocations, a process that allocates nothing more
    would keep its cycles: the sweeper collects them on its clock."""
    got = _run("""
        import gc, json, time
        from gateway.node.loop import gc_policy
        gc_policy.settle()
        dead = make_cycles(20)
        time.sleep(0.3)
        before = len(dead)  # no allocation since: nothing collected them
        sweeper = gc_policy.YoungSweeper(interval=0.05)
        sweeper.start()
        end = time.monotonic() + 5
        while len(dead) < 20 and time.monotonic() < end:
            time.sleep(0.02)
        sweeper.stop()
        print(json.dumps({"before": before, "after": len(dead), "sweeps": sweeper.sweeps}))
    """, _CYCLES)
    assert got["before"] == 0
    assert got["after"] == 20
    assert got["sweeps"] >= 1


def test_a_sweep_leaves_an_empty_young_generation_and_a_disabled_collector_alone() -> None:
    got = _run("""
        import gc, json
        from gateway.node.loop import gc_policy
        gc_policy.settle()
        s = gc_policy.YoungSweeper(interval=0)
        gc.collect(0)
        empty = s.sweep() if gc.get_count()[0] == 0 else None
        keep = [[i] for i in range(10)]
        full = s.sweep()
        gc.disable()
        keep2 = [[i] for i in range(10)]
        disabled = s.sweep()
        s.start()  # interval 0: no thread
        print(json.dumps({"empty": empty, "full": full, "disabled": disabled,
                          "thread": s._thread is not None}))
    """)
    assert got == {"empty": False, "full": True, "disabled": False, "thread": False}
