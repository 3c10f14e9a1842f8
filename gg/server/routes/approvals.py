"""The action queue: approve, reject, force, what waits for a person; environments that
require an approval."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import approvals as paths
from gg.api.approvals import (
    EnvironmentApproval,
    EnvironmentApprovalSet,
    FlightApprove,
    FlightReject,
    Forced,
    PendingFlight,
)
from gg.api.flights import FlightDetail
from gg.control import answers, pending
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.post(paths.FLIGHT_APPROVE, response_model=FlightDetail)
def approve(flight_id: str, request: Request, body: FlightApprove | None = None,
                  person: Person = Depends(auth.person)) -> dict:
    return answers.approved(request.app.state.core, person, flight_id,
                            body.digest if body else None)


@router.post(paths.FLIGHT_REJECT, response_model=FlightDetail)
def reject(flight_id: str, body: FlightReject, request: Request,
                 person: Person = Depends(auth.person)) -> dict:
    return answers.rejected(request.app.state.core, person, flight_id, body.reason)


@router.post(paths.FLIGHT_FORCE, response_model=Forced)
def force(flight_id: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return answers.forced(request.app.state.core, person, flight_id)


@router.get(paths.PENDING, response_model=list[PendingFlight])
def list_pending(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return pending.pending(request.app.state.core, person)


@router.put(paths.ENVIRONMENT_APPROVAL, response_model=EnvironmentApproval)
def set_approval(name: str, body: EnvironmentApprovalSet, request: Request,
                       person: Person = Depends(auth.person)) -> dict:
    return answers.environment_approval_set(request.app.state.core, person, name,
                                            body.approval == "required")
