"""Service flights: list them, update one (docs/services.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import services as paths
from gg.api.services import ServiceRow, ServiceUpdate, ServiceUpdated
from gg.control import services
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.get(paths.SERVICES, response_model=list[ServiceRow])
def list_services(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return services.list_services(request.app.state.core)


@router.post(paths.SERVICE_UPDATE, response_model=ServiceUpdated)
def update(flight_id: str, body: ServiceUpdate, request: Request,
                 person: Person = Depends(auth.person)) -> dict:
    spec, gate = services.update(request.app.state.core, person, flight_id,
                                 command=body.command, env=body.env)
    return {"flight": flight_id, "spec": spec, "approval": gate}
