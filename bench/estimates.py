#!/usr/bin/env python3
"""Start estimates: are they right, and what do they cost a listing?

    python bench/estimates.py day [--quick] [--json]       # accuracy over a synthetic day
    python bench/estimates.py listing [--flights 10000] [--runners 1000] [--repeat 5]

``day`` drives a real ``gg server`` and real ``gg runner up`` processes through a shortened
synthetic day: several kinds of flight with different duration distributions (seconds
standing in for minutes), bursts, a runner that joins late (standing in for a machine a
pool warms: see below) and a runner drained midway. A watcher reads ``gg flights --json``
the way a person watching the queue would, and remembers, for every flight, the FIRST
estimate it saw (the hardest one: made longest before the start); the start is the grant
event. It reports the median absolute error against the median actual wait, the share of
starts inside [low, high], the same for the last estimate before each start, and what
``gg estimate accuracy`` (the server's own record of last estimates) says.

``listing`` fills a store the way ``bench/placement.py`` does with ``busy`` (10,000 ready
flights, 1,000 healthy runners each flying one flight, and a duration history), and times
``list_flights`` (the first page of 200 and all 10,000 rows, estimates included) and the
forecast alone. The forecast is never reused between the timed calls (GG_ESTIMATE_REUSE 0):
each one plays the queue.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Bench, percentile, write_section  # noqa: E402

import httpx  # noqa: E402


# --------------------------------------------------------------------------- listing cost


def fill(root: Path, args):
    import placement

    from gg.control.core import Core
    from gg.launch import LocalServer, free_port
    from gg.settings import Settings
    from gg.store import open_store

    started = time.perf_counter()
    # placement.fill bootstraps its own owner: a server must have made the store first
    server = LocalServer(root / "data", free_port(), log=root / "server.log")
    server.start()
    server.stop()
    # every runner healthy and flying one flight, and a history for every kind in the queue
    placement.fill(root / "data", args.runners, args.flights, busy=True)
    placement.keep_online(root / "data")
    core = Core(store=open_store(root / "data"),
                settings=Settings(offline_after=1e9, lease_ttl=1e9, estimate_reuse=0))
    print(f"filled {args.runners} runners, {args.flights} ready flights and a history in "
          f"{time.perf_counter() - started:.0f}s", file=sys.stderr)
    return core


def listing(args) -> int:
    from gg.control import estimates, flights
    from gg.control.core import Core
    from gg.settings import Settings
    from gg.store import open_store

    if args.reuse:  # a store this command filled before (the fill takes minutes)
        root = Path(args.reuse)
        core = Core(store=open_store(root / "data"),
                    settings=Settings(offline_after=1e9, lease_ttl=1e9, estimate_reuse=0))
    else:
        root = Path(tempfile.mkdtemp(prefix="gg-bench-estimates-"))
        core = fill(root, args)
    print(f"store in {root}", file=sys.stderr)

    def timed(fn):
        wall, cpu = [], []
        for _ in range(args.repeat):
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        return statistics.median(cpu), min(cpu), statistics.median(wall)

    seats = estimates.fleet_seats(core, core.now())
    result = estimates.run_forecast(core, seats, core.now())
    known = sum(1 for e in result.estimates.values() if e.known)
    def first_page_without_estimates():
        # the same listing with the estimate step left out: what the estimate adds
        kept, flights.estimate_ops.add_to_rows = flights.estimate_ops.add_to_rows, (
            lambda *a, **k: None)
        try:
            return json.dumps(flights.list_flights(core, limit=200))
        finally:
            flights.estimate_ops.add_to_rows = kept

    figures = {
        "list_flights, first page (200 rows), without estimates (for comparison)":
            timed(first_page_without_estimates),
        "forecast of the whole queue (one run for every row)":
            timed(lambda: estimates.run_forecast(core, seats, core.now())),
        "list_flights, first page (200 rows), estimates included":
            timed(lambda: json.dumps(flights.list_flights(core, limit=200))),
        "list_flights, all 10,000 rows, estimates included":
            timed(lambda: json.dumps(flights.list_flights(core, limit=10_000))),
    }
    body = [f"{len(result.estimates)} ready flights estimated ({known} with a time), "
            f"{args.runners} runners; load average {os.getloadavg()[0]:.1f}", "",
            "| what | CPU median | CPU best | wall median (loaded) |", "|---|---|---|---|"]
    for label, (med, best, wall) in figures.items():
        body.append(f"| {label} | {med:.0f} ms | {best:.0f} ms | {wall:.0f} ms |")
    print("\n".join(body))
    if args.write:
        # the command without --reuse's folder: a reused store was filled by this same command
        write_section("estimates-listing", "\n".join(body),
                      command=f"python bench/estimates.py listing --flights {args.flights} "
                              f"--runners {args.runners} --write")
    core.store.close()
    return 0


# --------------------------------------------------------------------------- the day

ENV = {"GG_CHECK_IN_INTERVAL": "0.5", "GG_OFFLINE_AFTER": "6", "GG_CLAIM_WAIT": "5",
       "GG_LEASE_TTL": "6", "GG_LEASE_RENEW_AT": "2"}
# kind -> how long one flies (seconds standing in for minutes)
KINDS = {
    "lint": lambda rng: rng.uniform(1.5, 3.0),
    "unit": lambda rng: rng.lognormvariate(1.8, 0.3),  # ~6 s, a long tail
    "build": lambda rng: rng.uniform(12.0, 16.0),
}


def schedule(rng: random.Random, quick: bool) -> list[tuple[float, str, float]]:
    """(seconds after the start, kind, duration) of every flight of the day."""
    out = []
    for kind in KINDS:  # the morning: every kind runs a few times (the history)
        for i in range(3):
            out.append((0.2 * i, kind, KINDS[kind](rng)))
    bursts = [(40.0, 14), (120.0, 12)] if not quick else [(30.0, 8)]
    for at, n in bursts:
        for i in range(n):
            kind = rng.choice(list(KINDS))
            out.append((at + 0.05 * i, kind, KINDS[kind](rng)))
    end = 200.0 if not quick else 60.0
    t = 20.0
    while t < end:  # a trickle between the bursts
        kind = rng.choice(list(KINDS))
        out.append((t, kind, KINDS[kind](rng)))
        t += rng.uniform(5.0, 10.0)
    return sorted(out)


def day(args) -> int:
    rng = random.Random(7)
    plan = schedule(rng, args.quick)
    bench = Bench(Path(tempfile.mkdtemp(prefix="gg-bench-estimates-")), env=ENV).start()
    http = httpx.Client(base_url=bench.url, timeout=60,
                        headers={"authorization": f"Bearer {bench.token}"})
    first: dict[str, tuple] = {}
    last: dict[str, tuple] = {}
    unestimated: set[str] = set()
    reads = 0
    try:
        bench.runner("a")
        bench.runner("b")
        bench.wait_online(2)
        start = time.time()
        late_at = 70.0 if not args.quick else 25.0  # a machine that joins later (warmed)
        drain_at = 110.0 if not args.quick else 40.0  # b is drained midway
        late = drained = False
        opened: list[str] = []
        pending = list(plan)
        while True:
            now = time.time() - start
            while pending and pending[0][0] <= now:
                _, kind, seconds = pending.pop(0)
                answer = http.post("/v1/flights", json={
                    "command": ["sleep", f"{seconds:.2f}"], "title": kind})
                answer.raise_for_status()
                opened.append(answer.json()["id"])
            if not late and now >= late_at:
                bench.runner("c")
                late = True
            if not drained and now >= drain_at:
                http.post("/v1/runners/b/drain").raise_for_status()
                drained = True
            rows = http.get("/v1/flights", params={"stage": "ready", "limit": 1000}).json()["items"]
            read_at = time.time()
            reads += 1
            for row in rows:
                if row["expected_start_at"] is None:
                    unestimated.add(row["id"])
                    continue
                seen = (read_at, row["expected_start_at"], row["expected_start_low"],
                        row["expected_start_high"])
                first.setdefault(row["id"], seen)
                last[row["id"]] = seen
            if not pending and not rows:
                busy = http.get("/v1/flights",
                                params={"stage": "flying", "limit": 1000}).json()["items"]
                if not busy:
                    break
            time.sleep(1.0)
        starts = {}
        for event in http.get("/v1/events", params={"kind": "info:flight:claimed",
                                                    "limit": 10000}).json():
            starts.setdefault(event["flight_id"], event["at"])
        accuracy = http.get("/v1/estimates/accuracy").json()
    finally:
        bench.stop()
    result = {"flights": len(opened), "reads": reads,
              "first": judge(first, starts), "last": judge(last, starts),
              "never_estimated": len(unestimated - set(first)), "server": accuracy,
              "load": round(os.getloadavg()[0], 1)}
    print(json.dumps(result, indent=1))
    if args.write:
        write_section("estimates-day", day_table(result))
    return 0


def judge(seen: dict[str, tuple], starts: dict[str, float]) -> dict:
    errors, waits, signed, inside = [], [], [], 0
    for fid, (read_at, at, low, high) in seen.items():
        if fid not in starts:
            continue
        started = starts[fid]
        errors.append(abs(started - at))
        signed.append(started - at)
        waits.append(max(started - read_at, 0.0))
        inside += low - 0.001 <= started <= high + 0.001
    n = len(errors)
    if not n:
        return {"starts": 0}
    med_err, med_wait = statistics.median(errors), statistics.median(waits)
    return {"starts": n, "median_error": round(med_err, 2),
            "p90_error": round(percentile(errors, 90), 2), "median_wait": round(med_wait, 2),
            "late_by_median": round(statistics.median(signed), 2),
            "error_share_of_wait": round(med_err / med_wait, 3) if med_wait else None,
            "inside_share": round(inside / n, 3)}


def day_table(r: dict) -> str:
    lines = ["| estimate judged | starts | median error | p90 error | median actual wait | "
             "error / wait | inside [low, high] |", "|---|---|---|---|---|---|---|"]
    for name, label in (("first", "first one shown (made longest before the start)"),
                        ("last", "last one shown before the start")):
        j = r[name]
        if j.get("starts"):
            lines.append(f"| {label} | {j['starts']} | {j['median_error']} s | "
                         f"{j['p90_error']} s | {j['median_wait']} s | "
                         f"{j['error_share_of_wait']:.0%} | {j['inside_share']:.0%} |")
    s = r["server"]
    lines += ["", f"{r['flights']} flights, {r['reads']} reads of the queue; "
              f"{r['never_estimated']} flights never had an estimate when read. "
              f"`gg estimate accuracy` on the same server: {s['sentence']}. "
              f"Load average {r['load']} at the end."]
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    lst = sub.add_parser("listing")
    lst.add_argument("--flights", type=int, default=10_000)
    lst.add_argument("--runners", type=int, default=1_000)
    lst.add_argument("--repeat", type=int, default=5)
    lst.add_argument("--write", action="store_true", help="rewrite docs/performance.md")
    lst.add_argument("--reuse", metavar="DIR", help="a folder an earlier run filled")
    day_ = sub.add_parser("day")
    day_.add_argument("--quick", action="store_true")
    day_.add_argument("--json", action="store_true")
    day_.add_argument("--write", action="store_true", help="rewrite docs/performance.md")
    args = parser.parse_args(argv)
    return listing(args) if args.what == "listing" else day(args)


if __name__ == "__main__":
    sys.exit(main())
