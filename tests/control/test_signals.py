"""Signals reach their subscribers on the server's event loop, whichever thread raised them."""

from __future__ import annotations

import asyncio
import threading

from gg.control.core import Signals

from support import wait_until


def _loop_in_a_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, thread


def test_a_signal_raised_on_a_worker_thread_wakes_its_subscribers_on_the_loop():
    """A write made from a worker thread (a listing's, a scrape's) raises its signals there:
    the long polls and deadlines they wake are the loop's, and are not safe to touch from
    another thread, so the signal is handed to the loop."""
    loop, thread = _loop_in_a_thread()
    try:
        signals = Signals(loop=loop)
        woke: list[tuple[str, int]] = []
        signals.on_flight.append(lambda flight_id: woke.append((flight_id, threading.get_ident())))
        signals.on_ready.append(lambda: woke.append(("ready", threading.get_ident())))
        signals.on_instruction.append(lambda r, k: woke.append((f"{r} {k}", threading.get_ident())))
        signals.flight_changed("f_1")
        signals.ready_changed()
        signals.instruct("r_1", "stop")
        wait_until(lambda: len(woke) == 3, timeout=10, what="three wake-ups")
        assert sorted(woke) == sorted([("f_1", thread.ident), ("ready", thread.ident),
                                       ("r_1 stop", thread.ident)])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_a_signal_raised_on_the_loop_wakes_its_subscribers_at_once():
    loop = asyncio.new_event_loop()
    try:
        signals = Signals(loop=loop)
        woke: list[str] = []
        signals.on_event.append(lambda: woke.append("event"))

        async def raise_it() -> list[str]:
            signals.event_added()
            return list(woke)  # before any other task ran

        assert loop.run_until_complete(raise_it()) == ["event"]
    finally:
        loop.close()


def test_without_a_running_server_a_signal_wakes_its_subscribers_where_it_was_raised():
    signals = Signals()
    woke: list[str] = []
    signals.on_event.append(lambda: woke.append("event"))
    signals.event_added()
    assert woke == ["event"]


def test_a_runner_that_may_take_work_is_its_own_signal_announced_once_a_unit_and_heard():
    """``takers_changed`` (a runner back, healthy again, relabelled) wakes its own subscribers,
    not ``on_ready``'s (nothing became ready); a held unit announces it once, as ``t``, and
    another replica hearing ``t`` raises it there."""
    told: list[str] = []
    signals = Signals(announce=told.append)
    woke: list[str] = []
    signals.on_ready.append(lambda: woke.append("ready"))
    signals.on_takers.append(lambda: woke.append("takers"))

    def unit() -> None:
        signals.takers_changed()
        signals.takers_changed()

    _, fired = signals.held(unit)
    assert told == ["t"] and woke == []  # announced inside the unit, raised after its commit
    signals.raise_all(fired)
    assert woke == ["takers"]
    signals.heard("t")
    assert woke == ["takers", "takers"] and told == ["t"]  # heard: not announced again
