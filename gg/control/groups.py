"""Runner groups, the attribute registry, group drain and demand, and the fleet-wide stop
(SPEC section 17). Each use case is one transaction; what a group may take is decided by
:func:`gg.domain.matching.placement_blocks`, the rule the claim reads."""

from __future__ import annotations

from gg.control import runners as runner_ops
from gg.control.core import CONTROL_PLANE, Core
from gg.control.people import require_admin
from gg.domain import groups as rules
from gg.domain.events import EventKind
from gg.domain.flights import Flight
from gg.domain.groups import DEFAULT_GROUP, Attribute, Group, Placement
from gg.domain.matching import placement_blocks
from gg.domain.people import Person
from gg.errors import BadRequest, Conflict, NotFound


def placement(core: Core) -> Placement:
    """The groups and the fleet-wide stop, read once for a matching pass or a listing."""
    stop = core.store.fleet_stop()
    return Placement({g.name: g for g in core.store.groups()},
                     stop["quiesced_by"] if stop else None)


def _name(name: str) -> str:
    if problem := rules.name_problem(name):
        raise BadRequest(problem)
    return name


def _found(core: Core, name: str) -> Group:
    group = core.store.group(name)
    if group is None:
        raise NotFound(f"no group {name} (gg groups lists them)")
    return group


def group_view(core: Core, group: Group, *, members: list[tuple[str, str]] | None = None,
               count: int | None = None) -> dict:
    data = group.view()
    if members is not None:
        data["members"] = [{"id": i, "name": n} for i, n in members]
        count = len(members)
    data["runners"] = count or 0
    return data


def set_group(core: Core, person: Person, name: str, *, attributes: dict | None = None,
              bindings: list[str] | None = None, exclusive: bool | None = None) -> dict:
    """Make or change group ``name``; what is not given keeps its value."""
    require_admin(person)
    _name(name)
    if bindings is not None and (problem := rules.binding_problem(bindings)):
        raise BadRequest(problem)
    now = core.now()
    with core.store.atomic():
        if attributes is not None and (problem := rules.attribute_problem(
                attributes, core.store.attributes(), "--attr")):
            raise BadRequest(problem)
        old = core.store.group(name) or Group(name)
        new = Group(name=name,
                    attributes=dict(old.attributes if attributes is None else attributes),
                    bindings=tuple(old.bindings if bindings is None else dict.fromkeys(bindings)),
                    exclusive=old.exclusive if exclusive is None else exclusive,
                    draining=old.draining, drain_by=old.drain_by, drain_at=old.drain_at,
                    updated_at=now, updated_by=person.name)
        core.store.save_group(new, now)
        core.event(EventKind.GROUP_SET, actor=person.name, at=now, group=name,
                   attributes=dict(new.attributes), bindings=list(new.bindings),
                   exclusive=new.exclusive)
    core.signals.ready_changed()
    return group_view(core, new, members=core.store.group_members(name))


def list_groups(core: Core) -> list[dict]:
    counts = core.store.member_counts()
    return [group_view(core, g, count=counts.get(g.name, 0)) for g in core.store.groups()]


def show_group(core: Core, name: str) -> dict:
    group = _found(core, name)
    data = group_view(core, group, members=core.store.group_members(name))
    data.update(demand(core, name))
    return data


def delete_group(core: Core, person: Person, name: str) -> dict:
    """Refused while any runner or redeemable enrolment token references it, naming each."""
    require_admin(person)
    if name == DEFAULT_GROUP:
        raise BadRequest("group default is where every runner goes unless told otherwise; "
                         "it cannot be deleted")
    now = core.now()
    with core.store.atomic():
        _found(core, name)
        members = [n for _, n in core.store.group_members(name)]
        tokens = core.store.redeemable_tokens_naming(name, now)
        blockers = rules.delete_blockers(name, members, tokens)
        if blockers:
            raise Conflict(f"group {name} cannot be deleted: " + "; ".join(blockers))
        core.store.delete_group(name)
        core.event(EventKind.GROUP_DELETED, actor=person.name, at=now, group=name)
    core.signals.ready_changed()
    return {"group": name, "deleted": True}


# -- attributes ---------------------------------------------------------------------------------


def set_attribute(core: Core, person: Person, key: str, values: list[str] | None) -> dict:
    require_admin(person)
    if problem := rules.key_problem(key):
        raise BadRequest(problem)
    allowed = tuple(dict.fromkeys(values or ()))
    for value in allowed:
        if problem := rules.value_problem(value):
            raise BadRequest(f"--values: {problem}")
    now = core.now()
    with core.store.atomic():
        if allowed:  # a group that already uses another value would stop validating
            for g in core.store.groups():
                used = g.attributes.get(key)
                if used is not None and used not in allowed:
                    raise Conflict(f"group {g.name} has {key}={used}, which --values leaves "
                                   f"out; change it first: gg group set {g.name} --attr ...")
        core.store.save_attribute(Attribute(key, allowed), now, person.name)
        core.event(EventKind.ATTRIBUTE_SET, actor=person.name, at=now, key=key,
                   values=list(allowed))
    return {"key": key, "values": list(allowed)}


def list_attributes(core: Core) -> list[dict]:
    return [{"key": a.key, "values": list(a.values)} for a in core.store.attributes().values()]


# -- membership and drain -----------------------------------------------------------------------


def move_runner(core: Core, person: Person, ref: str, name: str) -> dict:
    """An admin moves runner ``ref`` to group ``name`` (which must exist)."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        runner = runner_ops.resolve(core, ref)
        _found(core, name)
        changed = runner.group != name
        if changed:
            core.store.update_runner(runner.id, group=name)
            core.event(EventKind.RUNNER_MOVED, actor=person.name, runner_id=runner.id,
                       at=now, name=runner.name, **{"from": runner.group, "to": name})
    if changed:
        core.signals.ready_changed()
    return {"runner": runner.id, "name": runner.name, "from": runner.group, "group": name,
            "changed": changed}


def set_group_drain(core: Core, person: Person, name: str, draining: bool) -> dict:
    """The durable drain flag of a group: every member reads draining and is offered
    nothing new (enforced in the matching rule, so parked claims too); running work
    continues."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        group = _found(core, name)
        changed = group.draining != draining
        if changed:
            new = Group(name=group.name, attributes=group.attributes, bindings=group.bindings,
                        exclusive=group.exclusive, draining=draining,
                        drain_by=person.name if draining else None,
                        drain_at=now if draining else None, updated_at=group.updated_at,
                        updated_by=group.updated_by)
            core.store.save_group(new, now)
            core.event(EventKind.RUNNER_GROUP_DRAIN_CHANGED, actor=person.name, at=now,
                       group=name, draining=draining)
            group = new
    if changed:
        core.signals.ready_changed()
    data = group_view(core, group, members=core.store.group_members(name))
    data["changed"] = changed
    return data


def demand(core: Core, name: str) -> dict:
    """The autoscaler's signal: ready flights group ``name``'s placement could take (a
    flight counts toward every group that could take it) and flights its runners fly."""
    group = core.store.group(name)
    if group is None:
        raise NotFound(f"no group {name} (gg groups lists them)")
    where = placement(core)
    queued = 0
    for values, n in core.store.ready_placements():
        flight = Flight(id="", command=[], opened_by="", opened_at=0.0, **values)
        if not placement_blocks(flight, group, where):
            queued += n
    return {"group": name, "queued": queued, "running": core.store.flying_in_group(name)}


# -- placing a flight at open -------------------------------------------------------------------


def check_open(core: Core, *, group: str | None, where: dict[str, str],
               environment: str | None, repo: str | None) -> None:
    """Inside the open transaction: the group exists, ``--where`` names registered
    attributes, and a group named is one the work's binding allows."""
    if group is not None:
        _name(group)
        if core.store.group(group) is None:
            raise NotFound(f"no group {group} (gg groups lists them)")
    if where and (problem := rules.attribute_problem(where, core.store.attributes(), "--where")):
        raise BadRequest(problem)
    bound = placement(core).bound_to(environment, repo)
    if refusal := rules.open_refusal(group, bound, environment, repo):
        raise BadRequest(refusal)


# -- the fleet-wide stop ------------------------------------------------------------------------


def fleet_state(core: Core) -> dict:
    stop = core.store.fleet_stop()
    return {"quiesced": stop is not None,
            "quiesced_by": stop["quiesced_by"] if stop else None,
            "quiesced_at": stop["quiesced_at"] if stop else None,
            "running": core.store.flying_count()}


def quiesce(core: Core, person: Person) -> dict:
    """No new offers anywhere (durable, until ``gg fleet resume``); running work continues."""
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        changed = core.store.quiesce(now, person.name)
        if changed:
            core.event(EventKind.FLEET_QUIESCED, actor=person.name, at=now)
        note_drained(core, now)
    core.signals.ready_changed()
    return {**fleet_state(core), "changed": changed}


def resume(core: Core, person: Person) -> dict:
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        changed = core.store.unquiesce()
        if changed:
            core.event(EventKind.FLEET_RESUMED, actor=person.name, at=now)
    core.signals.ready_changed()
    return {**fleet_state(core), "changed": changed}


def note_drained(core: Core, now: float) -> None:
    """Inside the caller's transaction: when the fleet is quiesced and nothing flies, record
    ``warn:fleet:drained`` once for this quiesce. Every path that ends a lease calls it."""
    stop = core.store.fleet_stop()
    if stop is None or stop["drained_noted"] or core.store.flying_count():
        return
    if core.store.note_fleet_drained():
        core.event(EventKind.FLEET_DRAINED, actor=CONTROL_PLANE, at=now,
                   quiesced_by=stop["quiesced_by"])
