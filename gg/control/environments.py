"""Charting environments, bringing meanings into force, and the root envelope.

``chart`` checks the meaning (a malformed one is refused with its position and nothing is
charted), opens an ``environment`` gate an admin clears, and on a re-chart holds every
waiting flight of the environment behind that gate. The meaning comes into force in the
gate's clearing hook (:func:`meaning_in_force`), which also recomputes the dispositions of
every runner stating ``environment=NAME``.

``apply_root`` stores the root envelope after checking that something provides each
environment it lists. What counts as a provider is a list of functions,
``core.wiring.providers`` (listed in ``gg.control.wiring.wired``): live runners are the first;
pools add theirs.
"""

from __future__ import annotations

from typing import Any

from gg.airspace.root import root_from_mapping
from gg.control import labels as label_ops
from gg.control.core import Core
from gg.control.gates import hold_flights, open_gate
from gg.control.people import require_admin
from gg.domain.enrolment import ProfileRecord
from gg.domain.environments import (
    Environment,
    RootEnvelope,
    gate_words,
    label_pair,
    refusal_to_fly,
    unserved,
    unserved_sentence,
)
from gg.domain.events import EventKind
from gg.domain.gates import Gate
from gg.domain.people import Person
from gg.domain.pools import StrategyRecord
from gg.domain.profiles import name_problem, takes_flights
from gg.domain.runners import is_online
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, NotFound


def live_runners(core: Core, environment: str) -> list[str]:
    """Online runners that advertise ``environment=NAME`` and whose facts do not refute it."""
    pair = label_pair(environment)
    now = core.now()
    found = []
    for runner in core.store.runners():
        if runner.labels.get("environment") != environment:
            continue
        if not takes_flights(runner.profile_in_force):  # a maintain-only machine serves none
            continue
        if not is_online(runner, now, core.settings.offline_after):
            continue
        if pair in core.store.refuted_pairs(runner.id):
            continue
        found.append(f"runner {runner.name}")
    return found


def providers_of(core: Core, environment: str) -> list[str]:
    return [p for fn in core.wiring.providers for p in fn(core, environment)]


# -- charting ----------------------------------------------------------------------------

def chart(core: Core, person: Person, name: str, means: str) -> dict:
    require_admin(person)
    problem = name_problem(name)
    if problem:
        raise BadRequest(f"environment name {name!r}: {problem}", code=ErrorCode.INVALID_NAME)
    # MeaningError (400, with line and column) before anything changes: a malformed meaning,
    # or one whose cost is unbounded or above GG_MEANING_COST_LIMIT.
    from gg.control.cel import compile_meaning  # celpy and lark: loaded by the first chart

    compile_meaning(means, core.settings.meaning_cost_limit)
    core.verdicts.warm()  # its first evaluation need not wait for a worker to start
    now = core.now()
    held: list[str] = []
    with core.store.atomic():
        env = core.store.environment(name)
        gate = _latest_gate(core, env)
        pending = gate.payload.get("meaning") if gate is not None and gate.open else None
        if env is not None and (pending == means or (pending is None and env.meaning == means)):
            return environment_view(core, name) | {"changed": False}
        first = env is None or env.meaning is None
        gate = open_gate(core, kind="environment", subject=f"environment:{name}",
                         guards=gate_words(name, first), why=f"meaning: {means}",
                         clearer="admin", actor=person.name,
                         payload={"environment": name, "meaning": means})
        core.store.save_environment(Environment(
            name=name, meaning=env.meaning if env else None, gate_id=gate.id, charted_at=now,
            charted_by=person.name, cleared_at=env.cleared_at if env else None,
            cleared_by=env.cleared_by if env else None))
        if not first:
            waiting = core.store.waiting_flights_in(name)
            hold_flights(core, gate.id, waiting)
            held = waiting
        core.event(EventKind.ENVIRONMENT_CHARTED, actor=person.name, at=now, environment=name,
                   meaning=means, gate=gate.id, rechart=not first, held=len(held))
    for flight_id in held:
        core.signals.flight_changed(flight_id)
    return environment_view(core, name) | {"changed": True}


def meaning_in_force(core: Core, gate: Gate) -> None:
    """The gate's meaning becomes the environment's meaning (inside clear_gate's transaction)."""
    name = gate.payload.get("environment")
    env = core.store.environment(name) if name else None
    if env is None or env.gate_id != gate.id:
        return
    meaning = gate.payload.get("meaning")
    core.store.save_environment(Environment(
        name=env.name, meaning=meaning, gate_id=gate.id, charted_at=env.charted_at,
        charted_by=env.charted_by, cleared_at=gate.cleared_at, cleared_by=gate.cleared_by))
    core.event(EventKind.ENVIRONMENT_IN_FORCE, actor=gate.cleared_by, environment=name,
               meaning=meaning, gate=gate.id)
    label_ops.refresh_advertising(core, label_pair(env.name))  # the name it was read by
    core.signals.ready_changed()  # a label that was refuted may be usable now


def _latest_gate(core: Core, env: Environment | None) -> Gate | None:
    return core.store.gate(env.gate_id) if env is not None and env.gate_id else None


# -- who may fly where ---------------------------------------------------------------------

def admit(core: Core, *, environment: str | None, labels: dict[str, str]) -> list[str]:
    """Check a new flight's environment and labels (inside the caller's transaction).

    Returns the gates the flight must wait behind (an environment being re-charted), or
    raises with one sentence naming the missing step.
    """
    label_ops.checked(labels)
    if "environment" in labels:
        raise BadRequest("name the environment with --env NAME, not as a label",
                         code=ErrorCode.INVALID_LABEL)
    if environment is None:
        return []
    env = core.store.environment(environment)
    gate = _latest_gate(core, env)
    open_id = gate.id if gate is not None and gate.open else None
    refusal = refusal_to_fly(environment, env, core.store.root_envelope(), open_id)
    if refusal is not None:
        code, sentence = refusal
        raise BadRequest(sentence, code=code)
    return [open_id] if open_id else []


# -- the root envelope ---------------------------------------------------------------------

def apply_root(core: Core, person: Person, mapping: Any) -> dict:
    require_admin(person)
    root = root_from_mapping(mapping)  # AirspaceError (400) for a malformed root
    now = core.now()
    with core.store.atomic():
        providers = {name: providers_of(core, name) for name in root.environments}
        missing = unserved(root.environments, providers)
        if missing:
            raise Conflict(unserved_sentence(missing, _refuted_holders(core, missing),
                                             _waiting_gates(core, missing)),
                           code=ErrorCode.ENVIRONMENT_UNSERVED)
        before = core.store.root_envelope()
        core.store.save_root_envelope(RootEnvelope(root.environments, now, person.name,
                                                   timeouts=dict(root.timeouts),
                                                   approvals=tuple(root.approvals)))
        core.store.save_root_retries(dict(root.retries))  # a table of its own (migration 970)
        core.store.save_root_images(dict(root.images))  # kept in meta (no flights column)
        optional: dict[str, Any] = {}  # each only when the root sets it
        if root.timeouts:
            optional["timeouts"] = dict(root.timeouts)
        if root.approvals:
            optional["approvals"] = list(root.approvals)
        if root.images:
            optional["images"] = dict(root.images)
        core.event(EventKind.ROOT_APPLIED, actor=person.name, at=now,
                   environments=list(root.environments),
                   before=list(before.environments) if before else None, **optional)
    return root_view(core) | {"providers": providers}


def _waiting_gates(core: Core, names: list[str]) -> dict[str, tuple[str, str]]:
    """For each environment, an open gate behind which something that would serve it waits:
    a fleet profile for it (its machines get the label when the gate clears) or a strategy."""
    found: dict[str, tuple[str, str]] = {}
    record: ProfileRecord | StrategyRecord
    for record in core.store.profile_records():
        env = record.applied.environment
        if env in names and record.gate_id and env not in found:
            found[env] = (record.gate_id, f"fleet profile {record.name}")
    for record in core.store.strategies():
        env = record.applied.environment
        if env in names and record.gate_id and env not in found:
            found[env] = (record.gate_id, f"strategy {record.name}")
    return found


def _refuted_holders(core: Core, names: list[str]) -> dict[str, list[str]]:
    """Live runners that state each environment but whose facts refute its meaning."""
    now = core.now()
    found: dict[str, list[str]] = {}
    for runner in core.store.runners():
        name = runner.labels.get("environment")
        if name in names and is_online(runner, now, core.settings.offline_after) \
                and label_pair(name) in core.store.refuted_pairs(runner.id):
            found.setdefault(name, []).append(runner.name)
    return found


def root_view(core: Core) -> dict:
    root = core.store.root_envelope()
    if root is None:
        raise NotFound("no root envelope has been applied: gg airspace apply")
    charted = {e.name: e for e in core.store.environments()}
    return {"environments": list(root.environments), "applied_at": root.applied_at,
            "applied_by": root.applied_by, "timeouts": dict(root.timeouts),
            "approvals": list(root.approvals),
            "retries": {env: r.to_wire() for env, r in core.store.root_retries().items()},
            "images": core.store.root_images(),
            "not_in_force": [n for n in root.environments
                             if n not in charted or charted[n].meaning is None]}


# -- views ---------------------------------------------------------------------------------

def environment_view(core: Core, name: str) -> dict:
    for row in environments_view(core):
        if row["name"] == name:
            return row
    raise NotFound(f"no environment {name}: gg environment chart {name} --means PREDICATE")


def environments_view(core: Core) -> list[dict]:
    """Every charted environment (and every one the root lists), with who advertises it."""
    now = core.now()
    root = core.store.root_envelope()
    stored = core.store.all_dispositions()
    runners = core.store.runners()
    approving = core.store.environments_requiring_approval()
    envs = {e.name: e for e in core.store.environments()}
    names = sorted(set(envs) | set(root.environments if root else ()))
    rows = []
    for name in names:
        env = envs.get(name)
        gate = _latest_gate(core, env)
        pair = label_pair(name)
        advertising, measured, refuted, online = [], 0, 0, 0
        for runner in runners:
            if runner.labels.get("environment") != name:
                continue
            if not takes_flights(runner.profile_in_force):
                continue
            advertising.append(runner.name)
            online += is_online(runner, now, core.settings.offline_after)
            disposition = _disposition(stored.get(runner.id), pair)
            measured += disposition == "measured"
            refuted += disposition == "refuted"
        rows.append({
            "name": name,
            "charted": env is not None,
            "meaning": env.meaning if env else None,
            "pending_meaning": (gate.payload.get("meaning")
                                if gate is not None and gate.open else None),
            "gate": gate.id if gate else None,
            "gate_status": gate.status if gate else None,
            "in_root": (name in root.environments) if root else None,
            "runners": sorted(advertising),
            "advertising": len(advertising),
            "online": online,
            "measured": measured,
            "refuted": refuted,
            "charted_at": env.charted_at if env else None,
            "charted_by": env.charted_by if env else None,
            "approval": "required" if name in approving or name in (
                root.approvals if root else ()) else "none",
        })
    return rows


def _disposition(entry: dict | None, pair: str) -> str:
    for d in (entry or {}).get("dispositions", []):
        if d["pair"] == pair:
            return d["disposition"]
    return "stated"
