"""``GET /metrics``: the control plane in Prometheus text format.

Unauthenticated on purpose: a scraper usually holds no person token, so the endpoint shows
**only counts** — no flight, runner, person or label names, no ids, no commands. Anything
sharper belongs behind a token in ``/v1``.

Where each figure comes from:

- read from the store at scrape time (true across restarts and replicas): flights by
  stage, runners by admin state / liveness / health, live leases, the store's size (and the
  retention windows, from the settings);
- followed incrementally from the event feed (a cursor over ``info:flight:claimed`` and
  ``info:flight:expired``, bounded per scrape): lease expiries, queue wait (opened → first
  grant) and dispatch latency (the flight last became offerable → each grant);
- estimated when scraped (``gg.control.estimates``): the longest expected wait among the
  ready flights of each environment (the one place an environment's name appears here: an
  operator asks "which queue is slow", and the name is what answers it);
- counted in memory by this process (reset on restart, as Prometheus counters may be):
  requests and their duration per route template, runner check-ins, parked claims now, and
  the writer's group commits (how many, the units they carried, their seconds by phase).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Iterable

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from gg.api import paths
from gg.control import estimates, retention
from gg.control.core import Core
from gg.domain.events import EventKind
from gg.domain.flights import STAGES
from gg.domain.runners import ADMIN_STATES, HealthState, Liveness, Runner, is_online
from gg.server.collector_pauses import CollectorPauses
from gg.server.loop_lag import LoopLag

METRICS_PATH = "/metrics"
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                300.0, 900.0, 3600.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0)
_FOLLOW_PER_SCRAPE = 20_000


class _Buckets:
    """A cumulative histogram kept by hand (the events feed is read, not observed live)."""

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        self.total += value
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                return
        self.counts[-1] += 1

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        running, buckets = 0, []
        for bound, count in zip(self.bounds + (float("inf"),), self.counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=self.total)


class StoreCollector:
    """Figures read from the store (and the dispatcher) each time Prometheus scrapes."""

    def __init__(self, core: Core, parked: Callable[[], int], long_polls: Callable[[], int],
                 gate: Callable[[], Any]):
        self.core = core
        self.parked = parked
        self.long_polls = long_polls
        self.gate = gate  # gg.server.connections.Gate, once serving
        self.cursor = 0
        self.expiries = 0
        self.queue_wait = _Buckets(WAIT_BUCKETS)
        self.dispatch = _Buckets(WAIT_BUCKETS)

    def collect(self) -> Iterable:
        core, now = self.core, self.core.now()
        stages = core.store.stage_counts()
        flights = GaugeMetricFamily("gg_flights", "Flights by stage.", labels=["stage"])
        for stage in STAGES:
            flights.add_metric([stage], stages.get(stage, 0))
        yield flights
        yield self._runners(now)
        yield GaugeMetricFamily("gg_leases_live", "Flights flying on an unexpired lease.",
                                value=core.store.live_lease_count(now))
        yield GaugeMetricFamily("gg_claims_parked", "Runner claims held open, waiting for work.",
                                value=self.parked())
        yield GaugeMetricFamily("gg_long_polls_waiting", "Readers' long polls held open, "
                                "waiting for a fact or an event.", value=self.long_polls())
        gate = self.gate()
        if gate is not None:  # served by gg server (an in-process client has no gate)
            yield GaugeMetricFamily("gg_requests_in_hand", "Requests read and neither answered "
                                    "nor waiting (GG_MAX_REQUESTS_IN_HAND).", value=gate.in_hand)
            yield GaugeMetricFamily("gg_requests_waiting_turn", "Connections whose next request "
                                    "is left unread until fewer are in hand.",
                                    value=len(gate.waiting))
        kept = retention.server_facts(core)
        yield GaugeMetricFamily("gg_retain_flights_seconds", "How long an ended flight is kept "
                                "before it is pruned (0: for ever).", value=kept["retain_flights"])
        yield GaugeMetricFamily("gg_retain_events_seconds", "How long an event is kept before "
                                "it is pruned (0: for ever).", value=kept["retain_events"])
        yield GaugeMetricFamily("gg_database_bytes", "The store's size on disk (database file "
                                "and write-ahead log).", value=kept["database_bytes"])
        longest = GaugeMetricFamily(
            "gg_flight_expected_wait_longest_seconds", "The longest estimated wait, from now "
            "to its expected start, among the ready flights of each environment that have an "
            "estimate ('' for flights with no environment).", labels=["environment"])
        for environment, seconds in sorted(estimates.longest_waits(core).items()):
            longest.add_metric([environment], seconds)
        yield longest
        self._follow()
        yield CounterMetricFamily("gg_lease_expiries", "Leases that ran out (all time).",
                                  value=self.expiries)
        yield self.queue_wait.family("gg_flight_queue_wait_seconds",
                                     "From a flight's opening to its first lease grant.")
        yield self.dispatch.family("gg_flight_dispatch_seconds",
                                   "From the moment a flight last became offerable (opened, "
                                   "returned, expired, its gate cleared) to each lease grant.")
        yield from self._write_turns()

    def _write_turns(self) -> Iterable:
        """This process's group commits (gg.store.writer.WriteTurns): how many units each carries
        and where a commit's time goes, for an operator asking why writes are slow."""
        turns = self.core.store.db.turns
        yield CounterMetricFamily("gg_store_commits", "Group commits of this server's writer.",
                                  value=turns.commits)
        yield CounterMetricFamily("gg_store_commit_units", "Units of work (an open, a claim, a "
                                  "report…) those group commits carried.", value=turns.units)
        spent = CounterMetricFamily(
            "gg_store_commit_seconds", "Seconds the writer spent in its group commits, by "
            "phase: begin, work (the units' statements, with any wait for a row another "
            "replica's writer holds), commit (the durable flush).", labels=["phase"])
        for phase in ("begin", "work", "commit"):
            spent.add_metric([phase], getattr(turns, phase))
        yield spent
        yield CounterMetricFamily("gg_store_events_turn_seconds", "Of the commit phase, seconds "
                                  "waited for the events' turn, which puts event numbers in "
                                  "commit order across replicas (PostgreSQL only).",
                                  value=turns.turn)
        yield CounterMetricFamily("gg_store_unit_retries", "Units run again because they lost "
                                  "to another replica's writer (a deadlock, a lock waited for "
                                  "too long; PostgreSQL only).", value=turns.retries)

    def _runners(self, now: float) -> GaugeMetricFamily:
        counts: dict[tuple[str, str, str], int] = {}
        offline_after = self.core.settings.offline_after
        for state, health, last_seen_at, goodbye_at in self.core.store.runner_presence():
            probe = Runner(id="", name="", last_seen_at=last_seen_at, goodbye_at=goodbye_at)
            healthy = health == HealthState.OK.value
            key = (state, Liveness.of(is_online(probe, now, offline_after)).value,
                   (HealthState.OK if healthy else HealthState.DEGRADED).value)
            counts[key] = counts.get(key, 0) + 1
        family = GaugeMetricFamily("gg_runners", "Runners (not retired) by admin state, "
                                   "liveness and health.", labels=["state", "liveness", "health"])
        for state in ADMIN_STATES:
            for liveness in (s.value for s in Liveness):
                for health in (s.value for s in HealthState):
                    family.add_metric([state, liveness, health],
                                      counts.get((state, liveness, health), 0))
        return family

    def _follow(self) -> None:
        rows = self.core.store.grants_and_expiries_after(self.cursor, _FOLLOW_PER_SCRAPE)
        for row in rows:
            self.cursor = row["seq"]
            if row["kind"] == EventKind.FLIGHT_EXPIRED:
                self.expiries += 1
                continue
            if row["first_claim"] and row["opened_at"] is not None:
                self.queue_wait.observe(row["at"] - row["opened_at"])
            if row["ready_at"] is not None:
                self.dispatch.observe(row["at"] - row["ready_at"])


class RequestCounts:
    """Requests and their duration per route template (never a raw path), and check-ins."""

    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter("gg_http_requests", "HTTP requests answered.",
                                ["route", "method", "status"], registry=registry)
        self.seconds = Histogram("gg_http_request_seconds", "Time to answer, per route.",
                                 ["route"], buckets=REQUEST_BUCKETS, registry=registry)
        self.check_ins = Counter("gg_runner_check_ins", "Runner check-ins accepted.",
                                 registry=registry)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.seconds.labels(route).observe(seconds)
        if route == paths.RUNNER_CHECK_IN and status == 200:
            self.check_ins.inc()


class RequestMetrics:
    """ASGI middleware: every request the app answers, counted in :class:`RequestCounts`."""

    def __init__(self, app, counts: RequestCounts):
        self.app = app
        self.counts = counts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = [500]

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.counts.observe(route, scope.get("method", ""), status[0],
                                time.perf_counter() - started)


def install(app: FastAPI) -> None:
    """Register ``GET /metrics`` and the request counters on ``app`` (one registry per app)."""
    registry = CollectorRegistry(auto_describe=False)
    core: Core = app.state.core
    registry.register(StoreCollector(core, lambda: app.state.dispatcher.parked_count,
                                     lambda: app.state.watch.waiting,
                                     lambda: getattr(app.state, "gate", None)))
    app.state.request_metrics = RequestCounts(registry)  # the claim route counts there too
    app.state.loop_lag = LoopLag(registry)  # its task: the lifespan's (gg.server.liveness)
    app.state.collector_pauses = CollectorPauses()  # counting from the lifespan's start
    registry.register(app.state.collector_pauses)
    app.add_middleware(RequestMetrics, counts=app.state.request_metrics)
    one_at_a_time = threading.Lock()  # a scrape follows the event feed from its cursor

    def scrape() -> bytes:
        with one_at_a_time:
            return generate_latest(registry)

    @app.get(METRICS_PATH, include_in_schema=False)
    async def metrics(request: Request) -> Response:
        # On a worker thread: a scrape reads the store and forecasts every queue (tens of
        # milliseconds of CPU on a long one), which must not hold up the event loop.
        return Response(await asyncio.to_thread(scrape), media_type=CONTENT_TYPE_LATEST)
