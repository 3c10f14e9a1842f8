"""The server bounds glibc's malloc arenas before it starts a thread (gg.server.start_up)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gg.server.start_up import bound_malloc_arenas, glibc

needs_glibc = pytest.mark.skipif(not glibc(), reason="glibc's malloc arenas")

# Eight threads allocate at once, then glibc's malloc_stats names each arena on stderr.
_ARENAS_AFTER_EIGHT_THREADS = textwrap.dedent("""
    import ctypes, os, sys, threading
    from gg.server.start_up import bound_malloc_arenas

    arenas = int(sys.argv[1])
    print(bound_malloc_arenas(arenas, {}), flush=True)
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    together = threading.Barrier(8)

    def allocate():
        libc.malloc(4096)
        together.wait()  # none ends (and frees its arena for the next) before all allocated

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc.malloc_stats()
""")


def _arenas_with(bound: int) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", _ARENAS_AFTER_EIGHT_THREADS, str(bound)],
                          capture_output=True, text=True, env=env, timeout=60, check=True)
    return done.stdout.strip(), done.stderr.count("Arena ")


@needs_glibc
def test_a_bounded_server_process_keeps_at_most_the_bound_of_arenas_however_many_threads():
    said, arenas = _arenas_with(2)
    assert said == "2"
    assert 1 <= arenas <= 2


@needs_glibc
def test_without_the_bound_each_allocating_thread_takes_an_arena_of_its_own():
    said, arenas = _arenas_with(0)  # GG_MALLOC_ARENAS=0: glibc's own rule
    assert said == "None"
    assert arenas > 2  # what the bound saves: the test above would see these too


def test_an_operators_malloc_arena_max_wins_and_nothing_is_set():
    assert bound_malloc_arenas(2, {"MALLOC_ARENA_MAX": "4"}) is None
    assert bound_malloc_arenas(0, {}) is None


def test_the_bound_is_a_setting_with_a_default_of_two():
    from gg.settings import Settings

    assert Settings().malloc_arenas == 2
    assert Settings.from_env({"GG_MALLOC_ARENAS": "0"}).malloc_arenas == 0
    with pytest.raises(ValueError, match="GG_MALLOC_ARENAS"):
        Settings.from_env({"GG_MALLOC_ARENAS": "two"})
    with pytest.raises(ValueError) as below:
        Settings.from_env({"GG_MALLOC_ARENAS": "-1"})
    assert str(below.value) == "GG_MALLOC_ARENAS: '-1' is below 0"


# glibc's thread arenas ("heaps"): mapped at a multiple of HEAP_MAX_SIZE (64 MB on a 64-bit
# machine), read-write from its start and reserved (---p) to the 64 MB's end
_HEAP = 64 * 1024 * 1024


def _thread_heaps(pid: int) -> int:
    rows = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            rows.append((start, end, parts[1], len(parts) > 5))
    heaps = 0
    for i, (start, end, perm, named) in enumerate(rows):
        if start % _HEAP or perm != "rw-p" or named:
            continue
        reserved = i + 1 < len(rows) and rows[i + 1][0] == end and rows[i + 1][2] == "---p" \
            and rows[i + 1][1] >= start + _HEAP
        heaps += end - start == _HEAP or reserved
    return heaps


@needs_glibc
@pytest.mark.skipif(sys.maxsize < 2**32 or not os.path.exists("/proc/self/maps"),
                    reason="reads a 64-bit Linux process's maps")
def test_gg_server_bounds_its_arenas_before_its_threads_allocate(make_fleet):
    from tests.support import wait_until

    bounded, unbounded = make_fleet(), make_fleet({"GG_MALLOC_ARENAS": "0"})
    for fleet in (bounded, unbounded):
        for _ in range(3):  # the worker threads read, the writer writes
            assert fleet.gg("runners").returncode == 0
            assert fleet.gg("flights").returncode == 0
    # glibc's own rule: a thread's first allocation takes an arena of its own
    wait_until(lambda: _thread_heaps(unbounded.server.proc.pid) >= 2, timeout=30,
               what="the unbounded server's threads holding arenas of their own")
    assert _thread_heaps(bounded.server.proc.pid) <= 1  # the main arena and one more
