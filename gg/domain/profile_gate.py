"""The gate rule for fleet profiles (SPEC 9): more opens a gate, less applies at once.

A profile change that lets machines do more must wait for a person to clear a gate; a change
that lets them do less is safe to apply the moment it arrives, so a narrowing is never held
hostage by a widening made in the same edit.

::

    change                                          opens a gate       applies now
    ----------------------------------------------  -----------------  ----------------
    first apply of a profile                        always             --
    roles, repository-hosts, destinations,          an item added      an item removed
      trackers, credentials
    sweeps                                          false -> true      true -> false
    environment, agent                              any change         --
    policy.isolation (container > sandbox > none)   toward none        toward container
    policy.egress (none < allowlist < all)          toward all         toward none
    policy.allow (egress allowlist entries)         an entry added     an entry removed
    policy.workers                                  raised             lowered
    policy.image                                    any change         --
    purpose                                         --                 any change
    ownership                                       --                 any change

Ownership applies at once on purpose: it is only the *initial* ownership of machines enrolled
from now on, and an admin may set exactly the same thing without any gate with
``gg fleet enroll --ownership`` or ``gg runner ownership``; gating it here would guard nothing.

Isolation and egress are ranked by ``gg.domain.policy`` (both listed weakest first), the same
order ``policy.is_looser`` reads. List items are compared by their canonical key
(``gg.domain.profiles.item_key``), so re-spelling an item is no change at all.

``applied`` is the profile *in force* (the last ``effective_profile``), not the last one
submitted: when a new apply arrives while an earlier gate is still open, judge the new profile
against what is in force and let the new gate replace the old one. When a gate clears, the
profile in force becomes the whole ``new`` profile it guarded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gg.domain.policy import EGRESSES, ISOLATIONS
from gg.domain.profiles import LIST_FIELDS, Profile, item_key

__all__ = ["Change", "ProfileChange", "effective_profile", "judge_profile_change"]

_GATE = "(opens a gate)"
_NOW = "(applies now)"


@dataclass(frozen=True)
class Change:
    """One difference between the profile in force and the new one.

    ``field`` is the YAML spelling (``repository-hosts``, ``policy.workers``, or ``profile``
    for a first apply); ``widening`` is True when the change must wait for a gate.
    """

    field: str
    description: str
    widening: bool

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "description": self.description, "widening": self.widening}


@dataclass(frozen=True)
class ProfileChange:
    """Everything an apply would change, in field order, each marked gate or now."""

    profile: str
    first_apply: bool
    changes: tuple[Change, ...]

    @property
    def widenings(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.widening)

    @property
    def narrowings(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if not c.widening)

    @property
    def needs_gate(self) -> bool:
        return any(c.widening for c in self.changes)

    @property
    def unchanged(self) -> bool:
        return not self.changes

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "first_apply": self.first_apply,
                "needs_gate": self.needs_gate, "changes": [c.to_dict() for c in self.changes]}


def judge_profile_change(applied: Profile | None, new: Profile) -> ProfileChange:
    """Sort every difference between ``applied`` (in force, or None) and ``new`` into gate/now."""
    if applied is None:
        first = Change("profile", f"first apply of profile {new.name} {_GATE}", True)
        return ProfileChange(profile=new.name, first_apply=True, changes=(first,))
    changes, _ = _judge(applied, new)
    return ProfileChange(profile=new.name, first_apply=False, changes=tuple(changes))


def effective_profile(applied: Profile | None, new: Profile,
                      change: ProfileChange | None = None) -> Profile | None:
    """What is in force right after applying ``new``: ``applied`` with the narrowings made and
    the widenings withheld. None on a first apply: nothing is in force until its gate clears.

    The result may have no roles (one role removed, another added): machines then do nothing
    until the gate clears, which is the safe reading. ``change``, when given, must be the
    judgement of this same pair; it is accepted so callers can pass along what they printed.
    """
    if change is not None and change != judge_profile_change(applied, new):
        raise ValueError("the change passed was judged for another pair of profiles")
    if applied is None:
        return None
    _, effective = _judge(applied, new)
    return effective


def _judge(applied: Profile, new: Profile) -> tuple[list[Change], Profile]:
    """The one walk over the fields that both public functions read, so they cannot disagree."""
    if applied.name != new.name:
        raise ValueError(f"cannot compare profile {applied.name} with profile {new.name}")
    changes: list[Change] = []
    kept: dict[str, Any] = {}

    if applied.purpose != new.purpose:
        changes.append(Change("purpose", f"changes purpose to {_quote(new.purpose)} {_NOW}", False))

    for wire, (attr, noun) in LIST_FIELDS.items():
        kept[attr] = _judge_list(wire, noun, getattr(applied, attr), getattr(new, attr), changes)

    for wire in ("environment", "agent"):
        old, value = getattr(applied, wire), getattr(new, wire)
        if old != value:
            changes.append(Change(wire, f"changes {wire} {old} → {value} {_GATE}", True))
            kept[wire] = old

    if applied.sweeps != new.sweeps:
        on = new.sweeps
        changes.append(Change("sweeps", f"turns sweeps {'on' if on else 'off'} "
                                        f"{_GATE if on else _NOW}", on))
        kept["sweeps"] = applied.sweeps and new.sweeps

    if applied.ownership != new.ownership:
        changes.append(Change("ownership", "changes the ownership of newly enrolled machines "
                                           f"{applied.ownership} → {new.ownership} {_NOW}", False))

    old_p, new_p = applied.policy, new.policy
    isolation = _judge_ordered("policy.isolation", "isolation", old_p.isolation, new_p.isolation,
                               lambda v: -ISOLATIONS.index(v), changes)
    egress = _judge_ordered("policy.egress", "egress", old_p.egress, new_p.egress,
                            lambda v: -EGRESSES.index(v), changes)
    allow = _judge_allow(old_p.allow, new_p.allow, changes)
    workers = new_p.workers
    if old_p.workers != new_p.workers:
        raised = new_p.workers > old_p.workers
        changes.append(Change("policy.workers",
                              f"{'raises' if raised else 'lowers'} workers {old_p.workers} → "
                              f"{new_p.workers} {_GATE if raised else _NOW}", raised))
        workers = min(old_p.workers, new_p.workers)
    image = new_p.image
    if old_p.image != new_p.image:  # other code under every container flight: a person looks
        changes.append(Change("policy.image", f"changes image {old_p.image or '(the default)'} "
                                              f"→ {new_p.image or '(the default)'} {_GATE}", True))
        image = old_p.image
    policy = replace(new_p, isolation=isolation, egress=egress, workers=workers, image=image,
                     allow=allow)
    return changes, replace(new, policy=policy, **kept)


def _judge_list(wire: str, noun: str, old: tuple[str, ...], new: tuple[str, ...],
                changes: list[Change]) -> tuple[str, ...]:
    """Record additions (gate) and removals (now); return what stays in force: the new
    spelling of every item present on both sides."""
    old_keys = {item_key(wire, v) for v in old}
    new_keys = {item_key(wire, v) for v in new}
    for value in new:
        if item_key(wire, value) not in old_keys:
            changes.append(Change(wire, f"adds {noun} {value} {_GATE}", True))
    for value in old:
        if item_key(wire, value) not in new_keys:
            changes.append(Change(wire, f"removes {noun} {value} {_NOW}", False))
    return tuple(v for v in new if item_key(wire, v) in old_keys)


def _judge_allow(old: tuple[str, ...], new: tuple[str, ...],
                 changes: list[Change]) -> tuple[str, ...]:
    """Allowlist entries (already canonical, gg.domain.egress): one added opens a gate, one
    removed applies now; in force, the entries on both sides."""
    for value in new:
        if value not in old:
            changes.append(Change("policy.allow", f"adds allowlist entry {value} {_GATE}", True))
    for value in old:
        if value not in new:
            changes.append(Change("policy.allow", f"removes allowlist entry {value} {_NOW}",
                                  False))
    return tuple(v for v in new if v in old)


def _judge_ordered(wire: str, noun: str, old: str, new: str, openness: Callable[[str], int],
                   changes: list[Change]) -> str:
    """A setting with an order: moving toward more open is loosening (gate). Returns the
    value in force."""
    if old == new:
        return new
    loosens = openness(new) > openness(old)
    changes.append(Change(wire, f"{'loosens' if loosens else 'tightens'} {noun} {old} → {new} "
                                f"{_GATE if loosens else _NOW}", loosens))
    return old if loosens else new


def _quote(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return '"' + (line if len(line) <= limit else line[: limit - 1] + "…") + '"'
