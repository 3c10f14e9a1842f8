"""What people and runners are shown: admin state, liveness and health side by side."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from gg.control import health
from gg.control.core import Core
from gg.domain.flights import Flight
from gg.domain.groups import Group
from gg.domain.identity import key_fingerprint
from gg.domain.runners import AdminState, Liveness, Runner, liveness
from gg.settings import DEFAULTS, Settings

_HIDDEN = ("public_key", "skew_checked_pair")
_SHOWN = tuple(f.name for f in fields(Runner) if f.name not in _HIDDEN)


@dataclass
class Listing:
    """What the rows of one listing read once between them: owners' names by id, and each
    policy parsed (``health.describe``); a fleet's runners share a few of each."""

    owners: dict[str, str | None] = field(default_factory=dict)
    policies: dict = field(default_factory=dict)

    def owner_name(self, core: Core, owner_id: str) -> str | None:
        if owner_id not in self.owners:
            owner = core.store.person(owner_id)
            self.owners[owner_id] = owner.name if owner else None
        return self.owners[owner_id]


def runner_view(core: Core, runner: Runner, *, detail: bool = False,
                now: float | None = None, flights: list[Flight] | None = None,
                groups: dict[str, Group] | None = None, listing: Listing | None = None) -> dict:
    now = core.now() if now is None else now
    listing = listing or Listing()
    # the row's own values (the runner read for this answer is not kept: nothing is copied)
    data = {name: getattr(runner, name) for name in _SHOWN}
    data["online"] = liveness(runner, now, core.settings.offline_after) == Liveness.ONLINE.value
    data["liveness"] = Liveness.of(data["online"]).value
    data["state"] = runner.admin_state
    data["owner_name"] = listing.owner_name(core, runner.owner) if runner.owner else None
    if flights is None:
        flights = core.store.flights_held_by(runner.id)
    data.update(identity_fields(runner, flights))
    data.update(health.describe(core, runner, now, policies=listing.policies))
    data.update(group_fields(core, runner, groups))
    if not detail:
        data.pop("inventory", None)
        data.pop("capabilities", None)
    return data


def runners_view(core: Core, *, after: Runner | None = None,
                 limit: int | None = None) -> list[dict]:
    """``gg runners``: every runner's row, oldest first, or a page of them (``after`` the
    runner a page ended with, at most ``limit``)."""
    now = core.now()
    fleet = core.store.runners(after=after, limit=limit)
    held: dict[str, list[Flight]] = {}
    for flight in core.store.flights_held_by_any([r.id for r in fleet]):
        if flight.lease_runner:
            held.setdefault(flight.lease_runner, []).append(flight)
    groups = {g.name: g for g in core.store.groups()}
    listing = Listing()
    return [runner_view(core, r, now=now, flights=held.get(r.id, []), groups=groups,
                        listing=listing) for r in fleet]


def identity_fields(runner: Runner, flights: list[Flight]) -> dict:
    """What a row adds to identify the machine and what it flies: its key fingerprint (as
    ``ssh-keygen -l`` prints it), os and arch from its inventory, whether it is ephemeral,
    and the flights it holds a lease on."""
    inventory = runner.inventory or {}
    return {
        "public_key_fingerprint": key_fingerprint(runner.public_key),
        "os": inventory.get("os") if isinstance(inventory.get("os"), str) else None,
        "arch": inventory.get("arch") if isinstance(inventory.get("arch"), str) else None,
        "ephemeral": bool(runner.ephemeral),
        "current_flights": [{"id": f.id, "attempt": f.attempt, "epoch": f.epoch,
                             "started_at": f.lease_granted_at, "title": f.title}
                            for f in flights],
    }


def group_fields(core: Core, runner: Runner, groups: dict[str, Group] | None = None) -> dict:
    """A runner row's group fields: its group, whether the group drains (every member reads
    draining), and the group's placement posture."""
    group = (groups.get(runner.group) if groups is not None
             else core.store.group(runner.group)) or Group(runner.group)
    fields = {"group": group.name, "group_draining": group.draining,
              "group_attributes": dict(group.attributes), "group_exclusive": group.exclusive}
    if group.draining and runner.admin_state == AdminState.ACTIVE.value:
        fields["state"] = "draining"  # every member of a draining group reads draining
    return fields


def flight_for_runner(flight: Flight, settings: Settings = DEFAULTS) -> dict:
    """Only what a runner needs to fly it: what its spec runs, and this attempt."""
    spec = flight.spec
    return {"id": flight.id, "title": spec.title, "command": list(spec.command),
            "repo": spec.repo, "agent": spec.agent, "environment": spec.environment,
            "attempt": flight.attempt, "epoch": flight.epoch, "kind": spec.kind,
            "timeout": spec.timeout, "service": spec.service,
            **output_allowance(flight, settings)}


def output_allowance(flight: Flight, settings: Settings) -> dict:
    """What a runner may still send of a flight's output, and the tail it keeps past that."""
    limit = settings.output_limit_default if flight.output_limit is None else flight.output_limit
    return {"output_room": max(0, limit - flight.output_bytes), "output_tail": settings.output_tail}
