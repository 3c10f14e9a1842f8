"""Runners: admin state, liveness and health are three separate truths.

Admin state is set by people::

    active <--resume-- cordoned          (no new work)
    active --drain--> draining --last lease ends--> drained   (drained at once without a lease)
    cordoned|draining|drained --resume--> active
    any --retire--> retired              (irreversible: credential dead, key tombstoned)

Liveness is reported by the host: ``online`` while check-ins arrive within OFFLINE_AFTER
and no goodbye came after the last one; otherwise ``offline``. Health (``ok`` or
``degraded: <the one missing piece>``) is the server's comparison of the capability report
with the assigned policy. No field merges them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class AdminState(StrEnum):
    ACTIVE = "active"
    CORDONED = "cordoned"
    DRAINING = "draining"
    DRAINED = "drained"
    RETIRED = "retired"


ADMIN_STATES = tuple(s.value for s in AdminState)
OWNERSHIPS = ("organisation", "open", "claimed")


class Liveness(StrEnum):
    """Reported by the host: ``online`` while check-ins arrive, otherwise ``offline``."""

    ONLINE = "online"
    OFFLINE = "offline"

    @classmethod
    def of(cls, online: bool) -> "Liveness":
        return cls.ONLINE if online else cls.OFFLINE


class HealthState(StrEnum):
    """The word health starts with: ``ok``, or ``degraded: <the one missing piece>``."""

    OK = "ok"
    DEGRADED = "degraded"


@dataclass(slots=True)  # no per-instance dict: a fleet reads thousands of rows
class Runner:
    id: str
    name: str
    public_key: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    started_workers: int = 1
    admin_state: str = AdminState.ACTIVE.value
    last_seen_at: float | None = None
    goodbye_at: float | None = None
    offline_noted_at: float | None = None
    inventory: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    readings: dict[str, Any] = field(default_factory=dict)
    peer_address: str | None = None
    version: str | None = None
    version_skew: str = "unknown"
    health: str = HealthState.OK.value
    policy: dict[str, Any] = field(default_factory=dict)
    ownership: str = "organisation"
    owner: str | None = None
    reserved: bool = False
    registered_by: str | None = None
    kind: str = "registered"
    created_at: float = 0.0
    retired_at: float | None = None
    credential_expires_at: float | None = None
    checks_at: float | None = None
    profile: str | None = None
    # Enrolment (gg.domain.fitness): what the control plane knows this machine can do.
    agents: list[str] = field(default_factory=lambda: ["shell"])  # as the runner reports them
    # kind, ref, fingerprint; no secret
    credential_refs: list[dict[str, Any]] = field(default_factory=list)
    profile_in_force: dict[str, Any] = field(default_factory=dict)  # in force; {} = none
    policy_override: dict[str, Any] = field(default_factory=dict)
    policy_changed_at: float | None = None
    # Identity (gg.domain.identity): the last version pair looked up; one flight, then retired.
    skew_checked_pair: str | None = None
    ephemeral: bool = False
    group: str = "default"  # its runner group (gg.domain.groups); exactly one
    # How it reaches the control plane (gg.domain.pull): "dial" (it dials out) or "pull"
    # (the control plane polls it at ``url``).
    mode: str = "dial"
    url: str | None = None

    @property
    def healthy(self) -> bool:
        return self.health == HealthState.OK.value


@dataclass(frozen=True, slots=True)
class RunnerIdentity:
    """Who a runner credential names, as far as a credential check and a lease call need it:
    what the control plane caches for every credential it has checked (10,000 runners hold
    ~0.3 KB each here, not a whole row's ~5 KB). A route that needs the runner's changing
    fields (its policy, labels, readings, key) reads its row."""

    id: str
    name: str
    kind: str
    admin_state: str
    retired_at: float | None
    ephemeral: bool
    credential_expires_at: float | None

    @classmethod
    def of(cls, runner: Runner) -> "RunnerIdentity":
        return cls(runner.id, runner.name, runner.kind, runner.admin_state, runner.retired_at,
                   runner.ephemeral, runner.credential_expires_at)


def is_online(runner: Runner, now: float, offline_after: float) -> bool:
    if runner.last_seen_at is None:
        return False
    if runner.goodbye_at is not None and runner.goodbye_at >= runner.last_seen_at:
        return False
    return now - runner.last_seen_at < offline_after


def liveness(runner: Runner, now: float, offline_after: float) -> str:
    return Liveness.of(is_online(runner, now, offline_after)).value


def silently_gone(runner: Runner, now: float, offline_after: float) -> bool:
    """Offline without a goodbye, and this episode not yet recorded (warn:runner:aged_out)."""
    if runner.last_seen_at is None or is_online(runner, now, offline_after):
        return False
    if runner.goodbye_at is not None and runner.goodbye_at >= runner.last_seen_at:
        return False
    return runner.offline_noted_at is None or runner.offline_noted_at < runner.last_seen_at


def after_lease_ended(runner: Runner, live_leases: int) -> str:
    """Draining becomes drained by itself when its last lease ends."""
    if runner.admin_state == AdminState.DRAINING.value and live_leases == 0:
        return AdminState.DRAINED.value
    return runner.admin_state


# -- instructions: what answers a parked claim instead of a flight -------------------------------


class Instruction(StrEnum):
    """Something the runner must hear at once; it answers its parked claim (docs/lease-protocol.md).

    ``drain``: take nothing new (finish what runs); ``policy_changed``: fetch the assigned policy
    (a full check-in) and apply it; ``check_in``: send a full check-in now (the credential is due
    for renewal, or the control plane has no capability report on file); ``console``: a console
    waits to reach it: check in now (the answer names the console sessions to dial,
    docs/console.md)."""

    DRAIN = "drain"
    POLICY_CHANGED = "policy_changed"
    CHECK_IN = "check_in"
    CONSOLE = "console"


def policy_digest(policy: dict[str, Any]) -> str:
    """A short digest of an assigned policy: a claim states the one its runner applies."""
    text = json.dumps(policy or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parked_wait(wait: float, spread: float, draw: float) -> float:
    """How long a parked claim waits before "nothing for you": its ``wait`` less up to
    ``spread`` seconds (never more than a quarter of the wait), by ``draw`` in [0, 1).

    A stall (a restart, a long pause of the server) leaves every runner's claim re-parking in
    the same second, and claims that park together end together: without a spread the whole
    fleet would come back at once, every interval, for as long as the server runs. Each
    claim ending at its own moment of its last ``spread`` seconds spreads such a wave over
    that span at its next re-park, and wider at each one after."""
    if wait <= 0 or spread <= 0:
        return wait
    return wait - min(spread, wait / 4) * draw


def instruction_at_claim(runner: Runner, *, stated_policy: str | None, free_slots: int, now: float,
                         renew_window: float, renews: bool,
                         has_capabilities: bool,
                         console_unheard: bool = False) -> Instruction | None:
    """What a claim carrying a heartbeat is answered with at once, before it parks (None: park).

    A runner that should take nothing new hears ``drain``; one applying another policy than the
    assigned one hears ``policy_changed``; one whose credential is within ``renew_window`` of its
    expiry (``renews``: not a pool member, whose credential is never renewed), or that never sent
    a capability report, hears ``check_in``; one for which a console waits that no check-in
    answer has named yet (``console_unheard``) hears ``console``. The rule holds whatever was
    pushed before, so an instruction lost with a connection (or a restart) is heard on the next
    claim."""
    draining = runner.admin_state in (AdminState.DRAINING.value, AdminState.DRAINED.value)
    if draining and free_slots > 0:
        return Instruction.DRAIN
    if stated_policy is not None and stated_policy != policy_digest(runner.policy):
        return Instruction.POLICY_CHANGED
    expires = runner.credential_expires_at
    if renews and expires is not None and expires - now < renew_window:
        return Instruction.CHECK_IN
    if not has_capabilities:
        return Instruction.CHECK_IN
    if console_unheard:
        return Instruction.CONSOLE
    return None
