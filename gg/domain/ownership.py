"""Whose a machine is (SPEC 11): who may change it, and what each change does.

::

    organisation <--ownership (admin)--> open --claim (anyone signed in)--> claimed(owner P)
                                          ^                                    |   ^
                                          +------------unclaim-----------------+   |
                                                               reserve / release   |
                                                           claimed + reserved <-----+

``organisation``: nobody may claim it. ``open``: anyone signed in may claim it. ``claimed``:
it belongs to one person, who (or an admin) may unclaim, reserve or release it. A reserved
runner is offered only its owner's flights (``matching.Block.RESERVED``). ``ownership`` is
admin only and always leaves the runner unowned and unreserved.

Pure: a runner and a person in, a refusal or the new values out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gg.domain.events import EventKind
from gg.domain.people import Person
from gg.domain.runners import Runner
from gg.errors import BadRequest, Conflict, Forbidden

ACTIONS = ("claim", "unclaim", "reserve", "release")
SETTABLE = ("organisation", "open")


@dataclass(frozen=True)
class Change:
    values: dict[str, Any]  # the runner columns to set; empty when nothing changes
    event: EventKind | None  # the event kind to record, or None for a harmless repeat


def decide(action: str, runner: Runner, person: Person, owner_name: str | None = None) -> Change:
    """What ``person`` doing ``action`` to ``runner`` changes; raises with one sentence when
    it is not allowed (Forbidden) or does not fit the runner's state (Conflict)."""
    if action not in ACTIONS:
        raise BadRequest(f"unknown ownership action {action!r}")
    name = runner.name
    admin = person.is_admin
    mine = runner.owner == person.id
    if action == "claim":
        if runner.ownership == "organisation":
            raise Forbidden(f"runner {name} belongs to the organisation, so nobody may claim it "
                            f"(an admin can open it: gg runner ownership {name} open)")
        if runner.ownership == "claimed":
            if mine:
                return Change({}, None)
            raise Conflict(f"runner {name} is claimed by {owner_name or runner.owner} already")
        return Change({"ownership": "claimed", "owner": person.id, "reserved": False},
                      EventKind.RUNNER_CLAIMED)
    if runner.ownership != "claimed":
        raise Conflict(f"runner {name} is not claimed by anyone; claim it first: "
                       f"gg runner claim {name}")
    if not (mine or admin):
        raise Forbidden(f"only runner {name}'s owner ({owner_name or runner.owner}) or an admin "
                        f"may {action} it")
    if action == "unclaim":
        return Change({"ownership": "open", "owner": None, "reserved": False},
                      EventKind.RUNNER_UNCLAIMED)
    if action == "reserve":
        if runner.reserved:
            return Change({}, None)
        return Change({"reserved": True}, EventKind.RUNNER_RESERVED)
    if not runner.reserved:
        return Change({}, None)
    return Change({"reserved": False}, EventKind.RUNNER_RELEASED)


def decide_ownership(state: str, runner: Runner, person: Person) -> Change:
    """An admin sets ``organisation`` or ``open``; any owner and reservation end."""
    if not person.is_admin:
        raise Forbidden("only an admin may change whose a runner is")
    if state not in SETTABLE:
        raise BadRequest(f"ownership must be organisation or open (got {state!r}); a person "
                         f"claims a runner with gg runner claim")
    if runner.ownership == state and runner.owner is None and not runner.reserved:
        return Change({}, None)
    return Change({"ownership": state, "owner": None, "reserved": False},
                  EventKind.RUNNER_OWNERSHIP_CHANGED)
