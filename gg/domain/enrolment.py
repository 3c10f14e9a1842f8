"""Profiles as the control plane keeps them, enrolment tokens, and an enrolled machine's
labels: the pure rules of SPEC 5 "Enrolment" and SPEC 9.

A profile has two faces::

    applied    the last profile an admin applied (version N)
    in force   what machines may do now: the applied profile with every narrowing made and
               every widening withheld until its gate clears (gg.domain.profile_gate)

    apply --(no widening)--------------> in force = applied (version N)
    apply --(widening)--> gate open ----> in force = previous in force, narrowed by N
                             |  clear
                             v
                          in force = applied (version N)

An enrolment token's status, for the listing only (a refused exchange never says which)::

    active      can still be spent
    expired     its time ran out          <- wins over everything else
    revoked     an admin revoked it
    exhausted   every use has been spent  (never, for a token minted with ``uses = 0``:
                                           spendable without limit until it expires)

A token minted ``ephemeral`` enrols ephemeral runners: each takes one flight, then the control
plane retires it (gg.control.runners.after_ephemeral_flight).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gg.domain.profiles import Profile, item_key

__all__ = ["UNLIMITED_USES", "EnrolToken", "ProfileRecord", "enrolled_labels", "expected_items", "refs_digest",
           "token_status"]

MAX_USES = 10_000
UNLIMITED_USES = 0  # ``--uses 0``: any number of machines until the token expires
MAX_TTL = 30 * 86400.0


@dataclass(frozen=True)
class ProfileRecord:
    name: str
    version: int
    applied: Profile
    applied_at: float
    applied_by: str | None
    in_force: Profile | None
    in_force_version: int | None
    narrowed_by: int | None  # a later version whose narrowings are in force on top
    gate_id: str | None  # the open gate guarding version ``version``'s widenings

    @property
    def wholly_in_force(self) -> bool:
        return self.gate_id is None and self.in_force_version == self.version


@dataclass(frozen=True)
class EnrolToken:
    fingerprint: str
    profile: str
    uses: int
    uses_left: int
    expires_at: float
    created_at: float
    created_by: str | None = None
    ownership: str | None = None
    owner: str | None = None
    revoked_at: float | None = None
    revoked_by: str | None = None
    group: str = "default"  # the runner group its machines join (gg.domain.groups)
    ephemeral: bool = False

    @property
    def unlimited(self) -> bool:
        """Minted with ``uses = 0``: no limit on uses until it expires."""
        return self.uses == UNLIMITED_USES

    def status(self, now: float) -> str:
        return token_status(self, now)

    def view(self, now: float) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "profile": self.profile,
                "status": self.status(now), "uses": self.uses,
                "uses_left": None if self.unlimited else self.uses_left,
                "ephemeral": self.ephemeral,
                "expires_at": self.expires_at, "created_at": self.created_at,
                "created_by": self.created_by, "ownership": self.ownership,
                "owner": self.owner, "revoked_at": self.revoked_at, "group": self.group}


def token_status(token: EnrolToken, now: float) -> str:
    """``expired`` wins, then ``revoked``, then ``exhausted``; otherwise ``active``."""
    if now >= token.expires_at:
        return "expired"
    if token.revoked_at is not None:
        return "revoked"
    if token.uses_left <= 0 and not token.unlimited:
        return "exhausted"
    return "active"


def enrolled_labels(in_force: Profile | None) -> dict[str, str]:
    """Exactly ``environment=<profile's environment>`` while a profile is in force, else none."""
    return {"environment": in_force.environment} if in_force is not None else {}


def expected_items(profile: Profile | None) -> dict[str, str]:
    """Every item a machine of ``profile`` must confirm (SPEC 10), each with how a person
    provides it. The runner checks exactly these and the control plane gates on exactly
    these: ``agent:NAME``, ``credential:SLUG-OR-NAME``, ``host:HOST[:PORT]``."""
    if profile is None:
        return {}
    items = {f"agent:{profile.agent}": (
        f"install agent {profile.agent} and name it in agents.toml in the runner's state "
        "directory")}
    for ref in profile.credentials:
        flag = "--repo" if "/" in ref else "--name"
        key = item_key("credentials", ref)
        items[f"credential:{key}"] = f"on that machine: gg credential add {flag} {key}"
    for host in profile.repository_hosts:
        items[f"host:{host}"] = f"let the machine reach {host} (network, firewall, DNS)"
    return items


def refs_digest(refs: Iterable[Mapping[str, Any]]) -> str:
    """One short name for a set of credential references (kind, ref, fingerprint).

    A maintenance report carries the digest of the store it was checked against; when that
    is not the set the runner last registered, the report's credential items are stale (a
    ``gg credential add`` happened meanwhile) and the control plane ignores them rather than
    reopening a gate the machine has just confirmed.
    """
    lines = sorted(f"{r.get('kind')}\0{r.get('ref')}\0{r.get('fingerprint')}" for r in refs)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]
