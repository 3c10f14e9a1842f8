#!/usr/bin/env python3
"""Start estimates: are they right, and what do they cost a listing?

    python bench/estimates.py day [--quick] [--json] [--seed N]  # accuracy over a synthetic day
    python bench/estimates.py listing [--flights 10000] [--runners 1000] [--repeat 5]

``day`` drives a real ``gg server`` and real ``gg runner up`` processes through a shortened
synthetic day: several kinds of flight with different duration distributions (seconds
standing in for minutes), bursts, a runner drained midway, and a pool whose maintainer (a
real ``gg runner maintain``) starts ``process`` members that boot for a few seconds before
their first check-in (bench/booting_members.py), so flights of its environment wait on it
warming a member (each member flies one flight and is reset). A watcher reads
``gg flights --json`` the way a person watching the queue would, and remembers, for every
flight, the FIRST estimate it saw (the hardest one: made longest before the start); the start
is the grant event. It reports the median absolute error against the median actual wait, the
share of starts inside [low, high], the same for the flights it read waiting on the pool and
for the last estimate before each start, and what ``gg estimate accuracy`` (the server's own
record of last estimates) says. The JSON also splits the first estimates: read before a flight
of every kind had landed (``before_history``: a kind not measured yet borrows its
environment's durations), read before the drain and started after it (``across_drain``), and
the rest (``steady``). The day's draws come from ``--seed`` (7 unless told): with one seed, the
few durations of the morning decide every later estimate for a while (seed 7's are shorter
than the rest of its day: its first estimates start late), so compare seeds before reading a
bias into one run.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402
from common import Bench, percentile, write_section  # noqa: E402

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
RUNNERS_ENV = "ci"  # what runners a and b advertise
POOL, POOL_ENV = "ui-pool", "ui"  # the pool's members advertise environment=ui
POOL_SIZE, POOL_WARM = 2, 1  # at most two members, one kept warm
BOOT = (3.0, 5.0)  # seconds a member takes to boot (standing for a machine's minutes)
# kind -> (environment, how long one flies: seconds standing in for minutes)
KINDS = {
    "lint": (RUNNERS_ENV, lambda rng: rng.uniform(1.5, 3.0)),
    "unit": (RUNNERS_ENV, lambda rng: rng.lognormvariate(1.8, 0.3)),  # ~6 s, a long tail
    "build": (RUNNERS_ENV, lambda rng: rng.uniform(12.0, 16.0)),
    "e2e": (POOL_ENV, lambda rng: rng.uniform(3.0, 6.0)),  # on the pool's members
}


def schedule(rng: random.Random, quick: bool) -> list[tuple[float, str, float]]:
    """(seconds after the start, kind, duration) of every flight of the day."""
    out = []
    for kind in KINDS:  # the morning: every kind runs a few times (the history)
        for i in range(3):
            out.append((0.2 * i, kind, KINDS[kind][1](rng)))
    bursts = [(40.0, 14), (120.0, 12)] if not quick else [(30.0, 8)]
    for at, n in bursts:
        for i in range(n):
            kind = rng.choice(list(KINDS))
            out.append((at + 0.05 * i, kind, KINDS[kind][1](rng)))
    end = 200.0 if not quick else 60.0
    t = 20.0
    while t < end:  # a trickle between the bursts
        kind = rng.choice(list(KINDS))
        out.append((t, kind, KINDS[kind][1](rng)))
        t += rng.uniform(5.0, 10.0)
    return sorted(out)


class WarmingPool:
    """Pool POOL in force with a built image, and its maintainer: gg's own ``gg runner
    maintain`` and ``process`` driver, run through bench/booting_members.py so each member
    boots for BOOT seconds before its first check-in."""

    def __init__(self, bench: Bench):
        self.bench = bench
        self.images = bench.root / "images"
        self.state = bench.root / "keeper"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "WarmingPool":
        from gg.client import Client
        from gg.pool.image import build_image

        api = Client(self.bench.url, self.bench.token)
        context = self.bench.root / "image"
        context.mkdir()
        (context / "README").write_text("what every member of the pool starts from\n")
        digest = build_image(context, self.images).digest
        applied = api.apply_strategy(POOL_ENV, {
            "environment": POOL_ENV, "inventory": {"name": POOL, "size": POOL_SIZE,
                                                   "warm": POOL_WARM},
            "image": {"ref": "ui-image"}, "bounds": {"pool-max": POOL_SIZE}})
        api.clear_gate(applied.gate.id)
        api.pin_strategy_digest(POOL_ENV, digest)
        # refused until an admin allows it, which needs it registered: run it once first
        if self._maintain().wait(timeout=120) != 4:
            raise RuntimeError(f"the maintainer was not refused as expected: {self._log()}")
        api.allow_maintainer(POOL, "keeper")
        self._maintain()
        return self

    def _maintain(self) -> subprocess.Popen:
        env = {**os.environ, **self.bench.env, "GG_STATE_DIR": str(self.state),
               "GG_CONFIG_DIR": str(self.bench.config), "GG_IMAGES_DIR": str(self.images)}
        argv = [sys.executable, str(HERE / "booting_members.py"), *(f"{b:g}" for b in BOOT),
                "--server", self.bench.url, "runner", "maintain", POOL, "--name", "keeper"]
        with open(self.bench.root / "keeper.log", "ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self.proc

    def _log(self) -> str:
        path = self.bench.root / "keeper.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def stop(self) -> None:
        """The maintainer, then its members (they outlive it by design)."""
        from gg.launch import stop_process
        from gg.pool.drivers.process import ProcessDriver

        stop_process(self.proc, timeout=15)
        driver = ProcessDriver(self.state / "members", self.images, stop_grace=5.0)
        for member_id in driver.members():  # only the processes this maintainer recorded
            driver.remove(member_id)


def chart(bench: Bench, *environments: str) -> None:
    """Chart each environment and clear its gate, so flights may use it."""
    from gg.client import Client

    api = Client(bench.url, bench.token)
    for name in environments:
        charted = api.chart_environment(name, "true")
        if charted.gate is not None and charted.gate_status == "open":
            api.clear_gate(charted.gate)


def day(args) -> int:
    rng = random.Random(args.seed)
    plan = schedule(rng, args.quick)
    bench = Bench(Path(tempfile.mkdtemp(prefix="gg-bench-estimates-")), env=ENV).start()
    http = httpx.Client(base_url=bench.url, timeout=60,
                        headers={"authorization": f"Bearer {bench.token}"})
    pool = WarmingPool(bench)
    first: dict[str, tuple] = {}
    last: dict[str, tuple] = {}
    unestimated: set[str] = set()
    on_pool: set[str] = set()  # flights read waiting on the pool (warming, or at its bounds)
    kind_of: dict[str, str] = {}
    reads = 0
    try:
        chart(bench, RUNNERS_ENV, POOL_ENV)
        bench.runner("a", labels=f"environment={RUNNERS_ENV}")
        bench.runner("b", labels=f"environment={RUNNERS_ENV}")
        pool.start()
        bench.wait_online(4)  # a, b, the maintainer and the pool's warm member
        start = time.time()
        drain_at = 110.0 if not args.quick else 40.0  # b is drained midway
        drained = False
        pending = list(plan)
        while True:
            now = time.time() - start
            while pending and pending[0][0] <= now:
                _, kind, seconds = pending.pop(0)
                answer = http.post("/v1/flights", json={
                    "command": ["sleep", f"{seconds:.2f}"], "title": kind,
                    "environment": KINDS[kind][0]})
                answer.raise_for_status()
                kind_of[answer.json()["id"]] = kind
            if not drained and now >= drain_at:
                http.post("/v1/runners/b/drain").raise_for_status()
                drained = True
            rows = http.get("/v1/flights", params={"stage": "ready", "limit": 1000}).json()["items"]
            read_at = time.time()
            reads += 1
            for row in rows:
                if (row["waiting"] or "").startswith(f"waiting: pool {POOL}"):
                    on_pool.add(row["id"])
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
        joins = http.get("/v1/events", params={"kind": "info:runner:registered",
                                                "limit": 10000}).json()
        measured: dict[str, float] = {}  # kind -> when a flight of it first landed
        for event in http.get("/v1/events", params={"kind": "info:flight:landed",
                                                    "limit": 10000}).json():
            if event["flight_id"] in kind_of:
                measured.setdefault(kind_of[event["flight_id"]], event["at"])
    finally:
        pool.stop()
        bench.stop()
    result = {"flights": len(kind_of), "reads": reads,
              "first": judge(first, starts), "last": judge(last, starts),
              "pool": judge({f: seen for f, seen in first.items() if f in on_pool}, starts),
              # where the first estimates miss (in the JSON only): the drain is not foreseen
              "across_drain": judge({f: seen for f, seen in first.items()
                                     if seen[0] < start + drain_at < starts.get(f, 0)}, starts),
              # read before a flight of every kind had landed: the kinds not measured yet
              # borrow their environment's durations (a 2 s lint's for a 14 s build)
              "before_history": judge({f: seen for f, seen in first.items()
                                       if seen[0] < max(measured.values(), default=0)},
                                      starts),
              # neither: what the estimator could have known
              "steady": judge({f: seen for f, seen in first.items()
                               if seen[0] >= max(measured.values(), default=0)
                               and not seen[0] < start + drain_at < starts.get(f, 0)}, starts),
              "by_kind": {k: judge({f: seen for f, seen in first.items() if kind_of[f] == k},
                                   starts) for k in KINDS},
              "pool_flights": sum(1 for k in kind_of.values() if KINDS[k][0] == POOL_ENV),
              "waited_on_pool": len(on_pool),
              "member_cycles": sum(1 for e in joins if e["body"].get("pool") == POOL),
              "never_estimated": len(unestimated - set(first)), "server": accuracy,
              "load": round(os.getloadavg()[0], 1)}
    print(json.dumps(result, indent=1))
    if not args.json:
        print(day_table(result))
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
                        ("pool", f"the same, flights read waiting on pool {POOL}"),
                        ("last", "last one shown before the start")):
        j = r[name]
        if j.get("starts"):
            lines.append(f"| {label} | {j['starts']} | {j['median_error']} s | "
                         f"{j['p90_error']} s | {j['median_wait']} s | "
                         f"{j['error_share_of_wait']:.0%} | {j['inside_share']:.0%} |")
    s = r["server"]
    lines += ["", f"{r['flights']} flights ({r['pool_flights']} on pool {POOL}, of which "
              f"{r['waited_on_pool']} were read waiting on it; {r['member_cycles']} member "
              f"cycles, each booting {BOOT[0]:g}–{BOOT[1]:g} s), {r['reads']} reads of the queue; "
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
    day_.add_argument("--seed", type=int, default=7,
                      help="the day's draws (7: the figures in docs/performance.md)")
    day_.add_argument("--write", action="store_true", help="rewrite docs/performance.md")
    args = parser.parse_args(argv)
    return listing(args) if args.what == "listing" else day(args)


if __name__ == "__main__":
    sys.exit(main())
