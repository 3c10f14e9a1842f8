#!/usr/bin/env python3
"""What a long answer costs to validate and encode: the work FastAPI did on the event loop.

    python bench/long_answers.py [--quick] [--runners N] [--events E] [--json] [--no-write]

In this process, no server: a SQLite store in a temporary directory, N registered runners
(500, each checked in with readings, as ``gg runners`` lists them a page at a time) and E
events (10,000: the feed's largest page). For the page of runners and the feed, the CPU of
reading the answer (the worker thread's part either way) and of validating and encoding it
with the route's response model (``gg.server.off_loop.answer``): the part a route's return
value had FastAPI do on the loop, which every parked claim waited for. The median of three
rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import emit, write_section  # noqa: E402

from gg.control import answers, runners  # noqa: E402
from gg.control.core import Core  # noqa: E402
from gg.control.people import bootstrap  # noqa: E402
from gg.control.wiring import wired  # noqa: E402
from gg.server.off_loop import answer  # noqa: E402
from gg.server.routes.flights import EVENTS  # noqa: E402
from gg.server.routes.runners import RUNNER_ROWS  # noqa: E402
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
        encode_runners, page = _ms(lambda: answer(RUNNER_ROWS, rows))
        read_events, feed = _ms(lambda: core.store.events(after=0, kind=None, runner_id=None,
                                                          flight_id=None, limit=events,
                                                          newest=True))
        encode_events, encoded = _ms(lambda: answer(EVENTS, feed))
        core.store.close()
    return {"runners": len(rows), "events": len(feed),
            "runners_read_ms": read_runners, "runners_encode_ms": encode_runners,
            "runners_bytes": len(page.body),
            "events_read_ms": read_events, "events_encode_ms": encode_events,
            "events_bytes": len(encoded.body)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 runners, 1,000 events")
    ap.add_argument("--runners", type=int, default=500)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    r = measure(100 if args.quick else args.runners, 1000 if args.quick else args.events)
    text = (f"Long answers (SQLite, in process, no server), CPU ms, the median of {ROUNDS} "
            "rounds; the encoding is what FastAPI did on the event loop before the routes "
            "handed it to a worker thread:\n\n"
            "| answer | read (a worker thread, as before) | validate and encode | bytes |\n"
            "|---|---|---|---|\n"
            f"| a page of {r['runners']} runners (`gg runners`) | {r['runners_read_ms']} | "
            f"**{r['runners_encode_ms']}** | {r['runners_bytes']:,} |\n"
            f"| the event feed, {r['events']:,} events (`GET /v1/events?limit=...`) | "
            f"{r['events_read_ms']} | **{r['events_encode_ms']}** | {r['events_bytes']:,} |")
    print(text)
    if not args.no_write:
        write_section("long-answers", text)
    emit(r, args.json)
    return r


if __name__ == "__main__":
    main()
