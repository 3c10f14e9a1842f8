"""Answers about strategies and pools: for people, for a pool's maintainer, for a member."""

from __future__ import annotations

from typing import Any

from gg.api.gates import Gate
from gg.api.runners import RunnerRow
from gg.api.schemas import Answer, Protocol


class Strategy(Answer):
    name: str
    pool: str
    environment: str
    driver: str
    digest: str | None = None
    in_force: bool
    gate: str | None = None
    applied: dict[str, Any]
    strategy_in_force: dict[str, Any] | None = None
    pending: list[dict[str, Any]] = []
    applied_at: float | None = None
    applied_by: str | None = None
    in_force_at: float | None = None


class StrategyApplied(Answer):
    strategy: Strategy
    status: str
    changes: list[dict[str, Any]]
    gate: Gate | None = None
    dry_run: bool = False  # nothing was kept; a gate named here was not opened


class DigestPinned(Answer):
    strategy: Strategy
    changed: bool
    was: str | None = None


class PoolMember(Answer):
    id: str
    name: str
    pool: str
    state: str
    stored_state: str
    online: bool
    flight: str | None = None
    digest: str | None = None
    resets: int
    runner_id: str | None = None
    maintainer_id: str | None = None  # the maintainer whose host holds it
    credential_expires_at: float | None = None
    code_expires_at: float | None = None
    created_at: float | None = None
    cycle_started_at: float | None = None


class PoolMaintainer(Answer):
    id: str
    name: str
    online: bool


class MaintainerShare(Answer):
    """One of a pool's maintainers as it last checked in, and the members its host holds."""
    id: str
    name: str
    online: bool  # live: its share of the plan is handed to it
    capacity: int | None = None  # the most members its host holds; None: no limit of its own
    failing: bool = False
    checked_in_at: float | None = None
    attested_at: float | None = None
    members: list[str] = []
    backoff: dict[str, Any] | None = None


class PoolPlanSummary(Answer):
    actions: list[dict[str, Any]]
    limit: str | None = None  # why fewer members start than wanted
    in_hours: bool


class WaitingFlight(Answer):
    flight: str
    sentence: str
    remedy: str | None = None


class PoolCounts(Answer):
    """Members by what they do now; ``desired`` only for a pool with ``scale:``."""
    desired: int | None = None
    starting: int = 0  # starting, resetting, or started by this plan
    warm: int = 0  # ready and idle
    busy: int = 0  # holding a lease


class Pool(Answer):
    name: str
    strategy: str
    environment: str
    driver: str
    digest: str | None = None
    image: str
    size: int
    warm: int
    pool_max: int
    scale: dict[str, Any] | None = None  # {min, max, idle_after, step, cool_down}
    counts: PoolCounts = PoolCounts()
    scaled_reason: str | None = None  # the last scaling decision's sentence
    scaled_at: float | None = None
    active_hours: str | None = None
    in_force: bool
    gate: str | None = None
    maintainer: PoolMaintainer | None = None  # the last to act or attest
    maintainers: list[MaintainerShare] = []
    unplaced: int = 0  # starts no live maintainer has room for
    members: list[PoolMember]
    last_attested_at: float | None = None
    attested_age: float | None = None
    last_attestation: dict[str, Any] | None = None
    needs_attention: bool
    attention: str | None = None
    plan: PoolPlanSummary
    waiting: list[WaitingFlight]


class MaintainerAllowed(Answer):
    pool: str
    runner: str
    runner_name: str


class PoolImage(Answer):
    ref: str
    digest: str | None = None  # None until ``gg strategy build`` pins it


class MaintainerPlan(Answer):
    """What a pool's maintainer is served: the plan, the members, and when to ask again."""
    pool: str
    strategy: str
    environment: str
    driver: str
    image: PoolImage
    digest: str | None = None
    actions: list[dict[str, Any]]  # each {"action": kind, ...its fields} (gg.domain.pool_planner)
    unplaced: int = 0  # starts no live maintainer has room for
    in_hours: bool
    limit: str | None = None  # why fewer members start than wanted
    waiting: str | None = None
    waiting_flights: int
    scaling: str | None = None  # this plan's scaling decision, when desired moves
    command: dict[str, str] | None = None  # driver command: its executables' names
    members: list[PoolMember]
    next_plan_in: float
    server_time: float


class NewMember(Answer):
    id: str
    name: str
    pool: str
    state: str
    digest: str | None = None
    resets: int
    code_expires_at: float | None = None


class ActionTaken(Answer):
    """The control plane's side of one planned action; a new member's one-time code."""
    action: str
    member_id: str | None = None
    removed: str | None = None
    member: NewMember | None = None
    code: str | None = None  # shown this once


class Attested(Answer):
    pool: str
    members: list[PoolMember]
    unknown: list[str]
    recorded_event: bool
    never_joined: list[str] = []  # members made that never checked in before their code expired


class MemberJoined(Answer):
    runner: RunnerRow
    credential: str  # shown this once
    credential_expires_at: float
    labels: dict[str, str]
    member: str
    protocol: Protocol
