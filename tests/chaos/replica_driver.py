"""Chaos across replicas: three ``gg server`` replicas on one PostgreSQL database, runners
spread over them, a stream of flights, and violence: one replica SIGKILLed (and started
again) twice, one runner SIGKILLed while it holds a flight (and started again later). That flight waits
for a gate file the driver writes only after the signal, so it is still held when the signal
lands however slow the machine is.

Each act waits for a condition of the run (so many flights landed), never for a time, so the
violence lands in the middle of the work however loaded the machine is. Afterwards the
database is handed to :func:`gg.proof.invariants.check_postgresql`. A replica killed while
the others serve is not a restart of the control plane: no lease is honoured anew by it
(docs/scale-out.md), so no restart is handed to the checker.
"""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gg.api import paths
from gg.client import Client
from gg.proof.invariants import Report, check_postgresql

from replica_support import ReplicaSet
from support import FAST, wait_until

LEASE_TTL = float(FAST["GG_LEASE_TTL"])


@dataclass
class ReplicaPlan:
    replicas: int = 3
    runners: int = 6
    workers: int = 2
    flights: int = 300
    replica_kills: int = 2  # of the same replica, each followed by its restart
    settle: float = 240.0  # how long the fleet may take to finish everything

    @property
    def held(self) -> int:
        """The flight whose runner is SIGKILLed: it waits for the driver's gate file, so it
        cannot land between being seen flying and its runner's death."""
        return self.flights // 3


@dataclass
class ReplicaOutcome:
    plan: ReplicaPlan
    report: Report
    flights: list[dict]
    expected: dict[str, str]
    acts: list[str]
    grants: tuple[int, int]  # grants, distinct (flight, epoch)
    duplicates: list[tuple]  # (kind, flight, runner, body) recorded more than once
    expired_events: int = 0
    facts: dict[str, list[dict]] = field(default_factory=dict)  # output facts, per flight
    opened_by_replica: dict[int, int] = field(default_factory=dict)

    def describe(self) -> str:
        stages: dict[str, int] = {}
        for f in self.flights:
            stages[f["stage"]] = stages.get(f["stage"], 0) + 1
        return (f"acts {self.acts}, {self.expired_events} lease expiries, grants "
                f"{self.grants}, stages {stages}, opened per first replica "
                f"{self.opened_by_replica}\n{self.report.summary()}")


class ReplicaChaos:
    def __init__(self, root: Path, database_url: str, plan: ReplicaPlan):
        self.plan = plan
        self.set = ReplicaSet(root, database_url, plan.replicas,
                              {**FAST, "GG_MAX_EXPIRIES": "50", "GG_DUTY_TTL": "2"})
        self.expected: dict[str, str] = {}
        self.acts: list[str] = []
        self.opened_by_replica: dict[int, int] = {}
        self._opening_failed: list[BaseException] = []
        self.held_id: str | None = None
        self.gate = root / "held-flight-may-end"

    def run(self) -> ReplicaOutcome:
        replicas = self.set.start()
        try:
            for i in range(self.plan.runners):  # each runner uses a different replica first
                replicas.runner(f"c{i}", first=i % self.plan.replicas, workers=self.plan.workers)
            self._wait_online()
            opener = threading.Thread(target=self._open_all, daemon=True)
            opener.start()
            self._violence()
            opener.join(timeout=self.plan.settle)
            assert not self._opening_failed, self._opening_failed
            rows = self._settle()
            return self._judge(rows)
        finally:
            replicas.stop()

    def _client(self, first: int) -> Client:
        return Client(self.set.url_list(first), self.set.owner_token(), timeout=30)

    def _wait_online(self) -> None:
        api = self._client(0)
        names = {f"c{i}" for i in range(self.plan.runners)}
        wait_until(lambda: names <= {r.name for r in api.runners() if r.online}, 90,
                   what="every runner online")

    def _open_all(self) -> None:
        clients = [self._client(i) for i in range(self.plan.replicas)]
        try:
            for i in range(self.plan.flights):
                first = i % self.plan.replicas
                wait = (f"while [ ! -e {self.gate} ]; do sleep 0.05; done" if i == self.plan.held
                        else "sleep 0.2")
                flight = clients[first].request(
                    "POST", paths.FLIGHTS, retry_for=60.0,
                    json={"command": ["sh", "-c", f"echo begin {i}; {wait}; echo end {i}"]})
                self.expected[flight["id"]] = f"begin {i}\nend {i}\n"
                if i == self.plan.held:
                    self.held_id = flight["id"]
                self.opened_by_replica[first] = self.opened_by_replica.get(first, 0) + 1
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self._opening_failed.append(exc)

    def _landed(self, api: Client) -> int:
        return sum(1 for f in _rows(api) if f["stage"] == "landed")

    def _violence(self) -> None:
        plan = self.plan
        victim_replica = plan.replicas - 1
        api = self._client(0)
        steps = [(plan.flights * (k + 1) // (plan.replica_kills + 2), "replica")
                 for k in range(plan.replica_kills)]
        steps.append((plan.flights // 3, "runner"))
        steps.append((plan.flights * 2 // 3, "revive"))
        killed = None
        for landed, act in sorted(steps):
            wait_until(lambda: self._landed(api) >= landed, plan.settle,
                       interval=0.1, what=f"{landed} flights landed before the next act")
            if act == "replica":
                self.set.kill(victim_replica)
                self.acts.append(f"replica {victim_replica} killed at {landed} landed")
                self.set.restart(victim_replica)
            elif act == "runner":
                killed = self._runner_holding_the_held_flight(api)
                killed.proc.send_signal(signal.SIGKILL)
                killed.proc.wait()
                self.gate.touch()  # the flight's next attempt, on another runner, may end
                self.acts.append(f"runner {killed.name} killed at {landed} landed")
            elif act == "revive" and killed is not None:
                killed.start()
                self.acts.append(f"runner {killed.name} started again")

    def _runner_holding_the_held_flight(self, api: Client):
        """The runner flying the long flight now, so its lease is lost with it."""
        def holder():
            if self.held_id is None:
                return None
            row = api.request("GET", paths.FLIGHT.format(flight_id=self.held_id), retry_for=30.0)
            assert row["stage"] in ("ready", "flying"), f"the held flight is {row['stage']}"
            if row["stage"] != "flying":
                return None
            return next((r for r in self.set.runners
                         if r.name == row.get("runner_name") and r.alive()), None)
        return wait_until(holder, 120, interval=0.02, what="a runner holding the held flight")

    def _settle(self) -> list[dict]:
        api = self._client(0)

        def all_final():
            rows = _rows(api)
            return rows if (len(rows) >= self.plan.flights
                            and all(r["stage"] in ("landed", "failed") for r in rows)) else None

        return wait_until(all_final, self.plan.settle, interval=0.25,
                          what="every flight to end")

    def _judge(self, rows: list[dict]) -> ReplicaOutcome:
        import psycopg

        url = self.set.database_url
        report = check_postgresql(url, lease_ttl=LEASE_TTL, stuck_grace=LEASE_TTL)
        with psycopg.connect(url) as conn:
            grants = conn.execute(
                "SELECT count(*), count(DISTINCT (flight_id, epoch)) FROM grants").fetchone()
            duplicates = conn.execute(
                "SELECT kind, flight_id, runner_id, body, count(*) FROM events "
                "WHERE kind NOT LIKE 'info:runner:%' GROUP BY kind, flight_id, runner_id, body "
                "HAVING count(*) > 1").fetchall()
            expired = conn.execute(
                "SELECT count(*) FROM events WHERE kind = 'info:flight:expired'").fetchone()[0]
            facts: dict[str, list[dict]] = {}
            for flight_id, epoch, body in conn.execute(
                    "SELECT flight_id, epoch, body FROM facts WHERE kind = 'output' ORDER BY seq"):
                facts.setdefault(flight_id, []).append(
                    {"kind": "output", "epoch": epoch, "body": json.loads(body)})
        return ReplicaOutcome(self.plan, report, rows, dict(self.expected), list(self.acts),
                              tuple(grants), duplicates, expired, facts,
                              dict(self.opened_by_replica))


def _rows(api: Client, **params) -> list[dict]:
    rows: list[dict] = []
    cursor = None
    while True:
        page = api.request("GET", paths.FLIGHTS, retry_for=30.0,
                           params={**params, "limit": 1000, **({"cursor": cursor} if cursor else {})})
        rows += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return rows

