"""One consistent reading of a pool, and what it tells the waiting sentence.

:func:`look` reads a pool whole (the strategy in force, the members, their runners' leases,
grants and liveness, the flights waiting for its environment) and asks
:func:`gg.domain.pool_planner.plan_pool` for the plan. Both the pool use cases
(:mod:`gg.control.pools`, :mod:`gg.control.members`) and the waiting sentence of every flight
(:mod:`gg.control.flights`) read pools through here, so neither imports the other's module
to explain a flight.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gg.control.core import Core
from gg.control.pool_maintainers import live_seats
from gg.domain.events import EventKind
from gg.domain.flights import Flight
from gg.domain.pool_planner import Member, PoolPlan, plan_pool
from gg.domain.pool_scaling import Scaled
from gg.domain.pool_shares import Seat, Shares, share_plan
from gg.domain.pools import PoolMember, StrategyRecord, member_takes, shown_state
from gg.domain.runners import Runner, is_online


@dataclass
class Look:
    """One consistent reading of a pool, and the plan for it."""

    record: StrategyRecord
    members: list[PoolMember]
    runners: dict[str, Runner]
    online: dict[str, bool]
    held: dict[str, list[str]]  # member id -> flights its runner holds a live lease on
    flew: set[str]  # members whose runner was granted a lease in this cycle
    waiting: int
    plan: PoolPlan
    now: float
    scaled: Scaled | None = None  # a scaled pool's last decision, as stored
    scaled_reason: str | None = None
    seats: tuple[Seat, ...] = ()  # the live maintainers
    shares: Shares | None = None  # the plan split among them

    @property
    def live(self) -> set[str]:
        return {s.maintainer_id for s in self.seats}

    def counts(self) -> dict[str, dict[str, int | None]]:
        """What ``gg pools`` shows beside the members: desired (a scaled pool), starting,
        warm (ready and idle) and busy."""
        return {"counts": {"desired": self.plan.desired, "starting": self.plan.warming,
                           "warm": self.plan.ready, "busy": self.plan.busy}}

    def member_view(self, m: PoolMember) -> dict:
        runner = self.runners.get(m.runner_id) if m.runner_id else None
        held = self.held.get(m.id, [])
        ended = m.id in self.flew and not held
        return {"id": m.id, "name": m.name, "pool": m.pool,
                "state": shown_state(m.state, leased=bool(held), flight_ended=ended),
                "stored_state": m.state, "online": self.online.get(m.id, False),
                "flight": held[0] if held else None, "digest": m.digest, "resets": m.resets,
                "runner_id": m.runner_id, "maintainer_id": m.maintainer_id,
                "credential_expires_at": runner.credential_expires_at if runner else None,
                "code_expires_at": m.code_expires_at, "created_at": m.created_at,
                "cycle_started_at": m.cycle_started_at}


def look(core: Core, record: StrategyRecord, now: float, asking: Runner | None = None) -> Look:
    """The pool read whole, planned, and the plan split among its live maintainers (``asking``,
    the maintainer whose request this is, counts as live)."""
    strategy = record.in_force or record.applied
    seats = live_seats(core, record.pool, now, asking)
    serving = {s.maintainer_id for s in seats}
    members = core.store.members(record.pool)
    runner_ids = [m.runner_id for m in members if m.runner_id]
    runners = {r.id: r for r in core.store.runners(ids=runner_ids)}
    held: dict[str, list[str]] = {}
    for m in members:
        if m.runner_id in runners:
            flights = core.store.flights_held_by(m.runner_id)
            live = [f.id for f in flights if (f.lease_expires_at or 0) > now]
            if live:
                held[m.id] = live
    flew = {m.id for m in members if m.runner_id in runners
            and core.store.grants_to(m.runner_id) > m.cycle_grants}
    online = {m.id: m.runner_id in runners and is_online(runners[m.runner_id], now,
                                                          core.settings.offline_after)
              for m in members}
    planned = [Member(
        id=m.id, state=m.state, digest=m.digest, leased=m.id in held,
        flight_ended=m.id in flew and m.id not in held,
        credential_expires_at=(runners[m.runner_id].credential_expires_at
                               if m.runner_id in runners else None),
        online=online[m.id],
        idle_since=m.updated_at if m.updated_at is not None else m.created_at,
        orphaned=bool(serving) and m.maintainer_id not in serving)
        for m in members]
    waiting = core.store.count_ready_requiring({"environment": strategy.environment})
    spec = strategy.pool_spec()
    last = core.store.pool_scaled(record.pool) if spec.scale is not None else None
    scaled = last[0] if last is not None else None
    if record.deleting_at is not None:  # gg pool delete: every member goes, none starts
        spec, waiting = replace(spec, size=0, warm=0, pool_max=0, scale=None), 0
    if record.in_force is None:
        plan = plan_pool(spec, [], 0, now)  # nothing runs before the gate
    else:
        plan = plan_pool(spec, planned, waiting, now, scaled=scaled)
    shares = share_plan(plan, {m.id: m.maintainer_id for m in members}, seats)
    return Look(record, members, runners, online, held, flew, waiting, plan, now,
                scaled=scaled, scaled_reason=last[1] if last is not None else None,
                seats=tuple(seats), shares=shares)


def keep_scaling(core: Core, seen: Look) -> None:
    """Store a scaled pool's decision, and record it as an event when desired moved (inside
    the maintainer's transaction: whoever reads the pool plans from the stored count)."""
    decision = seen.plan.scaling
    if decision is None or seen.record.in_force is None or seen.record.deleting_at is not None:
        return
    if decision.changed:
        core.store.save_pool_scaled(seen.record.pool, Scaled(decision.desired, seen.now),
                                    decision.reason)
        core.event(EventKind.POOL_SCALED, actor=f"pool:{seen.record.pool}", at=seen.now,
                   pool=seen.record.pool, previous=decision.previous,
                   desired=decision.desired, reason=decision.reason, waiting=seen.waiting)
    elif seen.scaled is None:  # the first plan: desired starts from what the pool holds
        core.store.save_pool_scaled(seen.record.pool, Scaled(decision.desired, None), None)


# --------------------------------------------------------------------------- what people see


def waiting_reasons(core: Core, now: float) -> dict[str, tuple[str, str]]:
    """Environment -> the waiting sentence (rungs 3 and 4) of the pool serving it.

    Only while the pool's maintainer is online: a plan nobody carries out warms nothing, so
    the flight reads the later rungs instead (and ``gg pools`` says the pool needs attention).
    """
    reasons: dict[str, tuple[str, str]] = {}
    for record in core.store.strategies(in_force=True):
        if not maintainer_online(core, record, now):
            continue
        plan = look(core, record, now).plan
        if plan.waiting is not None:
            assert record.in_force is not None, "asked for strategies in force"
            reasons.setdefault(record.in_force.environment, plan.waiting)
    return reasons


def maintainer_online(core: Core, record: StrategyRecord, now: float) -> bool:
    """Whether some maintainer serves the pool now (one that checked in for it and is
    online, or, for a pool none has checked in for since this release, its last one)."""
    if live_seats(core, record.pool, now):
        return True
    maintainer = core.store.runner(record.maintainer_id) if record.maintainer_id else None
    return maintainer is not None and is_online(maintainer, now, core.settings.offline_after)


def reason_for(reasons: dict[str, tuple[str, str]], flight: Flight) -> tuple[str, str] | None:
    """The pool sentence for ``flight``, when a pool serves its environment and one of its
    members could take it."""
    environment = flight.requires.get("environment")
    if environment is None or not member_takes(flight.requires, flight.runner_target,
                                               environment):
        return None
    return reasons.get(environment)
