"""How many members a pool with a ``scale:`` section should hold: one pure rule from demand.

A strategy without ``scale:`` keeps ``inventory.warm`` idle members beside its work (the
pool planner's keep-warm rule). With ``scale:`` the pool has a **desired** member count that
moves with demand, in the spirit of an autoscaler's desired replicas:

- **grow**: the flights waiting that a member could take, less the members that could take
  them soon (ready ones, and every one already starting: starting, resetting, being reset,
  rolled or replaced, or desired but not started yet), is the shortfall. Desired grows by the
  shortfall, at most ``step`` at a time (``step`` unset: as many as the shortfall), up to
  ``max``;
- **shrink**: a ready member idle for ``idle-after`` or longer, while nothing waits for it,
  may go. Desired shrinks by those members, at most ``step`` at a time, down to ``min`` (0
  allowed). Only such idle members are named to go: a member that flies (or is starting) is
  never removed by a shrink;
- **cool-down**: no grow and no shrink within ``cool-down`` seconds of the last decision (0 by
  default). The bounds are not a decision and are followed at once: desired never exceeds
  ``min(max, size, pool-max)``, and is never below ``min`` (cut to that cap).

Every change carries one sentence saying why (``scaled ui-pool from 2 to 6: 9 flights
waiting, 2 starting``), which the control plane records as an event. Nothing here reads a
clock or the store: ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCALE_KEYS = ("min", "max", "idle-after", "step", "cool-down")


@dataclass(frozen=True)
class Scale:
    """A strategy's ``scale:`` section; times in seconds, ``step`` None = what demand needs."""

    min: int
    max: int
    idle_after: float
    step: int | None = None
    cool_down: float = 0.0

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < 1:
            raise ValueError("scale: min must be 0 or more and max 1 or more")
        if self.min > self.max:
            raise ValueError(f"scale: min ({self.min}) must not exceed max ({self.max})")
        if self.idle_after < 0 or self.cool_down < 0:
            raise ValueError("scale: idle-after and cool-down must not be negative")
        if self.step is not None and self.step < 1:
            raise ValueError("scale: step must be 1 or more")

    def to_dict(self) -> dict[str, float | int | None]:
        return {"min": self.min, "max": self.max, "idle_after": self.idle_after,
                "step": self.step, "cool_down": self.cool_down}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scale:
        step = data.get("step")
        return cls(min=int(data["min"]), max=int(data["max"]),
                   idle_after=float(data["idle_after"]),
                   step=None if step is None else int(step),
                   cool_down=float(data.get("cool_down") or 0.0))


@dataclass(frozen=True)
class Scaled:
    """The pool's last decision as the control plane keeps it."""

    desired: int
    scaled_at: float | None = None


@dataclass(frozen=True)
class Demand:
    """What the pool sees right now, counted by the pool planner.

    ``idle_since`` holds each ready (idle, online, unleased) member's id and the moment it
    became idle; ``starting`` counts members on their way to ready, desired-but-not-started
    ones included; ``live`` counts the members the pool holds (not stopped)."""

    waiting: int
    starting: int
    live: int
    idle_since: tuple[tuple[str, float], ...] = ()

    @property
    def ready(self) -> int:
        return len(self.idle_since)


@dataclass(frozen=True)
class Decision:
    """Desired before and after, why it moved (None: it did not), and the idle members
    chosen to go when it shrank (longest idle first)."""

    previous: int
    desired: int
    reason: str | None = None
    going: tuple[str, ...] = ()
    cooling_until: float | None = None  # a grow or shrink held back by the cool-down

    @property
    def changed(self) -> bool:
        return self.reason is not None


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def decide(pool: str, scale: Scale, cap: int, scaled: Scaled | None, demand: Demand,
           now: float) -> Decision:
    """The desired member count of ``pool`` (see the module docstring).

    ``cap`` is what the strategy's bounds allow (``min(size, pool-max)``); ``scaled`` is the
    last decision, None before the first (desired then starts at the members the pool holds,
    within min and max).
    """
    high = min(scale.max, cap)
    low = min(scale.min, high)
    before = scaled.desired if scaled is not None else min(max(demand.live, low), high)
    if before > high:
        return Decision(before, high, f"scaled {pool} from {before} to {high}: "
                                      f"{_cap_words(scale, cap)}")
    if before < low:
        return Decision(before, low, f"scaled {pool} from {before} to {low}: min {scale.min}")
    cooling_until = None
    if scaled is not None and scaled.scaled_at is not None and scale.cool_down > 0:
        if now < scaled.scaled_at + scale.cool_down:
            cooling_until = scaled.scaled_at + scale.cool_down
    step = scale.step

    pending = max(0, before - demand.live)  # desired, not started yet: on their way too
    starting = demand.starting + pending
    shortfall = demand.waiting - demand.ready - starting
    if shortfall > 0 and before < high:
        if cooling_until is not None:
            return Decision(before, before, cooling_until=cooling_until)
        grow = min(shortfall, high - before, step if step is not None else shortfall)
        after = before + grow
        return Decision(before, after, f"scaled {pool} from {before} to {after}: "
                                       f"{_n(demand.waiting, 'flight')} waiting, "
                                       f"{starting} starting")

    surplus = demand.ready + starting - demand.waiting
    idle = sorted((since, member) for member, since in demand.idle_since
                  if now - since >= scale.idle_after)
    shrink = min(len(idle), before - low, max(0, surplus))
    if step is not None:
        shrink = min(shrink, step)
    if shrink <= 0:
        return Decision(before, before)
    if cooling_until is not None:
        return Decision(before, before, cooling_until=cooling_until)
    after = before - shrink
    waiting = "no flight waiting" if demand.waiting == 0 else \
        f"{_n(demand.waiting, 'flight')} waiting"
    return Decision(before, after,
                    f"scaled {pool} from {before} to {after}: {_n(shrink, 'member')} idle for "
                    f"{_seconds(scale.idle_after)} or more, {waiting}",
                    going=tuple(member for _, member in idle[:shrink]))


def _cap_words(scale: Scale, cap: int) -> str:
    return f"max {scale.max}" if scale.max <= cap else f"the bounds allow {cap}"
