"""``malloc_arena_max``: ``gateway run`` bounds glibc's malloc arenas before the node's threads
allocate (``gateway.node.loop.malloc_arenas``), unless the operator's environment sets them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.node.base.config import ConfigError, NodeConfig
from gateway.node.loop.malloc_arenas import limit_arenas

_CHILD = """
import ctypes, sys, threading
from gateway.node.loop.malloc_arenas import limit_arenas
print(limit_arenas(int(sys.argv[1])), flush=True)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
barrier = threading.Barrier(8)
def work():
    barrier.wait()  # every thread alive at once, each allocating for its first time
    for _ in range(200):
        libc.free(ctypes.c_void_p(libc.malloc(64 << 10)))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


def _arenas(n: int, env: dict[str, str]) -> tuple[str, int]:
    got = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True, text=True,
                         timeout=60, env=env, check=True)
    return got.stdout.strip(), got.stderr.count("Arena ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_bound_holds_the_arenas_of_many_threads_and_the_environment_wins():
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    said, unbounded = _arenas(0, env)
    assert said == "False"
    assert unbounded > 2  # glibc's default gives the threads their own arenas
    said, bounded = _arenas(2, env)
    assert said == "True"
    assert bounded <= 2
    said, operators = _arenas(2, {**env, "MALLOC_ARENA_MAX": "3"})
    assert said == "False"  # the operator's setting stands
    assert 2 < operators <= 3


def test_an_environment_setting_is_left_to_stand():
    assert not limit_arenas(2, {"MALLOC_ARENA_MAX": "4"})
    assert not limit_arenas(2, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"})
    assert not limit_arenas(0, {})


def test_the_default_is_two_arenas_and_a_negative_bound_is_refused_naming_the_key():
    assert NodeConfig().malloc_arena_max == 2
    with pytest.raises(ConfigError, match="malloc_arena_max: must be at least 0"):
        NodeConfig(malloc_arena_max=-1).validate()
