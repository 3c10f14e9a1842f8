"""The runner's one alarm thread: it starts each flight's lease keeper when the keeper first
has something to do, and forgets the request of a flight that ended before that."""

from __future__ import annotations

import threading
import time

from gg.runner.alarm import Alarm

from support import wait_until


def test_callbacks_run_in_time_order_and_a_cancelled_one_never_runs():
    alarm = Alarm()
    ran: list[str] = []
    now = time.monotonic()
    late = alarm.at(now + 0.2, lambda: ran.append("late"))
    cancelled = alarm.at(now + 0.1, lambda: ran.append("cancelled"))
    alarm.at(now, lambda: ran.append("first"))
    assert alarm.cancel(cancelled) is True
    wait_until(lambda: "late" in ran, what="the later callback")
    assert ran == ["first", "late"]  # the cancelled one, due between them, did not run
    assert alarm.cancel(late) is False  # called already
    assert alarm.cancel(None) is False and alarm.pending() == 0


def test_an_earlier_request_wakes_the_alarm_and_a_failing_callback_does_not_stop_it():
    alarm = Alarm()
    ran = threading.Event()
    alarm.at(time.monotonic() + 3600, lambda: None)  # the alarm sleeps towards this one...
    alarm.at(time.monotonic(), lambda: 1 / 0)
    alarm.at(time.monotonic(), ran.set)  # ...and is woken for these
    wait_until(ran.is_set, what="the callback after the failing one")
    assert alarm.pending() == 1


def test_one_thread_serves_every_request():
    alarm = Alarm()
    threads: set[int] = set()
    done = threading.Event()
    for _ in range(20):
        alarm.at(time.monotonic(), lambda: threads.add(threading.get_ident()))
    alarm.at(time.monotonic(), done.set)
    wait_until(done.is_set)
    assert len(threads) == 1 and threading.get_ident() not in threads
