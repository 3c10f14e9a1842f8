"""``gg plan F``: load what the claim reads, and let :mod:`gg.domain.plan` decide."""

from __future__ import annotations

from gg.control.core import Core
from gg.control.flights import Snapshot, record_due, retired_holder, stopping_sentence
from gg.domain import attended
from gg.domain.plan import PlanFacts, build_plan
from gg.errors import NotFound


def plan_for(core: Core, flight_id: str) -> dict:
    now = core.now()
    record_due(core, now)
    flight = core.store.flight(flight_id)
    if flight is None:
        raise NotFound(f"no flight {flight_id}")
    snap = Snapshot(core, now)
    env = core.store.environment(flight.environment) if flight.environment else None
    facts = PlanFacts(
        now=now,
        people={p.id: p.name for p in core.store.people()},
        environment_meaning=env.meaning if env else None,
        environment_charted=env is not None,
        attended_deadline=attended.deadline(flight, core.settings.claim_wait),
    )
    plan = build_plan(flight, snap.seats, snap.context(flight), facts)
    data = plan.to_dict()
    data["title"] = flight.title
    retired = retired_holder(core, flight, snap.names)
    if retired is not None:  # still flying on a runner that was retired: it is being stopped
        data["state"] = stopping_sentence(retired)
    return data
