"""The threads a runner's flights fly on: a thread whose flight is over is handed the next one,
a new thread starts only when none is waiting, and one that waited in vain ends."""

from __future__ import annotations

import threading

from gg.runner.loop import Workers

from support import wait_until


def test_flights_one_after_another_fly_on_one_thread():
    seen: list[int] = []
    done = threading.Semaphore(0)

    def fly(run) -> None:
        seen.append(threading.get_ident())
        done.release()

    workers = Workers(fly, idle_for=600)
    for run in range(5):
        workers.fly(run)
        assert done.acquire(timeout=60)
        wait_until(lambda: len(workers._idle) == 1, what="the thread waiting for the next")
    assert len(set(seen)) == 1 and workers.started == 1


def test_flights_at_once_each_have_a_thread_and_an_idle_one_ends():
    release = threading.Event()
    inside = threading.Semaphore(0)
    threads: list[threading.Thread] = []

    def fly(run) -> None:
        threads.append(threading.current_thread())
        inside.release()
        release.wait(60)

    workers = Workers(fly, idle_for=0.05)
    workers.fly("a")
    workers.fly("b")  # the first is still flying: a second thread
    assert inside.acquire(timeout=60) and inside.acquire(timeout=60)
    assert workers.started == 2
    release.set()
    wait_until(lambda: not workers._idle and not any(t.is_alive() for t in threads),
               what="both threads to end once nothing came")
    workers.fly("c")  # none waits any more: a new thread
    assert inside.acquire(timeout=60) and workers.started == 3
