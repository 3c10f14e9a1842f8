"""A chaos run: real runners and a stream of flights while processes are killed and stalled.

The schedule is drawn from one seeded ``random.Random``: which flights are opened when,
what each one runs, and every act of violence — SIGKILL a runner (it comes back later with
the same state directory), SIGSTOP one for a while (longer or shorter than a lease) and
SIGCONT it, SIGKILL the control plane and start it again on the same data directory and
port. Timing is real, so two runs of one seed differ in the interleaving but not in what was
done; a failure prints its seed (``GG_CHAOS_SEED``) so it can be run again.

Afterwards everything is woken up, the fleet drains the queue, and the store is handed to
:func:`gg.proof.invariants.check` with the restart times recorded here.
"""

from __future__ import annotations

import heapq
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from gg.api import paths
from gg.client import Client
from gg.launch import LocalRunner
from gg.proof.invariants import Report, Restart, check

from support import FAST, Fleet, WireJson, flight_workspace, wait_until

LEASE_TTL = float(FAST["GG_LEASE_TTL"])


@dataclass
class Plan:
    seed: int
    runners: int = 4
    workers: int = 2
    flights: int = 36
    duration: float = 15.0  # seconds of violence; flights are opened over the first 80%
    server_kills: int = 2
    settle: float = 90.0  # how long the fleet may take to finish everything afterwards


@dataclass
class Outcome:
    plan: Plan
    report: Report
    restarts: list[Restart]
    acts: dict[str, int]
    flights: list[dict]
    expected: dict[str, str]
    facts: dict[str, list[dict]] = field(default_factory=dict)
    expired_events: int = 0
    retried_events: int = 0

    def describe(self) -> str:
        stages: dict[str, int] = {}
        for f in self.flights:
            stages[f["stage"]] = stages.get(f["stage"], 0) + 1
        return (f"seed {self.plan.seed} (GG_CHAOS_SEED={self.plan.seed} to repeat): acts {self.acts}, "
                f"{len(self.restarts)} restart(s), {self.expired_events} lease expiries, "
                f"{self.retried_events} retries, "
                f"stages {stages}\n{self.report.summary()}")


def _command(rng: random.Random, index: int,
             work: Path) -> tuple[list[str], str, bool, dict | None]:
    """A flight's command, the output it must land with, whether it fails on purpose, and its
    retries: a quarter are flaky, opened with ``--retries 2``, and fail their first run (a
    counter in ``work``), so they land on a retry; a flight that fails on purpose with
    retries fails every attempt and runs out of them."""
    pause = rng.choice((0.0, 0.2, 0.5, 1.0, 1.5, 2.5))
    fails = rng.random() < 0.1
    flaky = rng.random() < 0.25
    script = f"echo begin {index}; sleep {pause}; echo end {index}" + ("; exit 3" if fails else "")
    if flaky:
        runs = work / f"runs-{index}"
        script = (f"n=$(cat {runs} 2>/dev/null || echo 0); echo $((n+1)) > {runs}; {script}"
                  + ("" if fails else '; [ "$n" -ge 1 ] || exit 4'))
    return [script], f"begin {index}\nend {index}\n", fails, {"retries": 2} if flaky else None


class Chaos:
    def __init__(self, root: Path, plan: Plan, env: dict[str, str] | None = None):
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.fleet = Fleet(root, {**FAST, "GG_MAX_EXPIRIES": "50", **(env or {})})
        self.restarts: list[Restart] = []
        self.acts = {"runner_killed": 0, "runner_stopped": 0, "server_killed": 0}
        self.expected: dict[str, str] = {}
        self.stopped: set[str] = set()
        self.dead: set[str] = set()
        self._agenda: list[tuple[float, int, str, str]] = []
        self._n = 0
        self._start = time.monotonic()
        self.work = flight_workspace(root / "work")  # flaky flights count their runs here

    # -- the run -------------------------------------------------------------------------

    def run(self) -> Outcome:
        fleet = self.fleet.start()
        try:
            for i in range(self.plan.runners):
                fleet.runner(f"c{i}", workers=self.plan.workers)
            fleet.wait_online(*self.names, timeout=60)
            self._violence()
            self._wake_everyone()
            rows = self._settle()
            return self._judge(rows)
        finally:
            fleet.stop()

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.fleet.runners]

    def _api(self) -> WireJson:
        return WireJson(Client(self.fleet.url, self.fleet.server.owner_token(), timeout=30))

    def _violence(self) -> None:
        plan, rng = self.plan, self.rng
        start = self._start = time.monotonic()
        opening = plan.duration * 0.8
        flight_times = sorted(rng.uniform(0, opening) for _ in range(plan.flights))
        for i, at in enumerate(flight_times):
            self._schedule(at, "open", str(i))
        t = rng.uniform(0.5, 1.5)
        kills = sorted(rng.uniform(plan.duration * 0.15, plan.duration * 0.85)
                       for _ in range(plan.server_kills))
        for at in kills:
            self._schedule(at, "server", "")
        while t < plan.duration:
            self._schedule(t, rng.choice(("kill", "stop", "stop")), "")
            t += rng.uniform(0.6, 1.8)
        api = self._api()
        try:
            while self._agenda:
                due, _, what, arg = heapq.heappop(self._agenda)
                delay = start + due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the schedule itself, not a wait for a condition
                api = self._act(api, what, arg) or api
        finally:
            api.close()

    def _schedule(self, at: float, what: str, arg: str) -> None:
        self._n += 1
        heapq.heappush(self._agenda, (at, self._n, what, arg))

    def _act(self, api: Client, what: str, arg: str) -> Client | None:
        rng = self.rng
        if what == "open":
            command, output, _, retry = _command(rng, int(arg), self.work)
            flight = api.request("POST", paths.FLIGHTS, json={"command": command, "retry": retry},
                                 retry_for=60.0)
            self.expected[flight["id"]] = output
        elif what in ("kill", "stop"):
            victim = self._victim(api)
            if victim is None:
                return None
            if what == "kill":
                os.kill(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait()
                self.dead.add(victim.name)
                self.acts["runner_killed"] += 1
                self._schedule(self._now() + rng.uniform(1.0, 3 * LEASE_TTL), "revive", victim.name)
            else:
                victim.proc.send_signal(signal.SIGSTOP)
                self.stopped.add(victim.name)
                self.acts["runner_stopped"] += 1
                pause = rng.choice((0.3 * LEASE_TTL, 0.8 * LEASE_TTL, 1.5 * LEASE_TTL, 2.5 * LEASE_TTL))
                self._schedule(self._now() + pause, "cont", victim.name)
        elif what == "cont":
            runner = self._runner(arg)
            runner.proc.send_signal(signal.SIGCONT)
            self.stopped.discard(arg)
        elif what == "revive":
            self._runner(arg).start()
            self.dead.discard(arg)
        elif what == "server":
            down = time.time()
            self.fleet.server.stop(sig=signal.SIGKILL)
            self.acts["server_killed"] += 1
            up = time.time()
            self.fleet.server.start(timeout=60)
            self.restarts.append(Restart(down_at=down, up_at=up))
            api.close()
            return self._api()
        return None

    def _now(self) -> float:
        """Seconds since the violence began (the agenda's clock)."""
        return time.monotonic() - self._start

    def _victim(self, api: Client) -> LocalRunner | None:
        """Prefer a live runner holding a flight, so the violence lands on a lease."""
        alive = [r for r in self.fleet.runners
                 if r.name not in self.dead and r.name not in self.stopped and r.alive()]
        if not alive:
            return None
        try:
            flying = _rows(api, stage="flying")
        except Exception:  # noqa: BLE001 - the target is a preference, not a requirement
            flying = []
        holders = {f.get("runner_name") for f in flying}
        busy = [r for r in alive if r.name in holders]
        return self.rng.choice(busy or alive)

    def _runner(self, name: str) -> LocalRunner:
        return next(r for r in self.fleet.runners if r.name == name)

    # -- afterwards ---------------------------------------------------------------------

    def _wake_everyone(self) -> None:
        for name in list(self.stopped):
            self._runner(name).proc.send_signal(signal.SIGCONT)
        self.stopped.clear()
        for name in list(self.dead):
            self._runner(name).start()
        self.dead.clear()

    def _settle(self) -> list[dict]:
        api = self._api()

        def all_final():
            rows = _rows(api)
            return rows if rows and all(r["stage"] in ("landed", "failed") for r in rows) else None

        try:
            return wait_until(all_final, timeout=self.plan.settle, interval=0.25,
                              what=f"every flight to end (seed {self.plan.seed})")
        finally:
            api.close()

    def _judge(self, rows: list[dict]) -> Outcome:
        db = self.fleet.env.get("GG_DATABASE_URL") or self.fleet.server.data_dir / "gg.sqlite3"
        report = check(db, lease_ttl=LEASE_TTL, restarts=self.restarts, stuck_grace=LEASE_TTL)
        api = self._api()
        try:
            facts = {fid: api.request("GET", paths.FLIGHT.format(flight_id=fid),
                                      retry_for=30.0)["facts"] for fid in self.expected}
            expired, retried = (len(api.request("GET", paths.EVENTS,
                                                params={"kind": kind, "limit": 10000},
                                                retry_for=30.0))
                                for kind in ("info:flight:expired", "info:flight:retried"))
        finally:
            api.close()
        return Outcome(self.plan, report, self.restarts, dict(self.acts), rows, self.expected,
                       facts, expired, retried)


def landing_output(facts: list[dict], epoch: int) -> str:
    return "".join(f["body"].get("text", "") for f in facts
                   if f["kind"] == "output" and f["epoch"] == epoch)


def _rows(api: Client, **params) -> list[dict]:
    """Every row of the flight listing, following its cursors."""
    rows: list[dict] = []
    cursor = None
    while True:
        page = api.request("GET", paths.FLIGHTS, retry_for=30.0,
                           params={**params, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        rows += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return rows
