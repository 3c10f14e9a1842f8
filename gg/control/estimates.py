"""Start estimates: read what the estimator needs, once per listing, and check it afterwards.

Estimates are computed when someone reads (``gg show``, ``gg flights``, ``/metrics``), never
on the claim path. A read that shows a flight a new estimate writes it (``shown_estimates``,
one non-durable unit of the writer for the whole page) before it answers, so that whichever
replica grants the flight, even after a restart, finds what its person was shown. What the
claim path does is cheap: the grant's own transaction moves the estimate last shown beside
the start (one indexed statement when none was shown), and a flight's final report folds its
duration into its kind's summary (both in :func:`gg.control.lifecycle.move`); a pool
member's first check-in of a cycle folds its warm-up into its pool's
(``gg.control.runners.check_in``). None of these adds a commit.
"""

from __future__ import annotations

from typing import Collection, Mapping

from gg.control import pool_look
from gg.control import sizes as size_ops
from gg.control.core import Core
from gg.control.forecaster import Ask, Forecaster, store_target
from gg.domain import estimates
from gg.domain.estimates import Estimate, Forecast, History, PoolOutlook, Queue
from gg.domain.flights import Event, Flight, Stage
from gg.domain.groups import OPEN, Placement
from gg.domain.matching import Seat, seat
from gg.domain.pools import SETTLING
from gg.store.estimates import FLIGHT, WARMUP

_WRITTEN_MAX = 100_000  # estimates this replica remembers having written (the oldest dropped)
ENDED = (Event.LANDED, Event.FAILED)  # a final report: the flight flew its whole course
HANDED_BACK = (Event.LANDED, Event.FAILED, Event.RETURNED)


def history(core: Core) -> History:
    warmups = {title: s for (title, _, _), s in core.store.durations(WARMUP).items()}
    return History(core.store.durations(FLIGHT), warmups, turnaround=core.estimates.turnaround)


def outlooks(core: Core, now: float) -> list[PoolOutlook]:
    """What each pool whose maintainer is online will do for the flights waiting on it."""
    out = []
    for record in core.store.strategies(in_force=True):
        if not pool_look.maintainer_online(core, record, now):
            continue
        seen = pool_look.look(core, record, now)
        assert record.in_force is not None, "asked for strategies in force"
        spec = record.in_force.pool_spec()
        # still on its way: starting or resetting as last attested, and not yet checked in
        settling = [m.cycle_started_at or now for m in seen.members if m.state in SETTLING
                    and m.id not in seen.held and not seen.online.get(m.id)]
        out.append(estimates.pool_outlook(
            record.pool, spec.environment, in_hours=seen.plan.in_hours,
            warming=seen.plan.warming, settling_since=settling,
            cap=min(spec.size, spec.pool_max, spec.scale.max if spec.scale else spec.size),
            waiting=seen.waiting,
            members=frozenset(m.runner_id for m in seen.members if m.runner_id),
            active_hours=spec.active_hours, now=now))
    return out


def forecast(core: Core, seats: list[Seat], now: float,
             needed: Collection[str] | None = None) -> Forecast:
    """The estimates of the ready flights ``needed`` (None: every one) and of every flight
    ahead of them in the matcher's order, from one run of the queue. A run is reused for
    ESTIMATE_REUSE seconds while no event was recorded (every open, grant, report, drain or
    liveness change records one) when it went as far as this read needs, so the pages of one
    listing share one run (the first page, the newest flights, are the last in the queue)."""
    rows = core.store.events(after=0, limit=1, newest=True)
    seq = rows[-1]["seq"] if rows else 0
    kept = core.estimates.last_forecast
    if kept is not None and kept[0] == seq and 0 <= now - kept[1] < core.settings.estimate_reuse:
        if kept[2].covers(needed):
            return kept[2]
        if needed is not None:  # go at least as far as the kept run, for the next reader
            needed = [*needed, *kept[2].played[-1:]]
    made = run_forecast(core, seats, now, needed)
    core.estimates.last_forecast = (seq, now, made)
    return made


def forecast_of(core: Core, seats: list[Seat], now: float,
                needed: Collection[str] | None = None) -> Mapping[str, Estimate | None]:
    """:func:`forecast`'s estimates of ``needed`` (None: its whole run), played in the
    forecaster's process when the queue holds FORECAST_AWAY ready flights or more
    (gg.control.forecaster): the same answers, without holding the interpreter's lock."""
    away = _forecaster(core)
    if away is not None and needed is not None and core.store.ready_at_least(
            core.settings.forecast_away):
        placement = seats[0].placement if seats else OPEN
        sizes = seats[0].sizes if seats else {}
        said = away.ask(Ask(now, tuple(needed), placement, sizes, core.estimates.turnaround))
        if said is not None:
            return said
    return forecast(core, seats, now, needed).estimates


def _forecaster(core: Core) -> Forecaster | None:
    """This core's forecaster (made at its first use), or None where none may serve."""
    if core.settings.forecast_away <= 0:
        return None
    memory = core.estimates
    if memory.forecaster is None:
        target = store_target(core.store)
        if target is None:
            return None
        with memory.lock:
            if memory.forecaster is None:
                memory.forecaster = Forecaster(target, core.settings)
    return memory.forecaster


def run_forecast(core: Core, seats: list[Seat], now: float,
                 needed: Collection[str] | None = None) -> Forecast:
    """One run of the queue, every time (what :func:`forecast` reuses): as far as the last of
    ``needed`` in the matcher's order, or to its end."""
    ready = core.store.waiting_for_estimates()
    flying = [Flight(command=[], **values)
              for values in core.store.for_estimates(Stage.FLYING.value)]
    served = core.store.last_served({w.opened_by for w in ready})
    return estimates.forecast(Queue(ready, flying, served), seats, history(core),
                              outlooks(core, now), now, needed=needed)


def fields(estimate: Estimate | None, now: float) -> dict:
    """The row's ``expected_start_*`` fields (all None when the flight is not waiting)."""
    if estimate is None:
        return {"expected_start_at": None, "expected_start_low": None,
                "expected_start_high": None, "expected_start_basis": None,
                "expected_start": None}
    return {"expected_start_at": estimate.at, "expected_start_low": estimate.low,
            "expected_start_high": estimate.high, "expected_start_basis": estimate.basis,
            "expected_start": estimates.sentence(estimate, now)}


def add_to_rows(core: Core, rows: list[dict], seats: list[Seat], now: float) -> None:
    """Add the estimate fields to flight rows, from one forecast for all of them (made only
    when a row waits), and keep what was shown."""
    waiting = [r for r in rows if r["stage"] in (Stage.READY.value, Stage.GATED.value)]
    result = None
    ready = [r["id"] for r in waiting if r["stage"] == Stage.READY.value]
    held = core.store.held_flights() if ready else set()  # --after: not in the queue yet
    ready = [r for r in ready if r not in held]
    if ready:  # played forward as far as the last of these rows in the matcher's order
        result = forecast_of(core, seats, now, ready)
    shown = []
    for row in rows:
        est = None
        if row["stage"] == Stage.GATED.value:
            est = estimates.no_estimate(estimates.GATED)
        elif row["id"] in held:
            est = estimates.no_estimate(estimates.AFTER)
        elif row["stage"] == Stage.READY.value and result is not None:
            est = result.get(row["id"]) or estimates.no_estimate(estimates.NOBODY)
        row.update(fields(est, now))
        if est is not None and est.known:
            shown.append((row["id"], est))
    if shown:
        keep_shown(core, shown, now)


def keep_shown(core: Core, shown: list[tuple[str, Estimate]], now: float) -> None:
    """Write the estimates just shown that moved (``gg.domain.estimates.moved``) from what
    this replica last wrote for their flights: a flight shown about the same estimate again
    keeps the time it was first shown so. Waits for the writer's
    non-durable commit, so a person who saw an estimate can count on its being checked
    afterwards; a read whose estimates were all written already costs nothing."""
    written = core.estimates.written
    new = []
    for flight_id, est in shown:
        # shown holds known estimates only, and a known estimate has all three times
        assert est.at is not None and est.low is not None and est.high is not None
        said = (est.at, est.low, est.high)
        if estimates.moved(written.get(flight_id), said, now):
            new.append((flight_id, now, est.at, est.low, est.high))
            written.pop(flight_id, None)
            written[flight_id] = said
    while len(written) > _WRITTEN_MAX:
        written.pop(next(iter(written)))
    if new:
        forget_before = now - core.settings.estimate_retain
        core.store.db.submit(lambda: core.store.show_estimates(new, forget_before=forget_before),
                             durable=False).result()


# --------------------------------------------------------------------------- the claim's part


def on_change(core: Core, flight: Flight, event: Event, now: float, *,
              runner_id: str | None = None) -> None:
    """Inside the transaction of ``move``: a grant keeps the estimate the flight was last
    shown beside its start (and, in memory, how long its runner took from its last hand-back
    to this start while the flight waited); a final report folds the flight's duration into
    its kind's summary."""
    memory = core.estimates
    if event in HANDED_BACK and flight.lease_runner:
        memory.lease_ended[flight.lease_runner] = now
    if event == Event.GRANTED:
        ended = memory.lease_ended.pop(runner_id, None) if runner_id else None
        if ended is not None and flight.opened_at <= ended:  # it waited for this runner
            memory.turnaround = memory.turnaround.add(now - ended, core.settings.estimate_window)
        memory.written.pop(flight.id, None)  # waiting again later: written anew
        core.store.started_with_estimate(flight.id, now)
    elif event in ENDED and flight.stage == Stage.FLYING.value and flight.lease_granted_at:
        core.store.add_duration(FLIGHT, estimates.kind_of(flight), now - flight.lease_granted_at,
                                window=core.settings.estimate_window,
                                keep=core.settings.estimate_kinds, now=now)


def on_first_check_in(core: Core, pool: str, *, runner_id: str, started_at: float,
                      now: float) -> None:
    """A pool member checked in for the first time since it started (or reset): its
    warm-up, in the check-in's own transaction. Its last hand-back is forgotten: the time
    from there to its next flight is its reset and warm-up, which the estimate adds as the
    pool's, not a runner's turnaround (counted as one, it would stretch every runner's)."""
    core.estimates.lease_ended.pop(runner_id, None)
    core.store.add_duration(WARMUP, (pool, "", ""), now - started_at,
                            window=core.settings.estimate_window,
                            keep=core.settings.estimate_kinds, now=now)


# --------------------------------------------------------------------------- checked afterwards


def accuracy(core: Core, since: float | None) -> dict:
    """How the estimates flights started with compared with when they started."""
    now = core.now()
    since = now - core.settings.estimate_retain if since is None else since
    return {"since": since, **estimates.accuracy(core.store.start_estimates(since))}


def fleet_seats(core: Core, now: float, *, runners: list | None = None,
                placement: Placement = OPEN) -> list[Seat]:
    """Every runner's seat as the matcher sees it now (usable labels, live leases, online,
    its group's ``placement``), of ``runners`` (default: all of them) less the pools'
    maintainers: ``gg runner maintain`` flies nothing, so no flight waits for it."""
    live = core.store.live_leases(now)
    refuted = core.store.refuted_by_runner()
    maintainers = core.store.maintainer_ids()
    held = core.store.held_service_ports(now) if live else {}
    fleet = [r for r in (core.store.runners() if runners is None else runners)
             if r.id not in maintainers]
    rooms = size_ops.rooms(core, now, fleet, live)  # placement by size
    return [seat(r, now, core.settings.offline_after, live.get(r.id, 0),
                 refuted.get(r.id, frozenset()), placement, held.get(r.id), rooms[r.id])
            for r in fleet]


def longest_waits(core: Core) -> dict[str, float]:
    """Environment -> the longest estimated wait among its ready flights (``/metrics``);
    nothing is read beyond one query when no flight is ready."""
    if not core.store.any_ready():
        return {}
    now = core.now()
    away = _forecaster(core)
    if away is not None and core.store.ready_at_least(core.settings.forecast_away):
        said = away.ask(Ask(now, None, OPEN, {}, core.estimates.turnaround))
        if said is not None:
            return said
    result = forecast(core, fleet_seats(core, now), now)
    ready = core.store.flight_environments(Stage.READY.value)
    return result.longest(ready)
