"""Pools on the control plane: who may maintain one, the plan it is served, its attestations,
and what ``gg pools`` and the waiting sentence read.

The control plane decides every pool action with :func:`gg.domain.pool_planner.plan_pool`
over one consistent :class:`Look` at the store: the strategy in force, the members, their
runners' leases, grants and liveness, and the flights waiting for the pool's environment.
The maintainer asks for that plan, carries it out (:mod:`gg.control.members` checks every
action against a fresh plan) and attests what its processes are doing; the control plane
turns those facts into member states (:func:`gg.domain.pools.reconciled_state`).

A pool may have several maintainers, each on its own host (:mod:`gg.control.pool_maintainers`):
each checks in when it asks for the plan, and the control plane hands every action to exactly
one of the live ones (:func:`gg.domain.pool_shares.share_plan`), in the write transaction that
checks it, so two hosts never both make the same machine and the bounds hold across them.
"""

from __future__ import annotations

from collections import Counter

from gg.control.core import Core
from gg.control.flights import Snapshot
from gg.control.people import require_admin
from gg.control.pool_look import keep_scaling, look, maintainer_online
from gg.control.pool_maintainers import maintainers_view
from gg.control.runners import resolve
from gg.domain.events import EventKind
from gg.domain.flights import Flight, Stage
from gg.domain.people import Person
from gg.domain.pool_planner import LIMITED, WARMING
from gg.domain.pools import (
    MEMBER_KIND,
    SETTLING,
    StrategyRecord,
    attention,
    code_refusal,
    member_takes,
    reconciled_state,
    stale_event_due,
)
from gg.domain.runners import Runner
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Forbidden, NotFound

MAINTAIN_ROLE = "maintain"
PLAN_EVERY = 5.0  # the longest a maintainer waits between plans ("every few seconds")


# --------------------------------------------------------------------------- who maintains


def pool_environments(core: Core) -> set[str]:
    """Environments a pool in force provides (a root envelope may list them with no runner)."""
    return {r.in_force.environment for r in core.store.strategies(in_force=True)
            if r.in_force is not None}


def pools_providing(core: Core, environment: str) -> list[str]:
    """A pool in force serves its environment even with no member online yet."""
    return [f"pool {r.in_force.inventory.name}" for r in core.store.strategies(in_force=True)
            if r.in_force is not None and r.in_force.environment == environment]


def profile_roles(runner: Runner) -> frozenset[str]:
    """The roles of the runner's fleet profile in force (enrolment keeps it on the row);
    none while its profile's first gate is open."""
    return frozenset((runner.profile_in_force or {}).get("roles") or ())


def may_maintain(core: Core, runner: Runner, pool: str) -> str | None:
    """Why ``runner`` may not maintain ``pool`` (or call any pool endpoint), or None.

    THE one check: a member never may; an enrolled runner may exactly when its fleet profile
    in force has the ``maintain`` role; a registered runner may when an admin allowed it for
    this pool (``gg pool allow POOL RUNNER``).
    """
    if runner.kind == MEMBER_KIND:
        return "a pool member cannot maintain a pool or call any pool endpoint"
    if runner.profile is not None:
        if MAINTAIN_ROLE in profile_roles(runner):
            return None
        return (f"runner {runner.name} may not maintain pool {pool}: its fleet profile "
                f"{runner.profile} has no {MAINTAIN_ROLE} role in force")
    if core.store.maintainer_allowed(pool, runner.id):
        return None
    return (f"runner {runner.name} may not maintain pool {pool}: no admin allowed it "
            f"(gg pool allow {pool} {runner.name}), and it is not enrolled with a fleet "
            f"profile that has the {MAINTAIN_ROLE} role")


def allow(core: Core, person: Person, pool: str, runner_ref: str) -> dict:
    """An admin lets a registered (not enrolled) runner maintain ``pool``."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        if core.store.strategy_for_pool(pool) is None:
            raise NotFound(f"no pool {pool}: apply its strategy first (gg strategy apply)")
        runner = resolve(core, runner_ref)
        if runner.kind == MEMBER_KIND:
            raise Conflict(f"runner {runner.name} is a member of a pool; a member never "
                           "maintains one")
        if runner.profile is not None:
            raise Conflict(f"runner {runner.name} is enrolled with fleet profile "
                           f"{runner.profile}, which decides: add the {MAINTAIN_ROLE} role "
                           "to that profile")
        core.store.allow_maintainer(pool, runner.id, person.name, now)
        core.event(EventKind.POOL_MAINTAINER_ALLOWED, actor=person.name, runner_id=runner.id,
                   at=now, pool=pool, runner=runner.name)
    return {"pool": pool, "runner": runner.id, "runner_name": runner.name}


def maintained(core: Core, runner: Runner, pool: str, *, claim: bool) -> StrategyRecord:
    """The pool's record, once ``runner`` is known to maintain it (inside a transaction).
    ``claim`` records it as the pool's maintainer."""
    refusal = may_maintain(core, runner, pool)
    if refusal:
        raise Forbidden(refusal)
    record = core.store.strategy_for_pool(pool)
    if record is None:
        raise NotFound(f"no pool {pool}: apply a strategy whose inventory.name is {pool}")
    if record.in_force is None:
        raise Conflict(f"pool {pool}'s strategy {record.name} is not in force yet: gate "
                       f"{record.gate_id} is open (an admin can clear it: gg gate clear "
                       f"{record.gate_id})", code=ErrorCode.NOT_IN_FORCE)
    if claim and record.maintainer_id != runner.id:
        core.store.update_strategy(record.name, maintainer_id=runner.id)
    return record


def plan_view(core: Core, runner: Runner, pool: str, capacity: int | None = None) -> dict:
    """What a maintainer is served: its share of the plan, the members, and when to ask
    again. Asking is its check-in for the pool: ``capacity`` is the most members its host
    holds (None: no limit of its own)."""
    if capacity is not None and capacity < 0:
        raise BadRequest(f"capacity must be 0 or more (got {capacity})")
    now = core.now()
    with core.store.atomic():
        record = maintained(core, runner, pool, claim=False)
        core.store.check_in_maintainer(pool, runner.id, capacity, now)
        seen = look(core, record, now, asking=runner)
        keep_scaling(core, seen)
    assert seen.shares is not None, "look() splits the plan"
    strategy = record.in_force
    assert strategy is not None, "maintained() refuses a strategy not in force"
    return {
        "pool": pool, "strategy": record.name, "environment": strategy.environment,
        "driver": strategy.driver, "image": strategy.image.to_dict(), "digest": seen.plan.digest,
        "actions": [a.as_dict() for a in seen.shares.of(runner.id)],
        "unplaced": seen.shares.unplaced,
        "in_hours": seen.plan.in_hours, "limit": seen.plan.limit,
        "waiting": seen.plan.waiting_reason, "waiting_flights": seen.waiting,
        "scaling": seen.plan.scaling.reason if seen.plan.scaling else None,
        "command": strategy.command,
        "members": [seen.member_view(m) for m in seen.members],
        "next_plan_in": min(PLAN_EVERY, core.settings.check_in_interval),
        "server_time": now,
    }


# --------------------------------------------------------------------------- attestations


def attest(core: Core, runner: Runner, pool: str, *, members: list[dict], did: list[dict],
           driver: dict | None, backoff: dict | None = None) -> dict:
    """The maintainer's account: what it did, and which member processes run. The control
    plane turns those facts into member states, and records the attestation."""
    now = core.now()
    running = {m["id"] for m in members if m.get("process") == "running"}
    with core.store.atomic():
        record = maintained(core, runner, pool, claim=True)
        before = look(core, record, now, asking=runner)
        never_joined: list[str] = []
        for m in before.members:
            if m.maintainer_id not in (None, runner.id):
                continue  # another host's member: its own maintainer speaks for it
            state = reconciled_state(
                m.state, running=m.id in running, online=before.online[m.id],
                leased=m.id in before.held, flew=m.id in before.flew,
                joined=m.code_hash is None,
                code_expired=code_refusal(m.code_expires_at, now))
            if state != m.state:
                core.store.update_member(m.id, state=state, updated_at=now)
            if state == "stopped" and m.state in SETTLING and m.code_hash is not None:
                # made, never joined before its code expired: the machine is deleted and
                # replaced by the next plan; the failure is the operator's to see
                never_joined.append(m.id)
                deadline = (m.code_expires_at - m.cycle_started_at
                            if m.code_expires_at is not None and m.cycle_started_at is not None
                            else core.settings.member_code_ttl)
                core.event(EventKind.POOL_MEMBER_NEVER_JOINED, actor=f"runner:{runner.name}",
                           runner_id=runner.id, at=now, pool=pool, member=m.id,
                           deadline=round(deadline, 3),
                           reason=f"member {m.name} never checked in within "
                                  f"{deadline:g} s of its start")
        after = look(core, record, now, asking=runner)
        views = [after.member_view(m) for m in after.members]
        holds = dict(sorted(Counter(v["state"] for v in views).items()))
        ours = {m.id for m in after.members}
        attestation = {
            "at": now, "by": runner.id, "by_name": runner.name, "did": did, "holds": holds,
            "live": sum(1 for v in views if v["state"] != "stopped"),
            "members": [{k: v[k] for k in ("id", "state", "digest", "resets")} for v in views],
            "unknown": sorted(m["id"] for m in members if m["id"] not in ours),
            "driver": driver, "limit": after.plan.limit, "waiting": after.plan.waiting_reason,
            "backoff": backoff,
        }
        mine = {c["runner_id"]: c for c in core.store.maintainer_checkins(pool)}.get(runner.id)
        previous = (mine or {}).get("attestation") or {}
        core.store.note_maintainer_attested(pool, runner.id, attestation, bool(backoff), now)
        worth_an_event = (bool(did) or previous.get("holds") != holds
                          or previous.get("driver") != driver
                          or bool(previous.get("backoff")) != bool(backoff))
        core.store.update_strategy(record.name, last_attested_at=now, attestation=attestation)
        if worth_an_event:
            core.event(EventKind.POOL_ATTESTED, actor=f"runner:{runner.name}", runner_id=runner.id,
                       at=now, pool=pool, did=[_did_text(d) for d in did], holds=holds,
                       live=attestation["live"])
        if record.deleting_at is not None and not after.members:  # gg pool delete: done
            finish_deleting(core, record, now)
            worth_an_event = True
    return {"pool": pool, "members": views, "unknown": attestation["unknown"],
            "recorded_event": worth_an_event, "never_joined": never_joined}


def _did_text(did: dict) -> str:
    words = [str(did.get("action", "?"))]
    if did.get("member_id"):
        words.append(str(did["member_id"]))
    if did.get("new_member"):
        words.append(f"-> {did['new_member']}")
    if not did.get("ok", True):
        words.append(f"failed: {did.get('error') or 'no reason given'}")
    return " ".join(words)


# --------------------------------------------------------------------------- what people see


def note_stale_pools(core: Core, now: float) -> int:
    """Record ``warn:pool:stale`` once per stale episode (whoever looks first)."""
    stale = core.settings.pool_attestation_stale
    noted = 0
    for record in core.store.strategies(in_force=True):
        if stale_event_due(record.last_attested_at, record.in_force_at, record.stale_noted_at,
                           now, stale) and core.store.note_once(
                "strategies", "name", record.name, "stale_noted_at", record.stale_noted_at, now):
            core.event(EventKind.POOL_STALE, actor="control-plane", at=now, pool=record.pool,
                       last_attested_at=record.last_attested_at)
            noted += 1
    return noted


def stale_due(core: Core, now: float) -> bool:
    """Whether some pool's stale episode is not recorded yet (a read; the liveness watch
    asks it every few seconds and writes only when it is so)."""
    stale = core.settings.pool_attestation_stale
    return any(stale_event_due(r.last_attested_at, r.in_force_at, r.stale_noted_at, now, stale)
               for r in core.store.strategies(in_force=True))


def notice_stale_pools(core: Core) -> int:
    """:func:`note_stale_pools` in its own transaction, waking anyone following events.
    Called when someone lists the pools and by the liveness watch (as a unit of the
    writer), so a pool whose maintainer went silent is recorded even when nobody looks and
    its ``pool.stale`` hooks fire. Nothing to record (nearly always): a read, and no write
    transaction."""
    now = core.now()
    if not stale_due(core, now):
        return 0
    with core.store.atomic():
        noted = note_stale_pools(core, now)
    return noted


def list_pools(core: Core) -> list[dict]:
    notice_stale_pools(core)
    now = core.now()
    snap = Snapshot(core, now)
    ready = core.store.flights(stages=(Stage.READY.value,), limit=100000, newest_first=False)
    return [_pool_view(core, record, snap=snap, ready=ready, now=now)
            for record in core.store.strategies()]


def show_pool(core: Core, pool: str) -> dict:
    for row in list_pools(core):
        if row["name"] == pool:
            return row
    raise NotFound(f"no pool {pool}")


def _pool_view(core: Core, record: StrategyRecord, *, snap, ready: list[Flight],
               now: float) -> dict:
    strategy = record.in_force or record.applied
    seen = look(core, record, now)
    maintainer = core.store.runner(record.maintainer_id) if record.maintainer_id else None
    online = maintainer_online(core, record, now)
    if record.in_force is None:
        problem: str | None = f"its strategy is not in force yet (gate {record.gate_id} is open)"
    else:
        problem = attention(record.last_attested_at, record.in_force_at, now,
                            core.settings.pool_attestation_stale)
    waiting = []
    for flight in ready:
        if not member_takes(flight.requires, flight.runner_target, strategy.environment):
            continue
        why = snap.waiting(flight)
        if why is not None and why.code in (WARMING, LIMITED):
            waiting.append({"flight": flight.id, "sentence": why.sentence, "remedy": why.remedy})
    return {
        "name": record.pool, "strategy": record.name, "environment": strategy.environment,
        "driver": strategy.driver, "digest": strategy.image.digest, "image": strategy.image.ref,
        "size": strategy.inventory.size, "warm": strategy.inventory.warm,
        "pool_max": strategy.bounds.pool_max,
        "scale": strategy.scale.to_dict() if strategy.scale else None,
        **seen.counts(),
        "scaled_reason": seen.scaled_reason,
        "scaled_at": seen.scaled.scaled_at if seen.scaled else None,
        "active_hours": str(strategy.bounds.active_hours) if strategy.bounds.active_hours else None,
        "in_force": record.in_force is not None, "gate": record.gate_id,
        "maintainer": ({"id": maintainer.id, "name": maintainer.name, "online": online}
                       if maintainer else None),
        "maintainers": maintainers_view(core, record.pool, members=seen.members, now=now, live=seen.live),
        "unplaced": seen.shares.unplaced if seen.shares else 0,
        "members": [seen.member_view(m) for m in seen.members],
        "last_attested_at": record.last_attested_at,
        "attested_age": None if record.last_attested_at is None else now - record.last_attested_at,
        "last_attestation": record.attestation,
        "needs_attention": problem is not None, "attention": problem,
        "plan": {"actions": [a.as_dict() for a in seen.plan.actions], "limit": seen.plan.limit,
                 "in_hours": seen.plan.in_hours},
        "waiting": waiting,
    }


def delete_pool(core: Core, person: Person, pool: str) -> dict:
    """``gg pool delete``: the pool's plan becomes "hold nothing", so its maintainer stops
    every member (busy ones once their flight ends); the strategy is deleted when the
    maintainer attests an empty pool, or at once when the pool holds no member."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        record = core.store.strategy_for_pool(pool)
        if record is None:
            raise NotFound(f"no pool {pool}")
        members = core.store.members(pool)
        if not members:
            finish_deleting(core, record, now, actor=person.name)
            detail = None
        else:
            if record.deleting_at is None:
                core.store.update_strategy(record.name, deleting_at=now)
            detail = (f"stopping {len(members)} member{'s' if len(members) != 1 else ''}: "
                      f"strategy {record.name} is deleted when maintainer attests an empty pool")
    return {"kind": "pool", "name": pool, "deleted": not members, "detail": detail}


def finish_deleting(core: Core, record: StrategyRecord, now: float,
                    actor: str | None = None) -> None:
    from gg.control.removals import _supersede

    _supersede(core, record.gate_id, actor or "gg", now)
    core.store.delete_strategy(record.name)
    core.event(EventKind.STRATEGY_DELETED, actor=actor, at=now, strategy=record.name,
               pool=record.pool)
