"""Taking things down: a fleet profile, an environment, a strategy and its pool.

Each is refused, naming what still uses it, while anything does: a profile while runners
(not retired) were enrolled under it or a redeemable enrolment token names it; an
environment while flights that have not ended use it or the root envelope lists it; a
strategy while its pool holds members or its maintainer is named (``gg pool delete`` first
narrows the pool to nothing, so the maintainer stops every member, and deletes the strategy
once the pool is empty). What was taken down is recorded in the event feed; history that
names it (flights, events, old gates) is kept.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain.enrolment import token_status
from gg.domain.events import EventKind
from gg.domain.people import Person
from gg.error_codes import ErrorCode
from gg.errors import Conflict, NotFound

SHOWN = 5  # names listed in a refusal before "and N more"


def _names(things: list[str]) -> str:
    shown = ", ".join(things[:SHOWN])
    return shown + (f" and {len(things) - SHOWN} more" if len(things) > SHOWN else "")


def _supersede(core: Core, gate_id: str | None, actor: str, now: float) -> None:
    gate = core.store.gate(gate_id) if gate_id else None
    if gate is not None and gate.open:
        core.store.update_gate(gate.id, status="superseded", cleared_at=now, cleared_by=actor)


def delete_profile(core: Core, person: Person, name: str) -> dict:
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        record = core.store.profile_record(name)
        if record is None:
            raise NotFound(f"no fleet profile {name}")
        runners = [r.name for r in core.store.runners_with_profile(name)]
        tokens = [t.fingerprint for t in core.store.enrol_tokens(limit=100000)
                  if t.profile == name and token_status(t, now) == "active"]
        if runners or tokens:
            uses = []
            if runners:
                uses.append(f"runner{'s' if len(runners) != 1 else ''} {_names(runners)} "
                            "(gg runner retire or forget)")
            if tokens:
                uses.append(f"enrolment token{'s' if len(tokens) != 1 else ''} "
                            f"{_names(tokens)} (gg fleet revoke)")
            raise Conflict(f"fleet profile {name} is in use by {' and '.join(uses)}; "
                           "take those down first", code=ErrorCode.IN_USE)
        _supersede(core, record.gate_id, person.name, now)
        core.store.delete_profile(name)
        core.event(EventKind.PROFILE_DELETED, actor=person.name, at=now, profile=name,
                   version=record.version)
    return {"kind": "profile", "name": name, "deleted": True, "detail": None}


def remove_environment(core: Core, person: Person, name: str) -> dict:
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        env = core.store.environment(name)
        if env is None:
            raise NotFound(f"no environment {name}")
        root = core.store.root_envelope()
        if root is not None and name in root.environments:
            raise Conflict(f"environment {name} is listed in the root envelope; remove it from "
                           "root.yaml and gg airspace apply first", code=ErrorCode.IN_USE)
        flights = core.store.unended_flights_in(name)
        if flights:
            raise Conflict(f"environment {name} is used by flight{'s' if len(flights) != 1 else ''}"
                           f" {_names(flights)}, which {'have' if len(flights) != 1 else 'has'}"
                           " not ended; let them end or cancel them (gg cancel F) first",
                           code=ErrorCode.IN_USE)
        _supersede(core, env.gate_id, person.name, now)
        core.store.delete_environment(name)
        core.event(EventKind.ENVIRONMENT_REMOVED, actor=person.name, at=now,
                   environment=name)
    return {"kind": "environment", "name": name, "deleted": True, "detail": None}


def delete_strategy(core: Core, person: Person, name: str) -> dict:
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        record = core.store.strategy(name)
        if record is None:
            raise NotFound(f"no strategy {name}")
        members = [m.name for m in core.store.members(record.pool)]
        if members:
            raise Conflict(f"strategy {name}'s pool {record.pool} still holds member"
                           f"{'s' if len(members) != 1 else ''} {_names(members)}; "
                           f"gg pool delete {record.pool} stops them first", code=ErrorCode.IN_USE)
        _supersede(core, record.gate_id, person.name, now)
        core.store.delete_strategy(name)
        core.event(EventKind.STRATEGY_DELETED, actor=person.name, at=now, strategy=name,
                   pool=record.pool)
    return {"kind": "strategy", "name": name, "deleted": True, "detail": None}
