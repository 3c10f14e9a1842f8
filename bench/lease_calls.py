#!/usr/bin/env python3
"""What each of a runner's lease calls costs the server's writer, in statements and CPU.

The calls: a claim, `started`, a renewal and a hand-back.

    python bench/lease_calls.py [--quick] [--flights N] [--history N] [--database URL] [--noise]
                                [--json] [--no-write]

In this process, no server and no HTTP: a store (SQLite in a temporary directory, or a fresh
PostgreSQL database made on ``--database``'s server and dropped afterwards), one registered
runner, then N flights (300) each opened, claimed (``leases.try_claim``: the runner's claim
finding it ready), reported `started`, renewed once and handed back, each call a unit of its
own in a transaction of its own, as the server's writer runs a call that comes alone. For
each call: the statements the store traced (every one, the transaction's edges too) and the
CPU of the writer's thread, the median over the flights.

``--history N``: before measuring, the landed warm-up flights are copied until the store
holds N landed flights, with their grants, facts and events (bench/history.py): the store
of a server that has run for months, on which the calls should cost what they cost on a
new one.

``--noise``: while measuring, one core burned by another process (bench/noise.py's spinner),
and in this process the flights' first page listed every 250 ms and the runners every second
(``gg.control.flights.list_flights``, ``gg.control.answers.runners_listed``), each on a
thread of its own as the server lists them: there is no server here for `gg flights` to ask.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import history  # noqa: E402
from common import check_store_options, drop_database, fresh_database, publish, store_options  # noqa: E402
from noise import FLIGHTS_EVERY, NO_NOISE_SENTENCE, RUNNERS_EVERY, SPIN, noise_option  # noqa: E402

from gg.control import answers, flights, leases  # noqa: E402
from gg.control.core import Core  # noqa: E402
from gg.control.people import bootstrap  # noqa: E402
from gg.control.wiring import wired  # noqa: E402
from gg.domain.flight_spec import FlightSpec  # noqa: E402
from gg.settings import Settings  # noqa: E402
from gg.store import open_store  # noqa: E402

from support import make_runner  # noqa: E402

CALLS = ("claim", "started", "renewal", "hand-back")
WARM_UP = 20  # flights flown before measuring: the first one's one-off reads aside


def measure(count: int, database: str | None, noise: bool = False, past: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-lease-calls-") as tmp:
        url, made = fresh_database(database) if database else (None, None)
        try:
            core = Core(store=open_store(Path(tmp), url),
                        settings=Settings(dev=True, lease_ttl=600, offline_after=3600),
                        wiring=wired())
            bootstrap(core, Path(tmp))
            try:
                return _fly(core, count, noise, past)
            finally:
                core.store.close()
        finally:
            if database and made:
                drop_database(database, made)


def _fly(core: Core, count: int, noise: bool, past: int = 0) -> dict:
    owner = core.store.person_by_name("owner")
    runner = make_runner(core, owner)
    cpu: dict[str, list[float]] = {c: [] for c in CALLS}
    wall: dict[str, list[float]] = {c: [] for c in CALLS}
    said: dict[str, int] = dict.fromkeys(CALLS, 0)
    now_counting: list[str] = []
    heard: dict = {"noise": noise}
    filled: dict = {}

    writer: list[int] = []  # the writer's thread: the noise's listings are not counted

    def counted(text: str) -> None:
        if now_counting and writer and threading.get_ident() == writer[0]:
            said[now_counting[0]] += 1

    async def call(name: str, fn, *args, durable: bool = True, **kwargs):
        def timed(c: Core):
            writer[:] = [threading.get_ident()]
            started, clock = time.thread_time(), time.perf_counter()
            try:
                return fn(c, *args, **kwargs)
            finally:
                cpu[name].append((time.thread_time() - started) * 1000)
                wall[name].append((time.perf_counter() - clock) * 1000)
        now_counting[:] = [name]
        try:
            return await core.run(timed, durable=durable)
        finally:
            now_counting.clear()

    async def one() -> None:
        await answers.opened(core, owner, FlightSpec(command=["true"]))
        granted = await call("claim", leases.try_claim, runner.id, 1)
        assert granted is not None, "the runner's claim finds the flight just opened"
        flight, grant = granted
        await call("started", leases.report, runner, flight.id, epoch=grant.epoch,
                   facts=[{"kind": "started", "body": {"pid": 1},
                           "key": f"{grant.epoch}:started:1"}], durable=False)
        await call("renewal", leases.renew, runner, flight.id, grant.epoch)
        await call("hand-back", leases.hand_back, runner, flight.id, epoch=grant.epoch,
                   outcome="landed", exit_code=0, reason=None, key=f"{grant.epoch}:hand-back")

    async def all_of_them() -> None:
        for _ in range(WARM_UP):
            await one()
        if past:
            filled.update(await core.run(lambda c: history.fill(c.store.db, past)))
            history.analyse(core.store.db)
        for name in CALLS:
            cpu[name].clear()
            wall[name].clear()
            said[name] = 0
        core.store.db.trace(counted)
        try:
            with _Noise(core, on=noise) as made:
                for _ in range(count):
                    await one()
            heard.update(made.report)
        finally:
            core.store.db.trace(None)

    asyncio.run(all_of_them())
    return {"flights": count, "noise": heard, "history": filled,
            "calls": {name: {"statements": round(said[name] / count, 2),
                             "cpu_ms": round(statistics.median(cpu[name]), 3),
                             "wall_ms": round(statistics.median(wall[name]), 3)}
                      for name in CALLS}}


class _Noise:
    """``with _Noise(core, on=...)``: the noise of the module's docstring while the block
    runs (nothing when ``on`` is false); :attr:`report` the listings made and their errors."""

    def __init__(self, core: Core, *, on: bool):
        self.core, self.on = core, on
        self.report: dict = {"flights_listed": 0, "runners_listed": 0, "errors": 0}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spinner: subprocess.Popen | None = None

    def __enter__(self) -> "_Noise":
        if self.on:
            self._spinner = subprocess.Popen([sys.executable, "-c", SPIN])
            for what, every, fn in (
                    ("flights_listed", FLIGHTS_EVERY, lambda: flights.list_flights(self.core)),
                    ("runners_listed", RUNNERS_EVERY,
                     lambda: answers.runners_listed(self.core, limit=500))):
                thread = threading.Thread(target=self._every, args=(what, every, fn), daemon=True)
                thread.start()
                self._threads.append(thread)
        return self

    def _every(self, what: str, every: float, fn) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                fn()
                self.report[what] += 1
            except Exception:  # noqa: BLE001 (counted: the figures say how many failed)
                self.report["errors"] += 1
            self._stop.wait(max(0.0, every - (time.monotonic() - started)))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        if self._spinner is not None:
            self._spinner.kill()
            self._spinner.wait()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50 flights")
    ap.add_argument("--flights", type=int, default=300)
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="landed flights in the store before measuring (copies of the "
                         "warm-up's, with their grants, facts and events)")
    store_options(ap, replicas=False)
    noise_option(ap)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    check_store_options(args)
    if args.flights < 1:
        raise SystemExit("--flights takes a number of at least 1")
    if args.history < 0:
        raise SystemExit("--history takes a number of landed flights, 0 or more")
    result = measure(50 if args.quick else args.flights, args.database, args.noise,
                     args.history)
    result["store"] = "PostgreSQL" if args.database else "SQLite"
    heard = result["noise"]
    lines = [f"A runner's lease calls ({result['store']}, in process, no server): "
             f"{result['flights']} flights, each call a transaction of its own; the statements "
             "a call (the transaction's edges included), and the median CPU of the writer's "
             "thread and the median time a call's unit took on it. " + (
                 f"Noise ran (one core spinning; the flights' first page listed "
                 f"{heard['flights_listed']} times and the runners {heard['runners_listed']} "
                 f"times in this process; {heard['errors']} listing errors)." if args.noise
                 else NO_NOISE_SENTENCE)
             + (f" The store held {result['history']['landed']:,} landed flights before the "
                "measured ones "
                f"(copies of the warm-up's, with their grants, facts and events: "
                + ", ".join(f"{n:,} {t}" for t, n in result["history"]["added"].items())
                + " rows added)." if args.history else ""),
             "", "| call | statements | CPU ms | unit ms |", "|---|---|---|---|"]
    lines += [f"| {name} | {c['statements']:g} | {c['cpu_ms']} | {c['wall_ms']} |"
              for name, c in result["calls"].items()]
    section = ("lease-calls" + ("-postgresql" if args.database else "")
               + ("-history" if args.history else "")
               + ("-noise" if args.noise else ""))
    publish(section, "\n".join(lines), result, args)
    return result


if __name__ == "__main__":
    main()
