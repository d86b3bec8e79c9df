"""``gateway run`` gives the memory glibc keeps after ``free`` back to the OS
(``gateway.node.loop.malloc_trim``): pages freed in the middle of the heap, which glibc itself
never returns, leave the resident set once the trimmer looks; and it trims only when the
allocator keeps more than its threshold."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gateway.node.base.config import ConfigError, NodeConfig
from gateway.node.loop.malloc_trim import MallocTrimmer, glibc_allocator

_FRAGMENTED = textwrap.dedent("""
    import ctypes, json
    from gateway.node.loop.malloc_trim import MallocTrimmer

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: as after glibc raised it (a big free)
    blocks = []
    for _ in range(200):  # 50 MiB of 256 KiB blocks, touched
        p = libc.malloc(256 << 10)
        ctypes.memset(p, 1, 256 << 10)
        blocks.append(p)
    for p in blocks[0::2]:  # every other one freed: holes no shrink of the heap's top reaches
        libc.free(p)
    before = rss()
    trimmer = MallocTrimmer(1.0, min_free=8 << 20)
    trimmed = trimmer.check()
    print(json.dumps({"before": before, "after": rss(), "trimmed": trimmed}))
""")


@pytest.mark.skipif(glibc_allocator() is None, reason="glibc's allocator only")
def test_memory_freed_inside_the_heap_leaves_the_resident_set():
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True,
                         check=True, timeout=60)
    got = json.loads(out.stdout)
    assert got["trimmed"] is True
    assert got["before"] - got["after"] >= 20 << 20  # of the 25 MiB freed


def test_trims_only_above_the_threshold():
    free, trims = [0], []
    trimmer = MallocTrimmer(1.0, min_free=100, allocator=(lambda: free[0],
                                                           lambda: trims.append(1) or 1))
    free[0] = 100
    assert trimmer.check() is False and not trims
    free[0] = 101
    assert trimmer.check() is True and trims == [1]
    assert (trimmer.checks, trimmer.trims) == (2, 1)


def test_no_thread_when_off_or_without_glibc():
    off = MallocTrimmer(0.0, allocator=(lambda: 1 << 30, lambda: 1))
    off.start()
    assert off._thread is None
    none = MallocTrimmer(1.0, allocator=None)
    none._allocator = None
    none.start()
    assert none._thread is None and none.check() is False


def test_negative_malloc_trim_ms_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="malloc_trim_ms: must be at least 0"):
        NodeConfig(malloc_trim_ms=-1).validate()
