"""Runner groups, attributes, group drain and demand, the fleet-wide stop (docs/groups.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.groups import (
    AttributeSet,
    AttributeView,
    FleetState,
    GroupChanged,
    GroupDeleted,
    GroupDemand,
    GroupDetail,
    GroupSet,
    GroupView,
    RunnerMove,
    RunnerMoved,
)
from gg.control import groups
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.get(paths.GROUPS, response_model=list[GroupView])
def list_groups(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return groups.list_groups(request.app.state.core)


@router.put(paths.GROUP, response_model=GroupChanged)
def set_group(name: str, body: GroupSet, request: Request,
                    person: Person = Depends(auth.person)) -> dict:
    """Make or change a group (admin); what the body leaves out keeps its value."""
    return groups.set_group(request.app.state.core, person, name, attributes=body.attributes,
                            bindings=body.bindings, exclusive=body.exclusive)


@router.get(paths.GROUP, response_model=GroupDetail)
def show_group(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.show_group(request.app.state.core, name)


@router.delete(paths.GROUP, response_model=GroupDeleted)
def delete_group(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    """Refused (409) while runners or redeemable enrolment tokens reference it."""
    return groups.delete_group(request.app.state.core, person, name)


@router.post(paths.GROUP_DRAIN, response_model=GroupChanged)
def drain_group(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.set_group_drain(request.app.state.core, person, name, True)


@router.post(paths.GROUP_RESUME, response_model=GroupChanged)
def resume_group(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.set_group_drain(request.app.state.core, person, name, False)


@router.get(paths.GROUP_DEMAND, response_model=GroupDemand)
def group_demand(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.demand(request.app.state.core, name)


@router.get(paths.ATTRIBUTES, response_model=list[AttributeView])
def list_attributes(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return groups.list_attributes(request.app.state.core)


@router.put(paths.ATTRIBUTE, response_model=AttributeView)
def set_attribute(key: str, body: AttributeSet, request: Request,
                        person: Person = Depends(auth.person)) -> dict:
    return groups.set_attribute(request.app.state.core, person, key, body.values)


@router.post(paths.RUNNER_GROUP, response_model=RunnerMoved)
def move_runner(ref: str, body: RunnerMove, request: Request,
                      person: Person = Depends(auth.person)) -> dict:
    return groups.move_runner(request.app.state.core, person, ref, body.group)


@router.get(paths.FLEET, response_model=FleetState)
def fleet_state(request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.fleet_state(request.app.state.core)


@router.post(paths.FLEET_QUIESCE, response_model=FleetState)
def quiesce(request: Request, person: Person = Depends(auth.person)) -> dict:
    """No new offers anywhere until resumed (admin); running work continues."""
    return groups.quiesce(request.app.state.core, person)


@router.post(paths.FLEET_RESUME, response_model=FleetState)
def resume(request: Request, person: Person = Depends(auth.person)) -> dict:
    return groups.resume(request.app.state.core, person)
