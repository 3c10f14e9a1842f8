"""Route paths, requests and answers of the action queue: approve, reject, force, pending,
and environments that require an approval (docs/approvals.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from gg.api.flights import FlightDetail, FlightRow
from gg.api.placement import EnvironmentView
from gg.api.schemas import Answer, Request

FLIGHT_APPROVE = "/v1/flights/{flight_id}/approve"
FLIGHT_REJECT = "/v1/flights/{flight_id}/reject"
FLIGHT_FORCE = "/v1/flights/{flight_id}/force"
PENDING = "/v1/pending"
ENVIRONMENT_APPROVAL = "/v1/environments/{name}/approval"


class FlightReject(Request):
    reason: Annotated[str | None, StringConstraints(max_length=500)] = None


class EnvironmentApprovalSet(Request):
    approval: Literal["required", "none"]


class PendingGate(Answer):
    """One gate a person may clear that holds a pending flight."""
    gate: str
    kind: str
    guards: str
    why: str
    who_may_clear: str  # "an admin or ada", "the flight's opener", "an admin"
    you_may_clear: bool  # whether the person who asked may clear it


class PendingFlight(FlightRow):
    """A row of ``gg flights --pending``: a flight that waits for a person."""
    pending: list[PendingGate]


class Forced(Answer):
    """``gg force F``: the gates cleared, and the flight after."""
    cleared: list[str]
    flight: FlightDetail


class EnvironmentApproval(EnvironmentView):
    changed: bool
