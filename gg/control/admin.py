"""What admins do to runners: cordon, drain, resume, retire, forget, and set policy.

Each is one transaction that records one event naming the person who asked. The state
machine lives in :mod:`gg.domain.admin`; the drained-by-itself step happens where leases
end (:func:`gg.control.leases._settle_runner`).

Retire and forget differ on purpose (SPEC section 4):

- **retire** keeps the row and history, marks it retired and tombstones the key so it can
  never register again. Its credential is refused from the very next request, except the
  hand-back of a lease it holds: a flight it was flying stays flying until the runner has
  stopped it and handed it back, or its lease has expired, so two attempts never overlap.
- **forget** deletes a stale registration outright, without a tombstone (the machine may
  register again), and is refused while the runner is online or holds a lease.
"""

from __future__ import annotations

from typing import Any

from gg.control import health
from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.control.people import require_admin
from gg.control.runners import resolve
from gg.domain import admin as rules
from gg.domain.events import EventKind
from gg.domain.labels import check_labels, format_labels
from gg.domain.people import Person
from gg.domain.policy import KEYS as POLICY_KEYS
from gg.domain.policy import Policy
from gg.domain.runners import AdminState, Instruction, Runner, is_online
from gg.errors import BadRequest, Conflict, NotFound


def change_state(core: Core, person: Person, ref: str, action: str) -> dict:
    """Cordon, drain or resume one runner; returns ``{runner, from, state, changed}``."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        runner = resolve(core, ref)
        change = _apply(core, person, runner, action=action, now=now)
    _signal(core, [change])
    return change


def drain_labelled(core: Core, person: Person, labels: dict[str, str]) -> list[dict]:
    """Drain every runner advertising all of ``labels`` (e.g. ``environment=ui``)."""
    require_admin(person)
    if not labels:
        raise BadRequest("name the runners to drain by at least one label, e.g. environment=ui")
    try:
        labels = check_labels(labels)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    now = core.now()
    with core.store.atomic():
        chosen = [r for r in core.store.runners()
                  if all(r.labels.get(k) == v for k, v in labels.items())]
        if not chosen:
            raise NotFound(f"no runner advertises {format_labels(labels)}")
        changes = [_apply(core, person, r, action="drain", now=now) for r in chosen]
    _signal(core, changes)
    return changes


def _apply(core: Core, person: Person, runner: Runner, *, action: str, now: float) -> dict:
    lease_ops.expire_due(core, now)
    live = core.store.live_leases(now, [runner.id]).get(runner.id, 0)
    try:
        state = rules.after_action(runner.admin_state, action, live)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if state != runner.admin_state:
        core.store.update_runner(runner.id, admin_state=state)
        core.event(EventKind.RUNNER_DRAIN_CHANGED, actor=person.name, runner_id=runner.id,
                   at=now, action=action, state=state, **{"from": runner.admin_state})
    return {"runner": runner.id, "name": runner.name, "from": runner.admin_state,
            "state": state, "changed": state != runner.admin_state,
            "message": rules.describe_change(runner.name, runner.admin_state, state)}


def _signal(core: Core, changes: list[dict]) -> None:
    for c in changes:  # told at once: a draining runner stops claiming
        if c["changed"] and c["state"] in (AdminState.DRAINING.value, AdminState.DRAINED.value):
            core.signals.instruct(c["runner"], Instruction.DRAIN)
    if any(c["changed"] and c["state"] == AdminState.ACTIVE.value for c in changes):
        core.signals.ready_changed()  # resumed: parked claims may take work at once


def retire(core: Core, person: Person, ref: str) -> tuple[Runner, list[str]]:
    """Irreversible: the credential is dead, the key tombstoned, the history kept.

    A flight the runner holds is not put back to ready here: the retired host may still be
    running it. It stays flying on its lease until the runner acknowledges the stop by
    handing it back (the one request a retired credential may still make, see
    :func:`gg.control.leases.hand_back`) or the lease expires by the clock. Returns the
    runner and the flights it is stopping."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        runner = resolve(core, ref)
        lease_ops.expire_due(core, now)
        stopping = []
        for flight in core.store.flights_held_by(runner.id):
            text = (f"runner {runner.name} was retired by {person.name}: it stops this "
                    f"flight, which becomes ready again when the runner hands it back or its "
                    f"lease ends")
            core.store.add_fact(flight_id=flight.id, epoch=flight.epoch, runner_id=None,
                                kind="note", at=now,
                                body={"text": text, "stopping": runner.id})
            stopping.append(flight.id)
        core.store.update_runner(runner.id, admin_state=AdminState.RETIRED.value, retired_at=now)
        core.store.tombstone(runner.public_key, runner.id, now)
        core.event(EventKind.RUNNER_RETIRED, actor=person.name, runner_id=runner.id, at=now,
                   name=runner.name, was=runner.admin_state, stopping=stopping)
        runner = core.runner_again(runner.id)
    core.credentials.forget(runner.id)  # its credential is refused at once
    for flight_id in stopping:
        core.signals.flight_changed(flight_id)
    return runner, stopping


def forget(core: Core, person: Person, ref: str) -> Runner:
    """Delete a stale registration (no tombstone); refused while online or holding a lease."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        runner = resolve(core, ref)
        lease_ops.expire_due(core, now)
        if is_online(runner, now, core.settings.offline_after):
            seen = now - (runner.last_seen_at or now)
            raise Conflict(f"runner {runner.name} is online (it checked in {seen:.0f}s ago): "
                           f"stop it first, or retire it")
        held = core.store.flights_held_by(runner.id)
        if held:
            raise Conflict(f"runner {runner.name} holds a lease on flight {held[0].id}: wait "
                           f"for it to end, or retire the runner")
        core.store.delete_runner(runner.id)
        core.event(EventKind.RUNNER_FORGOTTEN, actor=person.name, runner_id=runner.id, at=now,
                   name=runner.name, last_seen_at=runner.last_seen_at)
    core.credentials.forget(runner.id)
    return runner


def set_policy(core: Core, person: Person, ref: str, **asked: Any) -> Runner:
    """An admin's policy for one runner, applied on its next check-in: ``isolation``,
    ``egress``, ``allow`` (the whole egress allowlist), ``workers`` and the resource limits
    (``cpus``, ``max_memory``, ...); a key left None is not changed."""
    require_admin(person)
    unknown = sorted(k for k in asked if k not in POLICY_KEYS)
    if unknown:
        raise BadRequest(f"a policy has no {', '.join(unknown)}")
    changes = {k: v for k, v in asked.items() if v is not None}
    if not changes:
        raise BadRequest("say what to change: --isolation, --egress, --allow, --workers, "
                         "--image or a limit (--cpus, --memory, --pids, --max-cpus, "
                         "--max-memory, --max-pids)")
    if changes.get("isolation") == "none" and not core.settings.dev:
        raise BadRequest("isolation none is allowed only on a control plane started with "
                         "--dev; use sandbox or container")
    now = core.now()
    with core.store.atomic():
        runner = resolve(core, ref)
        override = {**runner.policy_override, **changes}
        try:
            new = health.policy_for(core, runner, override)
            Policy.from_dict(override)  # each value valid on its own, too
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        old = runner.policy
        core.store.update_runner(runner.id, policy_override=override)
        core.event(EventKind.RUNNER_POLICY_CHANGED, actor=person.name, runner_id=runner.id,
                   at=now, old=old, new=new.to_dict())
        more_work = health.judge(core, core.runner_again(runner.id), now, checked=False)
        runner = core.runner_again(runner.id)
    if more_work:
        core.signals.ready_changed()
    if runner.policy != old:  # told at once: it fetches and applies the new policy
        core.signals.instruct(runner.id, Instruction.POLICY_CHANGED)
    return runner


def runner_for_history(core: Core, ref: str) -> str:
    """A runner id for reading history: live, retired, or forgotten (known from events)."""
    try:
        return resolve(core, ref, include_retired=True).id
    except NotFound:
        if core.store.events(runner_id=ref, limit=1):
            return ref
        raise
