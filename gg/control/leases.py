"""Claim, renew, report, hand back, expire: the lease protocol of SPEC section 6.

Every function here runs inside one write transaction. A claim, and the dispatcher's pass
for parked claimers, is plan-then-apply: load the seats and the ready flights, let
:func:`gg.domain.matching.assign` plan who gets what (from
:func:`~gg.domain.matching.offerable`, the same rule the waiting sentence uses), then apply
each grant through :func:`gg.control.lifecycle.move`, a compare-and-set on (stage, epoch)
that passes by a flight another writer holds; a grant that lost a race is dropped.

On PostgreSQL writers of several replicas apply plans side by side (no global lock): before
its first grant to a runner a plan takes that runner's lock and counts its live leases again
(a runner another replica is granting to right now, or granted to since its seat was read, is
passed by); a concurrency key is counted again under the key's lock. A claim whose planned
flight another writer holds plans again past it (:data:`CLAIM_TRIES`). What a pass or claim
passed by because another writer held it is offered again by the next pass
(``ready_changed``).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from gg.control import attended as attended_ops
from gg.control import concurrency as concurrency_ops
from gg.control import duties as duty_ops
from gg.control import groups as group_ops
from gg.control import retries as retry_ops
from gg.control import runners as runner_ops
from gg.control import secrets as secret_ops
from gg.control import sizes as size_ops
from gg.control.core import CONTROL_PLANE, Core
from gg.control.lifecycle import move
from gg.domain import leases, output, services
from gg.domain.concurrency import Keys
from gg.domain.events import EventKind
from gg.domain.flights import Event, Flight, Outcome, Priority, Stage, changed
from gg.domain.groups import Placement
from gg.domain.matching import Assignment, Seat, any_kind_fits, assign, seat
from gg.domain.runners import AdminState, Runner, RunnerIdentity, after_lease_ended
from gg.domain.sizes import Room
from gg.errors import BadRequest, GGError


def expire_due(core: Core, now: float, *, leases_due: bool = True,
               attended_due: bool = True) -> int:
    """Record every lease past its expiry (clock comparison; no timer decides this), and
    every attended flight nobody took by its deadline; offer again every retry whose delay
    is over (gg.control.retries). The number of flights that became ready or ended.
    ``leases_due=False``: the caller read that no lease nor retry is due yet
    (``next_lease_expiry``), so neither is looked for again; ``attended_due=False``: no
    attended flight is overdue (``Store.next_looks``)."""
    if attended_due:
        attended_ops.fail_overdue(core, now)
    if not leases_due:
        return 0
    expired = core.store.expired_leases(now)
    for flight in expired:
        move(core, flight, Event.EXPIRED, now, actor=CONTROL_PLANE,
             max_expiries=core.settings.max_expiries)
        _settle_runner(core, flight.lease_runner, now)
    return len(expired) + retry_ops.release_due(core, now)


Looks = tuple[float | None, float | None]  # Store.next_looks: (next lease or retry due, first attended)


def due_now(core: Core, now: float, looks: Looks) -> tuple[bool, bool]:
    """From one read of what falls due next (``Store.next_looks``): whether a lease or a
    retry is due now, and whether an attended flight nobody took is past its deadline."""
    due, first_attended = looks
    return (due is not None and due <= now,
            attended_ops.overdue_since(core, now, first_attended))


def expire_looked(core: Core, now: float, looks: Looks | None = None) -> int:
    """:func:`expire_due`, looking only for what one read of what falls due next
    (``Store.next_looks``, or ``looks`` when the caller read it already) finds due: a claim
    or a lease's renewal that finds nothing due reads once, not three times (the overdue
    attended flights, the expired leases, the retries whose delay is over)."""
    leases_due, attended_due = due_now(
        core, now, looks if looks is not None else core.store.next_looks())
    return expire_due(core, now, leases_due=leases_due, attended_due=attended_due)


def seat_for(core: Core, runner: Runner, now: float, live: int | None = None, *,
             placement: Placement | None = None,
             rooms: dict[str, Room | None] | None = None) -> Seat:
    """The runner's seat, with its group and the fleet-wide stop read fresh: a group drained
    or a fleet quiesced while a claim sat parked is honoured at the next offer."""
    if live is None:
        live = core.store.live_leases(now, [runner.id]).get(runner.id, 0)
    if placement is None:
        placement = group_ops.placement(core)
    held = core.store.held_service_ports(now, [runner.id]).get(runner.id) if live else None
    if rooms is None:  # placement by size: what it flies, read for it alone
        rooms = size_ops.rooms(core, now, [runner], {runner.id: live})
    room = rooms.get(runner.id)
    return seat(runner, now, core.settings.offline_after, live,
                core.store.refuted_pairs(runner.id), placement, held, room)


def try_claim(core: Core, runner_id: str, free_slots: int | None = None) -> tuple[Flight, leases.Grant] | None:
    """Grant this runner the first ready flight it may be offered in the matcher's order
    (priority, then fair share between openers, oldest first within each), or None."""
    now = core.now()
    granted = None
    passed: list[str] = []
    with core.store.atomic():
        expired = expire_looked(core, now)
        if core.store.hold_runner(runner_id):
            granted = _claim(core, runner_id, free_slots=free_slots, now=now, passed=passed)
        else:  # another replica is granting it one now: the next pass looks again
            passed.append(runner_id)
    if expired or passed:
        core.signals.ready_changed()
    if granted:
        core.signals.flight_changed(granted[0].id)
    return granted


def _claim(core: Core, runner_id: str, *, free_slots: int | None, now: float,
           passed: list[str]) -> tuple[Flight, leases.Grant] | None:
    """:func:`try_claim` under the runner's lock: its seat read as it is, then the grant."""
    runner = core.store.runner(runner_id)
    if runner is None:
        return None
    s = seat_for(core, runner, now)
    if (free_slots is not None and free_slots <= 0) or s.placement.quiesced or s.group.draining:
        return None  # offered nothing: no need to read the queue
    held: set[str] = set()  # flights another replica's writer is granting this moment
    for _ in range(CLAIM_TRIES):
        before = len(passed)
        applied = _apply(core, _plan(core, [s], held), now=now, passed=passed,
                         seated={runner_id: True})
        if applied:
            return applied[0]
        if len(passed) == before:
            return None  # nothing it may take: no look further
        held.update(passed[before:])  # the next in the matcher's order, past those
    return None


def match_parked(core: Core, runner_ids: list[str]) -> list[tuple[Flight, leases.Grant]]:
    """One dispatch pass for parked claimers (``runner_ids``, longest-parked first): oldest
    flights first, first fitting seat wins. Nothing is loaded when nothing could be offered
    (no ready flight and no lease due), which keeps a pass cheap at fleet scale."""
    if not runner_ids:
        return []
    now = core.now()
    looks = core.store.next_looks()
    if not due_now(core, now, looks)[0] and not core.store.any_ready():
        return []
    runners = {r.id: r for r in core.store.runners(ids=list(runner_ids))}
    live = core.store.live_leases(now, list(runners))
    placement = group_ops.placement(core)
    if placement.quiesced:  # no new offers anywhere
        return []
    rooms = size_ops.rooms(core, now, list(runners.values()), live)  # one read for the pass
    seats = [seat_for(core, runners[rid], now, live.get(rid, 0), placement=placement,
                      rooms=rooms)
             for rid in runner_ids if rid in runners
             and not placement.group(runners[rid].group).draining]
    if not seats:
        return []
    passed: list[str] = []
    with core.store.atomic():
        expire_looked(core, now, looks)
        out = _apply(core, _plan(core, seats), now=now, passed=passed)
    for flight, _ in out:
        core.signals.flight_changed(flight.id)
    if passed:  # held by another replica's writer this moment: the next pass offers it
        core.signals.ready_changed()
    return out


def may_offer(core: Core) -> bool:
    """Whether a matching pass could grant anything now: a flight is ready or a lease due."""
    return offer_state(core)[0]


def offer_state(core: Core) -> tuple[bool, float | None]:
    """:func:`may_offer`, and when the earliest lease is due (:func:`next_expiry`): one read."""
    due, ready = core.store.offer_state()
    return ready or (due is not None and due <= core.now()), due


def next_expiry(core: Core) -> float | None:
    """When the earliest lease is due (the dispatcher arranges to look again then)."""
    return core.store.next_lease_expiry()


def expire_now(core: Core) -> int:
    """Record every expiry due now (leases, and attended flights nobody took), in one
    transaction, and wake parked claimers if a flight became ready."""
    now = core.now()
    with core.store.atomic():
        expired = expire_due(core, now)
    if expired:
        core.signals.ready_changed()
    return expired


# The ready flights a plan reads first of each (priority, opener), when it has this many seats
# or more; fewer seats read their number and one more. One claim read eight and decoded them
# all (nearly half its plan's CPU, bench/claim_plan.py) where its head nearly always fits.
READ_DEPTH = 8

# How many plans a claim makes when the flight planned for it is held by another replica's
# writer (granting it this moment): each next plan passes the held ones by. On PostgreSQL with
# several replicas their claims all plan the same queue head; without it, all but one found
# nothing, parked, and were matched again by a pass (a unit and a commit more each).
CLAIM_TRIES = 4


def _plan(core: Core, seats: list[Seat], held: AbstractSet[str] = frozenset()
          ) -> tuple[list[Assignment], Keys]:
    """The matcher's plan over the ready queue, read by turns: the oldest few ready flights
    of each (priority, opener), deeper only while the plan could differ from one over the
    whole queue (a seat is left empty, or a group cut short outranks a flight planned); and
    the concurrency keys of the flights read (a flight its key holds back is not planned).
    ``held``: flights to pass by (another writer is granting them), read past."""
    depth = min(READ_DEPTH, len(seats) + 1) + len(held)  # one claim: its head and one more
    while True:
        flights, served, deeper = core.store.ready_turns(depth)
        if held:
            flights = [f for f in flights if f.id not in held]
        keys = concurrency_ops.keys_for(core, flights)
        avoid = retry_ops.avoid_for(core, flights)  # --retry-elsewhere
        sized = size_ops.with_sizes(core, seats, [f.id for f in flights])  # their limits
        plan = assign(flights, sized, served, keys, avoid)
        if not deeper:
            return plan, keys
        cut = min(Priority(p).rank for p in deeper)
        outranked = any(Priority(a.flight.priority).rank > cut for a in plan)
        if len(plan) == len(seats) and not outranked:
            return plan, keys
        if not outranked and not _empty_seats_could_take(core, seats, plan):
            return plan, keys  # a runner that can take none of the queue reads no further
        depth *= 4


_EVERY_PRIORITY = tuple(p.value for p in Priority)


def _empty_seats_could_take(core: Core, seats: list[Seat], plan: list[Assignment]) -> bool:
    """Whether a seat the plan left empty could take some kind of ready flight: one
    statement over the ready queue's kinds, instead of reading it whole (a busy runner's, or
    a runner's whose labels no flight waiting asks for, heartbeat claim with 5,000 ready
    flights played them all: 0.5 s of CPU)."""
    taken = {a.seat.runner.id for a in plan}
    empty = [s for s in seats if s.runner.id not in taken]
    kinds = [flight for flight, _ in core.store.ready_kinds(_EVERY_PRIORITY)]
    return any_kind_fits(kinds, empty)


def _apply(core: Core, planned: tuple[list[Assignment], Keys], *, now: float,
           passed: list[str], seated: dict[str, bool] | None = None,
           ) -> list[tuple[Flight, leases.Grant]]:
    """Apply a matching plan: each grant a compare-and-set; one that lost a race, whose
    runner holds more live leases when counted again under its lock than its seat was read
    with, or whose concurrency key is full when counted again under its lock, is dropped.
    What another replica's writer held (a runner, a key, the flight) is added to ``passed``.
    ``seated``: runners whose seat was read under their lock already (a claim's own)."""
    plan, keys = planned
    out = []
    took_one: set[str] = set()  # ephemeral runners granted their one flight in this plan
    seated = dict(seated or {})  # runner id -> whether this plan may grant to it
    for a in plan:
        runner = a.seat.runner
        if runner.id not in seated:
            seated[runner.id] = _seated(core, a.seat, now, passed)
        if runner.id in took_one or not seated[runner.id]:
            continue
        may = concurrency_ops.may_grant(core, a.flight, keys)
        if not may:
            if may is None:
                passed.append(a.flight.id)
            continue
        change = move(core, a.flight, Event.GRANTED, now, actor=f"runner:{runner.name}",
                      runner_id=runner.id, ttl=core.settings.lease_ttl)
        if change is None:  # moved on, or held by another writer: the next pass looks again
            passed.append(a.flight.id)
        if change is not None:  # the row as the compare-and-set left it, without reading it
            assert change.grant is not None, "a GRANTED change carries its new lease"
            out.append((changed(a.flight, change), change.grant))
            secret_ops.delivered(core, a.flight, runner_id=runner.id,
                                 runner_name=runner.name, epoch=change.grant.epoch, now=now)
            if runner.ephemeral:
                took_one.add(runner.id)
                runner_ops.after_ephemeral_grant(core, runner, now)
    return out


def _seated(core: Core, s: Seat, now: float, passed: list[str]) -> bool:
    """Whether a plan may grant to the seat's runner: its lock taken (or already this
    transaction's) and its live leases no more than the seat was planned with."""
    rid = s.runner.id
    if not core.store.hold_runner(rid):
        passed.append(rid)
        return False
    return core.store.live_leases(now, [rid]).get(rid, 0) <= s.live_leases


def _holding(core: Core, runner: Runner | RunnerIdentity, flight_id: str, *, epoch: int, now: float,
             read: tuple[Flight | None, set[int]] | None = None) -> Flight:
    """The flight if ``runner`` holds its lease at ``epoch`` now, else the refusal. ``read``:
    the row and the runner's epochs as this transaction read them already (not read again)."""
    flight, held = read if read is not None else core.store.flight_held(flight_id, runner.id)
    return leases.check_holder(flight, runner.id, epoch, now, held)


def renew(core: Core, runner: Runner | RunnerIdentity, flight_id: str, epoch: int) -> dict:
    now = core.now()
    with core.store.atomic():
        expired = expire_looked(core, now)
        flight = _holding(core, runner, flight_id, epoch=epoch, now=now)
        change = move(core, flight, Event.RENEWED, now, ttl=core.settings.lease_ttl)
        expires = change.values["lease_expires_at"] if change else flight.lease_expires_at
    if expired:
        core.signals.ready_changed()
    return {"flight": flight_id, "epoch": epoch, "expires_at": expires, "server_time": now,
            "service": flight.service}


def report(core: Core, runner: Runner | RunnerIdentity, flight_id: str, *, epoch: int,
           facts: list[dict]) -> dict:
    now = core.now()
    stored = 0
    with core.store.atomic():
        flight = _holding(core, runner, flight_id, epoch=epoch, now=now)
        limit = flight.output_limit
        if limit is None:  # opened before output caps: the server's default
            limit = core.settings.output_limit_default
        fresh = [f for f in facts if f["kind"] == "output" and not _repeat(core, flight_id, f)]
        stored_bytes = output.admit(flight.output_bytes, limit, core.settings.output_tail, fresh)
        if stored_bytes != flight.output_bytes:
            core.store.update_flight(flight_id, output_bytes=stored_bytes)
        stored = _store_facts(core, flight, runner, epoch=epoch, facts=facts, now=now)
        if flight.service is not None:  # a generation got ready, or an update never did
            remembered = services.remember(flight.service, facts)
            if remembered is not None:
                core.store.update_flight(flight_id, service=remembered)
    if stored:
        core.signals.flight_changed(flight_id)
    return {"stored": stored, "received": len(facts)}


def _store_facts(core: Core, flight: Flight, runner: Runner | RunnerIdentity, *, epoch: int,
                 facts: list[dict], now: float) -> int:
    """Append ``facts`` of the holder checked just before, in the caller's transaction; a
    fact sent late (``ago``: a `started` that rode with the first output or the hand-back)
    is dated when it happened, never before this epoch's grant."""
    stored = 0
    for fact in facts:
        at = leases.fact_time(now, fact.get("ago"), flight.lease_granted_at)
        if core.store.add_fact(flight_id=flight.id, epoch=epoch, runner_id=runner.id,
                               kind=fact["kind"], body=fact.get("body") or {}, at=at,
                               idem_key=fact.get("key")):
            stored += 1
    return stored


def _repeat(core: Core, flight_id: str, fact: dict) -> bool:
    """A fact sent again (its key is stored already): stored once, counted once."""
    key = fact.get("key")
    return key is not None and core.store.fact_with_key(flight_id, key) is not None


def hand_back(core: Core, runner: Runner | RunnerIdentity, flight_id: str, *, epoch: int,
              outcome: str, exit_code: int | None, reason: str | None, key: str | None,
              facts: list[dict] | None = None) -> dict:
    """The holder ends its lease: landed, failed, or returned (ready again at once).

    A retired runner may still hand back, as ``returned``, a flight whose lease it holds:
    that is its acknowledgement that it stopped the flight, and only then (or when the
    lease expires) does the flight become ready for another runner. Anything else from a
    retired runner is refused with 403 ``runner_retired``.

    ``facts`` (the flight's `started`, when it ended before that was sent) are stored after
    the holder check and before the outcome, in this transaction: refused with it, or kept
    with it.
    """
    if outcome not in (o.value for o in Outcome):
        raise BadRequest(f"outcome must be landed, failed or returned (got {outcome!r})")
    now = core.now()
    retired = runner_ops.is_retired(runner)
    with core.store.atomic():
        read = core.store.flight_held(flight_id, runner.id)
        if read[0] is not None and _repeat_of_accepted(core, read[0], runner, epoch=epoch,
                                                       outcome=outcome, key=key):
            return {"flight": flight_id, "stage": read[0].stage, "repeat": True}
        if retired:  # the stop acknowledgement: its own live lease, returned, nothing else
            if outcome != Outcome.RETURNED.value:
                raise runner_ops.retired_refusal(runner)
            try:
                flight = _holding(core, runner, flight_id, epoch=epoch, now=now, read=read)
            except GGError:
                raise runner_ops.retired_refusal(runner) from None
        else:
            flight = _holding(core, runner, flight_id, epoch=epoch, now=now, read=read)
        if facts:
            _store_facts(core, flight, runner, epoch=epoch, facts=facts, now=now)
        retry = retry_ops.decide(core, flight, outcome=outcome, exit_code=exit_code,
                                 reason=reason, runner_id=runner.id, now=now)
        change = move(core, flight, Event(outcome), now, actor=f"runner:{runner.name}",
                      runner_id=runner.id, exit_code=exit_code, reason=reason, key=key,
                      retry=retry)
        if change is not None and retry is not None:  # a new attempt: ready again
            retry_ops.note(core, flight, retry, runner_id=runner.id, now=now)
        _settle_runner(core, runner.id, now)
        if change is not None:
            stage = Stage(change.to).value
        else:  # a stale reading: the stage the row has
            again = core.store.flight(flight_id)
            assert again is not None, "held just now, in this transaction"
            stage = again.stage
        # a flight of a concurrency key ended: one its key held back may start now
        frees = change is not None and concurrency_ops.frees_a_key(core, flight_id)
    if outcome == Outcome.RETURNED.value or frees or retry is not None:
        core.signals.ready_changed()
    core.signals.flight_changed(flight_id)
    return {"flight": flight_id, "stage": stage, "repeat": False}


def _repeat_of_accepted(core: Core, flight: Flight | None, runner: Runner | RunnerIdentity, *,
                        epoch: int, outcome: str, key: str | None) -> bool:
    """An identical repeat of an accepted hand-back is harmless (a lost answer retried)."""
    if flight is None or runner.id not in (flight.lease_runner,):
        return False
    if flight.stage == Stage.FLYING.value and flight.epoch == epoch:
        return False  # an accepted hand-back of this epoch moved it on: no key to look up
    if key is not None:
        stored = core.store.fact_with_key(flight.id, key)
        if stored is not None and stored["epoch"] == epoch:
            return True
    if not flight.final or flight.epoch != epoch:
        return False
    if flight.lease_runner != runner.id or flight.outcome != outcome:
        return False
    return True


def _settle_runner(core: Core, runner_id: str | None, now: float) -> None:
    """Draining becomes drained by itself when its last lease ends.

    Every path that ends a lease calls this in the same transaction: hand-back (landed,
    failed, returned), expiry, and cancelling a flying flight (``control.flights.cancel``).
    """
    group_ops.note_drained(core, now)  # a quiesced fleet whose last flight just ended
    if runner_id is None:
        return
    state = core.store.runner_state(runner_id)  # the whole row only when it matters
    if state is None or (state[0] != AdminState.DRAINING.value and not state[1]):
        return
    runner = core.store.runner(runner_id)
    if runner is not None and runner.ephemeral:  # one flight, then retired
        if not core.store.live_leases(now, [runner_id]).get(runner_id, 0):
            runner_ops.after_ephemeral_flight(core, runner, now)
        return
    if runner is None or runner.admin_state != AdminState.DRAINING.value:
        return
    live = core.store.live_leases(now, [runner_id]).get(runner_id, 0)
    new_state = after_lease_ended(runner, live)
    if new_state != runner.admin_state:
        core.store.update_runner(runner_id, admin_state=new_state)
        core.event(EventKind.RUNNER_DRAIN_CHANGED, actor=CONTROL_PLANE, runner_id=runner_id, at=now,
                   state=new_state, **{"from": runner.admin_state})


def honour_after_restart(core: Core) -> int:
    """Every flying lease gets at least one LEASE_TTL from now (no mass expiry), unless
    another replica was serving a moment ago: then the control plane never stopped (its
    runners renewed with that replica), and only this process started."""
    with core.store.atomic():
        if duty_ops.served_by_another(core):
            return 0
        return core.store.honour_leases_after_restart(core.now(), core.settings.lease_ttl)
