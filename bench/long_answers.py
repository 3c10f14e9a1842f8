#!/usr/bin/env python3
"""What a long answer costs to validate and encode: the work FastAPI did on the event loop.

    python bench/long_answers.py [--quick] [--runners N] [--events E] [--json] [--no-write]

In this process, no server: a SQLite store in a temporary directory, N registered runners
(500, each checked in with readings, as ``gg runners`` lists them a page at a time) and E
events (10,000: the feed's largest page). For the page of runners and the feed, the CPU of
reading the answer (the worker thread's part either way) and of validating and encoding it
with the route's response model: in one call, as FastAPI did on the loop (which every parked claim
waited for), and a row at a time, as the routes now do on a worker thread
(``gg.server.encoded.rows``). The median of three rounds. Then what the loop would
feel: a thread sleeping 2 ms at a time, 300 times, while another encodes the answer over and
over, one way and then the other; how much later than asked it woke (p99, ms). pydantic's
core holds the interpreter's lock through each call, so one call over the whole list keeps
any other thread waiting until it returns, while between rows the lock changes hands.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import publish  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from gg.api.events import Event  # noqa: E402
from gg.api.runners import RunnerRow  # noqa: E402
from gg.control import answers, runners  # noqa: E402
from gg.control.core import Core  # noqa: E402
from gg.control.people import bootstrap  # noqa: E402
from gg.control.wiring import wired  # noqa: E402
from gg.server.encoded import answer, rows  # noqa: E402
from gg.settings import Settings  # noqa: E402
from gg.store import open_store  # noqa: E402

from support import check_in, proof  # noqa: E402

ROUNDS = 3
READINGS = {"cpu": 0.42, "memory_free_mb": 3900, "disk_free_mb": 51200, "load1": 0.7}


def _ms(fn, rounds: int = ROUNDS) -> tuple[float, object]:
    taken, value = [], None
    for _ in range(rounds):
        started = time.process_time()
        value = fn()
        taken.append((time.process_time() - started) * 1000)
    return round(statistics.median(taken), 2), value


def _late_p99(encode) -> float:
    """A sleeper's lateness (p99, ms) beside a thread running ``encode`` over and over."""
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            encode()
    worker = threading.Thread(target=busy)
    worker.start()
    late = []
    try:
        for _ in range(300):
            due = time.perf_counter() + 0.002
            time.sleep(0.002)
            late.append((time.perf_counter() - due) * 1000)
    finally:
        stop.set()
        worker.join()
    return round(sorted(late)[296], 1)


def _ways(model: type, values: list) -> dict:
    row, whole = TypeAdapter(model), TypeAdapter(list[model])  # type: ignore[valid-type]
    one_call, body = _ms(lambda: answer(whole, values).body)
    by_rows, same = _ms(lambda: rows(row, values))
    assert body == same, "a row at a time must make the same bytes"
    return {"one_call_ms": one_call, "by_rows_ms": by_rows, "bytes": len(body),
            "one_call_late_p99": _late_p99(lambda: answer(whole, values)),
            "by_rows_late_p99": _late_p99(lambda: rows(row, values))}


def measure(count: int, events: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-answers-") as tmp:
        core = Core(store=open_store(Path(tmp)), settings=Settings(dev=True), wiring=wired())
        bootstrap(core, Path(tmp))
        owner = core.store.person_by_name("owner")
        for n in range(count):
            runner, _ = runners.register(
                core, owner, name=f"r{n:04d}", **proof(core, "register"),
                labels={"os": "linux", "arch": "x86_64", "pool": f"p{n % 7}"}, workers=2,
                inventory={"tools": ["git", "make", "python3"]}, version="1.0")
            check_in(core, runner, readings=READINGS)
        with core.store.atomic():  # as many opens' events (each flight's title in its body)
            for n in range(events):
                core.store.add_event("info:flight:opened", core.now(), actor="owner",
                                     flight_id=f"f_{n:010x}", body={"title": f"make test-{n}"})
        read_runners, rows = _ms(lambda: answers.runners_listed(core, limit=count))
        read_events, feed = _ms(lambda: core.store.events(after=0, kind=None, runner_id=None,
                                                          flight_id=None, limit=events,
                                                          newest=True))
        core.store.close()
        return {"runners": {"rows": len(rows), "read_ms": read_runners,
                            **_ways(RunnerRow, rows)},
                "events": {"rows": len(feed), "read_ms": read_events,
                           **_ways(Event, feed)}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 runners, 1,000 events")
    ap.add_argument("--runners", type=int, default=500)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    r = measure(100 if args.quick else args.runners, 1000 if args.quick else args.events)
    lines = [f"Long answers (SQLite, in process, no server), CPU ms, the median of {ROUNDS} "
             "rounds, and a sleeping thread's lateness beside the encoding (p99 of 300 sleeps "
             "of 2 ms; the interpreter's switch interval is 5 ms):\n",
             "| answer | read (a worker thread) | encode in one call (FastAPI, on the loop, "
             "before) | a row at a time (a worker thread, now) | bytes | a sleeper late, one "
             "call / a row at a time |", "|---|---|---|---|---|---|"]
    for name, what in (("runners", "a page of {n} runners (`gg runners`)"),
                       ("events", "the event feed, {n} events (`GET /v1/events?limit=...`)")):
        x = r[name]
        count = f"{x['rows']:,}"
        lines.append(f"| {what.format(n=count)} "
                     f"| {x['read_ms']} | {x['one_call_ms']} | {x['by_rows_ms']} | "
                     f"{x['bytes']:,} | **{x['one_call_late_p99']} / {x['by_rows_late_p99']}** |")
    text = "\n".join(lines)
    publish("long-answers", text, r, args)
    return r


if __name__ == "__main__":
    main()
