"""Route paths and request schemas of placement: environments, the root envelope, label
dispositions, ownership and plans. Kept apart from ``paths``/``schemas`` so that placement
grows without touching the core's files; the same rules apply (unknown fields refused,
every size bounded)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Request

ENVIRONMENTS = "/v1/environments"
ENVIRONMENT = "/v1/environments/{name}"
ROOT = "/v1/airspace/root"
LABELS = "/v1/labels"
RUNNER_CLAIM = "/v1/runners/{ref}/claim"  # a person claims a runner (not a runner's claim)
RUNNER_UNCLAIM = "/v1/runners/{ref}/unclaim"
RUNNER_RESERVE = "/v1/runners/{ref}/reserve"
RUNNER_RELEASE = "/v1/runners/{ref}/release"
RUNNER_OWNERSHIP = "/v1/runners/{ref}/ownership"
FLIGHT_PLAN = "/v1/flights/{flight_id}/plan"

EnvName = Annotated[str, StringConstraints(min_length=1, max_length=63)]


class EnvironmentChart(Request):
    name: EnvName
    means: Annotated[str, StringConstraints(max_length=8000)]


class RootApply(Request):
    # Checked in depth by gg.airspace.root.root_from_mapping, so a posted root is held to
    # exactly what root.yaml may say.
    environments: Annotated[list[Any], Field(max_length=1000)]
    timeout: Annotated[dict[str, Any], Field(max_length=1000)] | None = None  # ENV -> duration
    approvals: Annotated[list[Any], Field(max_length=1000)] | None = None  # ENVs needing one
    retries: Annotated[dict[str, Any], Field(max_length=1000)] | None = None  # ENV -> retries
    images: Annotated[dict[str, Any], Field(max_length=1000)] | None = None  # ENV -> image


class OwnershipSet(Request):
    ownership: Literal["organisation", "open"]


# -- answers ---------------------------------------------------------------------------------


class EnvironmentView(Answer):
    name: str
    charted: bool
    meaning: str | None = None
    pending_meaning: str | None = None
    gate: str | None = None
    gate_status: str | None = None
    in_root: bool | None = None  # None: no root envelope applied
    runners: list[str]
    advertising: int
    online: int
    measured: int
    refuted: int
    charted_at: float | None = None
    charted_by: str | None = None
    approval: Literal["required", "none"] = "none"  # every flight here waits for an approval


class EnvironmentCharted(EnvironmentView):
    changed: bool


class RootView(Answer):
    environments: list[str]
    applied_at: float
    applied_by: str | None = None
    not_in_force: list[str]
    timeouts: dict[str, float] = {}  # default run-time limit per environment, in seconds
    approvals: list[str] = []  # environments whose every flight waits for an approval
    retries: dict[str, dict] = {}  # default retries per environment (gg.domain.retries)
    images: dict[str, str] = {}  # the image a container flight in each environment runs from


class RootApplied(RootView):
    providers: dict[str, list[str]]
    dry_run: bool = False  # nothing was kept
