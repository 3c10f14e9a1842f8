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


Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class FlightApprove(Request):
    """``digest``: approve only if the flight's approval still stands for this spec (what
    the approver was shown); without it, whatever it stands for now (the answer names it)."""
    digest: Digest | None = None


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
    # an approval: the digest of the spec approving it runs, and what changed since it was
    # opened (a waiting flight) or since it was approved (a proposal), by whom
    digest: str | None = None
    changes: list[str] = []
    changed_by: str | None = None
    command: list[str] | None = None  # the command approving it runs
    change: bool = False  # a change to an approved flight, which keeps running meanwhile


class PendingFlight(FlightRow):
    """A row of ``gg flights --pending``: a flight that waits for a person."""
    pending: list[PendingGate]


class Forced(Answer):
    """``gg force F``: the gates cleared, and the flight after."""
    cleared: list[str]
    flight: FlightDetail


class EnvironmentApproval(EnvironmentView):
    changed: bool
