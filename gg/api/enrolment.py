"""Wire schemas for fleet profiles, enrolment, runner credential references and maintenance:
requests, then answers.

Like every request schema, these forbid unknown fields and bound every size. A profile is
posted as the mapping its YAML file holds (dashed keys); the server validates it with the
same function the file loader uses (``gg.airspace.profile_from_mapping``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from gg.api.runners import Registered, RunnerProfile
from gg.api.schemas import Answer, Json, KeyProof, Name, Request

Fingerprint = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{16}$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class ProfileApply(Request):
    profile: dict[str, Any]


class TokenMint(Request):
    profile: ProfileName
    uses: Annotated[int, Field(ge=0, le=10_000)] = 1  # 0: no limit until it expires
    ttl: Annotated[float | None, Field(gt=0, le=30 * 86400)] = None
    owner: Annotated[str | None, StringConstraints(min_length=1, max_length=64)] = None
    ownership: Literal["organisation", "open", "claimed"] | None = None
    ephemeral: bool = False  # each machine takes one flight, then is retired
    group: Annotated[str, StringConstraints(min_length=1, max_length=63)] = "default"


class Enrol(KeyProof):
    name: Name
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    inventory: Json = {}
    version: Annotated[str | None, StringConstraints(max_length=64)] = None


class CredentialRef(Request):
    kind: Literal["repo", "name"]
    ref: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    fingerprint: Fingerprint
    added_at: Annotated[str, StringConstraints(max_length=40)] = ""


class CredentialRefs(Request):
    refs: Annotated[list[CredentialRef], Field(max_length=500)]


class MaintenanceItem(Request):
    item: Annotated[str, StringConstraints(pattern=r"^(agent|credential|host):\S{1,500}$")]
    ok: bool
    detail: Annotated[str, StringConstraints(max_length=500)] = ""


class MaintenanceReport(Request):
    checked_at: float | None = None
    credentials_digest: Annotated[str | None, StringConstraints(pattern=r"^[0-9a-f]{32}$")] = None
    items: Annotated[list[MaintenanceItem], Field(max_length=1000)]


# -- answers ---------------------------------------------------------------------------------


class PendingGate(Answer):
    id: str
    guards: str
    opened_at: float | None = None
    who_may_clear: str


class EnrolledRunner(Answer):
    id: str
    name: str
    online: bool
    labels: dict[str, str]


class ProfileView(Answer):
    name: str
    version: int
    applied_version: int
    applied: dict[str, Any]
    applied_at: float
    applied_by: str | None = None
    in_force: dict[str, Any] | None = None
    in_force_version: int | None = None
    narrowed_by: int | None = None
    wholly_in_force: bool
    pending_gates: list[PendingGate]
    enrolled: list[EnrolledRunner]


class ProfileApplied(Answer):
    profile: str
    version: int
    unchanged: bool
    first_apply: bool
    applied_now: list[str]
    waiting: list[str]
    changes: list[dict[str, Any]]
    gate: PendingGate | None = None
    in_force_version: int | None = None
    narrowed_by: int | None = None
    dry_run: bool = False  # nothing was kept; a gate named here was not opened


class EnrolTokenView(Answer):
    fingerprint: str
    profile: str
    status: str
    uses: int  # 0: no limit until it expires
    uses_left: int | None = None  # None when there is no limit
    ephemeral: bool = False
    expires_at: float
    created_at: float
    created_by: str | None = None
    ownership: str | None = None
    owner: str | None = None
    revoked_at: float | None = None
    owner_name: str | None = None  # in listings
    group: str = "default"  # the runner group its machines join


class EnrolTokenMinted(EnrolTokenView):
    token: str  # shown this once


class Enrolled(Registered):
    profile: RunnerProfile | None = None


class CredentialRefView(Answer):
    kind: str
    ref: str
    fingerprint: str
    added_at: str = ""


class CredentialRefsSet(Answer):
    runner: str
    refs: list[CredentialRefView]


class CredentialRefRow(CredentialRefView):
    runner: str
    runner_name: str
