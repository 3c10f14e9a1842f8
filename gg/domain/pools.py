"""Pools beyond the plan: what a member is doing, when a pool needs attention, which strategy
changes wait for a gate, and which flights a member could take.

The planner (:mod:`gg.domain.pool_planner`) decides what a pool must do; these are the small
rules around it, pure like it (``now`` passed in, no I/O), so the control plane, ``gg pools``
and the waiting sentence all read them one way.

A member's stored state is written by the control plane only, from two sources::

    start / roll / replace  -> starting        (a new member and its one-time code)
    reset                   -> resetting       (the same member, a fresh image and code)
    an attestation says its process runs, and its runner is online
                            -> ready           (starting / resetting only)
    an attestation says its process is gone:
        it flew a flight this cycle and holds no lease   -> dirty   (reset it)
        it holds a lease                                 -> unchanged (busy until it ends)
        otherwise                                        -> stopped (remove it)
    starting / resetting, never joined, its code expired -> stopped (it never will join)

The maintainer reports facts about processes; it never names a state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gg.domain.strategies import Strategy

MEMBER_ID_PREFIX = "m_"
MEMBER_KIND = "member"  # runners.kind of a pool member's runner row
SETTLING = ("starting", "resetting")


@dataclass
class PoolMember:
    """One member as the store keeps it. ``runner_id`` names the member's one runner row
    (None until its first code is exchanged); each cycle (a start or a reset, with a new
    code) gives that row a new key and credential. ``code_hash`` is None once the cycle's
    code is spent: the member has joined."""

    id: str
    pool: str
    name: str
    state: str
    digest: str | None = None
    runner_id: str | None = None
    maintainer_id: str | None = None
    resets: int = 0
    cycle_grants: int = 0  # leases its runner had been granted when this cycle began
    code_hash: str | None = None
    code_expires_at: float | None = None
    cycle_started_at: float | None = None
    created_at: float = 0.0
    updated_at: float | None = None


@dataclass
class StrategyRecord:
    """A strategy as the control plane holds it: the last one applied, the one in force (None
    until its first gate clears), the gate still open, and its pool's attestation record."""

    name: str
    pool: str
    applied: Strategy
    in_force: Strategy | None = None
    gate_id: str | None = None
    applied_at: float | None = None
    applied_by: str | None = None
    in_force_at: float | None = None
    maintainer_id: str | None = None
    last_attested_at: float | None = None
    attestation: dict[str, Any] | None = None
    stale_noted_at: float | None = None
    deleting_at: float | None = None  # gg pool delete: hold nothing, then go


# --------------------------------------------------------------------------- members


def shown_state(state: str, *, leased: bool, flight_ended: bool) -> str:
    """The state ``gg pools`` shows: the control plane's own facts over the stored state,
    exactly as the planner reads them (a lease means busy; a flight ended means dirty)."""
    if leased:
        return "busy"
    if state in ("stopped", *SETTLING):
        return state
    if flight_ended or state == "busy":
        return "dirty"
    return state


def reconciled_state(state: str, *, running: bool, online: bool, leased: bool,
                     flew: bool, joined: bool, code_expired: bool) -> str:
    """A member's state after an attestation (see the module docstring)."""
    if not running:
        if leased:
            return state
        return "dirty" if flew else "stopped"
    if state in SETTLING:
        if online and joined:
            return "ready"
        if not joined and code_expired:
            return "stopped"
    return state


def code_refusal(code_expires_at: float | None, now: float) -> bool:
    """Whether a member code must be refused: spent (no expiry left) or past MEMBER_CODE_TTL."""
    return code_expires_at is None or now >= code_expires_at


def member_takes(requires: dict[str, str], runner_target: str | None, environment: str) -> bool:
    """Could a member of a pool serving ``environment`` take this flight? Members advertise
    exactly ``environment=<env>``, so the flight must require that and nothing else."""
    return runner_target is None and requires == {"environment": environment}


# --------------------------------------------------------------------------- attention


def attention(last_attested_at: float | None, in_force_at: float | None, now: float,
              stale_after: float) -> str | None:
    """Why a pool needs attention, or None: never attested, or attested too long ago."""
    if last_attested_at is None:
        return "never attested: is gg runner maintain running for it?"
    age = now - last_attested_at
    if age > stale_after:
        return f"last attested {_span(age)} ago (stale after {_span(stale_after)})"
    return None


def stale_since(last_attested_at: float | None, in_force_at: float | None,
                stale_after: float) -> float | None:
    """When the pool's current stale episode began (attestation or coming into force, plus
    POOL_ATTESTATION_STALE), or None when nothing is in force yet."""
    ref = last_attested_at if last_attested_at is not None else in_force_at
    return None if ref is None else ref + stale_after


def stale_event_due(last_attested_at: float | None, in_force_at: float | None,
                    stale_noted_at: float | None, now: float, stale_after: float) -> bool:
    """``warn:pool:stale`` is recorded once per stale episode: when the pool is stale now and
    nothing was noted since the episode began."""
    since = stale_since(last_attested_at, in_force_at, stale_after)
    if since is None or now <= since:
        return False
    return stale_noted_at is None or stale_noted_at < since


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


# --------------------------------------------------------------------------- strategy changes


@dataclass(frozen=True)
class Change:
    text: str
    gated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"change": self.text, "gated": self.gated}


def strategy_changes(old: Strategy | None, new: Strategy) -> list[Change]:
    """Every difference between the strategy in force and a new one, and whether it waits
    for a gate. The gate rule of profiles, for pools: more machines, other machines, other
    hours or another image wait; fewer machines apply at once."""
    if old is None:
        return [Change(f"first apply of pool {new.inventory.name} in environment "
                       f"{new.environment}", True)]
    out: list[Change] = []

    def number(label: str, was: int, now: int) -> None:
        if now > was:
            out.append(Change(f"raises {label} {was} → {now}", True))
        elif now < was:
            out.append(Change(f"lowers {label} {was} → {now}", False))

    def other(label: str, was: Any, now: Any, gated: bool = True) -> None:
        if was != now:
            out.append(Change(f"changes {label} {was or '-'} → {now or '-'}", gated))

    other("environment", old.environment, new.environment)
    number("size", old.inventory.size, new.inventory.size)
    number("warm", old.inventory.warm, new.inventory.warm)
    number("pool-max", old.bounds.pool_max, new.bounds.pool_max)
    other("active-hours", _hours(old), _hours(new))
    other("image", old.image.ref, new.image.ref)
    other("image digest", old.image.digest, new.image.digest)
    other("driver", old.driver, new.driver)
    other("command", _commands(old), _commands(new))  # other executables run on the host
    other("command join-within", old.join_within, new.join_within, gated=False)
    other("build context", old.build.context if old.build else None,
          new.build.context if new.build else None, gated=False)
    if (old.scale is None) != (new.scale is None):  # another way of growing: reviewed
        other("scale", _scale(old), _scale(new))
    elif old.scale is not None and new.scale is not None:
        number("scale min", old.scale.min, new.scale.min)
        number("scale max", old.scale.max, new.scale.max)
        for label, was, now in (("idle-after", old.scale.idle_after, new.scale.idle_after),
                                ("step", old.scale.step, new.scale.step),
                                ("cool-down", old.scale.cool_down, new.scale.cool_down)):
            other(f"scale {label}", was, now, gated=False)
    return out


def _commands(strategy: Strategy) -> str | None:
    c = strategy.command
    return None if c is None else " ".join(f"{k}={v}" for k, v in sorted(c.items()))


def _scale(strategy: Strategy) -> str | None:
    scale = strategy.scale
    return None if scale is None else f"min {scale.min} max {scale.max}"


def _hours(strategy: Strategy) -> str:
    hours = strategy.bounds.active_hours
    return str(hours) if hours else "always"
