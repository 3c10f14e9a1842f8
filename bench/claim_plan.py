#!/usr/bin/env python3
"""What one claim's plan costs the server: the matcher's read of the ready queue for one seat.

    python bench/claim_plan.py [--quick] [--ready N] [--plans P] [--json] [--no-write]

In this process, no server: a SQLite store in a temporary directory, one registered runner,
N ready flights (1,000) of one opener, then the plan of one claim for that runner
(``gg.control.leases._plan`` with its one seat: the queue's first turn read and decoded, the
concurrency keys, retries and sizes of the flights read, the matcher) P times (300). CPU time
of this process a plan, the median of three rounds.
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

from common import publish  # noqa: E402

from gg.control import flights, leases, runners  # noqa: E402
from gg.control.core import Core  # noqa: E402
from gg.control.people import bootstrap  # noqa: E402
from gg.control.wiring import wired  # noqa: E402
from gg.domain.flight_spec import FlightSpec  # noqa: E402
from gg.settings import Settings  # noqa: E402
from gg.store import open_store  # noqa: E402

from support import check_in, proof  # noqa: E402

ROUNDS = 3


def measure(ready: int, plans: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-plan-") as tmp:
        core = Core(store=open_store(Path(tmp)), settings=Settings(dev=True), wiring=wired())
        bootstrap(core, Path(tmp))
        owner = core.store.person_by_name("owner")
        runner, _ = runners.register(core, owner, name="r0", **proof(core, "register"),
                                     labels={}, workers=1, inventory={}, version=None)
        check_in(core, runner)
        for _ in range(ready):
            flights.open_flight(core, owner, FlightSpec(command=["true"]))
        seat = leases.seat_for(core, core.store.runner(runner.id), core.now())
        rounds = []
        for _ in range(ROUNDS):
            started = time.process_time()
            for _ in range(plans):
                leases._plan(core, [seat])
            rounds.append((time.process_time() - started) * 1000 / plans)
        core.store.close()
    return {"ready": ready, "plans": plans, "ms_a_plan": round(statistics.median(rounds), 3),
            "rounds": [round(r, 3) for r in rounds]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 plans a round")
    ap.add_argument("--ready", type=int, default=1000)
    ap.add_argument("--plans", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    result = measure(args.ready, 100 if args.quick else args.plans)
    text = (f"One claim's plan (SQLite, in process, no server): {result['ready']} ready flights "
            f"of one opener, one seat, {result['plans']} plans a round, the median of "
            f"{ROUNDS} rounds: **{result['ms_a_plan']} ms** of CPU a plan (rounds "
            f"{', '.join(f'{r:g}' for r in result['rounds'])}).")
    publish("claim-plan", text, result, args)
    return result


if __name__ == "__main__":
    main()
