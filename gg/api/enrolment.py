"""Wire schemas for fleet profiles, enrolment, runner credential references and maintenance.

Like every request schema, these forbid unknown fields and bound every size. A profile is
posted as the mapping its YAML file holds (dashed keys); the server validates it with the
same function the file loader uses (``gg.airspace.profile_from_mapping``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from gg.api.schemas import Json, KeyProof, Name, Request

Fingerprint = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{16}$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class ProfileApply(Request):
    profile: dict[str, Any]


class TokenMint(Request):
    profile: ProfileName
    uses: Annotated[int, Field(ge=1, le=10_000)] = 1
    ttl: Annotated[float | None, Field(gt=0, le=30 * 86400)] = None
    owner: Annotated[str | None, StringConstraints(min_length=1, max_length=64)] = None
    ownership: Literal["organisation", "open", "claimed"] | None = None


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
