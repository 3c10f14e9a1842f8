#!/usr/bin/env python3
"""What each of a runner's lease calls costs the server's writer, in statements and CPU.

The calls: a claim, `started`, a renewal and a hand-back.

    python bench/lease_calls.py [--quick] [--flights N] [--database URL] [--json] [--no-write]

In this process, no server and no HTTP: a store (SQLite in a temporary directory, or a fresh
PostgreSQL database made on ``--database``'s server and dropped afterwards), one registered
runner, then N flights (300) each opened, claimed (``leases.try_claim``: the runner's claim
finding it ready), reported `started`, renewed once and handed back, each call a unit of its
own in a transaction of its own, as the server's writer runs a call that comes alone. For
each call: the statements the store traced (every one, the transaction's edges too) and the
CPU of the writer's thread, the median over the flights.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import (check_store_options, drop_database, fresh_database, publish,  # noqa: E402
                    store_options)

from gg.control import answers, leases  # noqa: E402
from gg.control.core import Core  # noqa: E402
from gg.control.people import bootstrap  # noqa: E402
from gg.control.wiring import wired  # noqa: E402
from gg.domain.flight_spec import FlightSpec  # noqa: E402
from gg.settings import Settings  # noqa: E402
from gg.store import open_store  # noqa: E402

from support import make_runner  # noqa: E402

CALLS = ("claim", "started", "renewal", "hand-back")
WARM_UP = 20  # flights flown before measuring: the first one's one-off reads aside


def measure(flights: int, database: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-lease-calls-") as tmp:
        url, made = fresh_database(database) if database else (None, None)
        try:
            core = Core(store=open_store(Path(tmp), url),
                        settings=Settings(dev=True, lease_ttl=600, offline_after=3600),
                        wiring=wired())
            bootstrap(core, Path(tmp))
            try:
                return _fly(core, flights)
            finally:
                core.store.close()
        finally:
            if database and made:
                drop_database(database, made)


def _fly(core: Core, flights: int) -> dict:
    owner = core.store.person_by_name("owner")
    runner = make_runner(core, owner)
    cpu: dict[str, list[float]] = {c: [] for c in CALLS}
    said: dict[str, int] = dict.fromkeys(CALLS, 0)
    now_counting: list[str] = []

    def counted(text: str) -> None:
        if now_counting:
            said[now_counting[0]] += 1

    async def call(name: str, fn, *args, durable: bool = True, **kwargs):
        def timed(c: Core):
            started = time.thread_time()
            try:
                return fn(c, *args, **kwargs)
            finally:
                cpu[name].append((time.thread_time() - started) * 1000)
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
        for name in CALLS:
            cpu[name].clear()
            said[name] = 0
        core.store.db.trace(counted)
        try:
            for _ in range(flights):
                await one()
        finally:
            core.store.db.trace(None)

    asyncio.run(all_of_them())
    return {"flights": flights,
            "calls": {name: {"statements": round(said[name] / flights, 2),
                             "cpu_ms": round(statistics.median(cpu[name]), 3)}
                      for name in CALLS}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50 flights")
    ap.add_argument("--flights", type=int, default=300)
    store_options(ap, replicas=False)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    check_store_options(args)
    if args.flights < 1:
        raise SystemExit("--flights takes a number of at least 1")
    result = measure(50 if args.quick else args.flights, args.database)
    result["store"] = "PostgreSQL" if args.database else "SQLite"
    lines = [f"A runner's lease calls ({result['store']}, in process, no server): "
             f"{result['flights']} flights, each call a transaction of its own; the statements "
             "a call (the transaction's edges included) and the median CPU of the writer's "
             "thread a call.", "", "| call | statements | CPU ms |", "|---|---|---|"]
    lines += [f"| {name} | {c['statements']:g} | {c['cpu_ms']} |"
              for name, c in result["calls"].items()]
    section = "lease-calls" + ("-postgresql" if args.database else "")
    publish(section, "\n".join(lines), result, args)
    return result


if __name__ == "__main__":
    main()
