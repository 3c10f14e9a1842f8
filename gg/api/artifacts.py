"""Artifacts on the wire (docs/work-graphs.md): the runner's offer and uploads, the
listings people read, and the inputs a grant carries."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Request

ARTIFACTS = "/v1/flights/{flight_id}/artifacts"  # gg artifacts F
ARTIFACT = "/v1/flights/{flight_id}/artifacts/{name:path}"  # gg artifact get F NAME
LEASE_ARTIFACTS = "/v1/runner/flights/{flight_id}/artifacts"  # the runner's offer (epoch)
LEASE_ARTIFACT = "/v1/runner/flights/{flight_id}/artifacts/{name:path}"  # one body, streamed
LEASE_INPUT = "/v1/runner/flights/{flight_id}/inputs/{dependency_id}/{name:path}"
DIGEST_HEADER = "x-gg-sha256"  # an artifact's digest, on its download

ArtifactName = Annotated[str, StringConstraints(min_length=1, max_length=1000)]
Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class ArtifactOffered(Request):
    name: ArtifactName
    sha256: Digest
    size: Annotated[int, Field(ge=0, le=2 ** 53)]


class ArtifactsOffer(Request):
    epoch: int
    artifacts: Annotated[list[ArtifactOffered], Field(max_length=10_000)]


class ArtifactsNeeded(Answer):
    """The names whose body the runner must send (the others' content is stored already)."""
    needed: list[str]
    received: int


class ArtifactStored(Answer):
    name: str
    sha256: str
    size: int
    stored: bool  # False: its content was stored already (kept once)


class Artifact(Answer):
    name: str
    sha256: str
    size: int
    epoch: int
    at: float


class Artifacts(Answer):
    flight: str
    artifacts: list[Artifact]


class FlightInput(Answer):
    """An artifact a grant hands the flight: put at ``$GG_INPUTS/<dir>/<name>``."""
    flight: str
    dir: str
    name: str
    sha256: str
    size: int
