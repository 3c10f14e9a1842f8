"""Placement for people: environments, the root envelope, labels, ownership, plans."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI, Request

from gg.api import placement as paths
from gg.api.flights import Plan
from gg.api.placement import (
    EnvironmentChart,
    EnvironmentCharted,
    EnvironmentView,
    OwnershipSet,
    RootApplied,
    RootApply,
    RootView,
)
from gg.api.runners import LabelDispositions, OwnershipChanged
from gg.api.schemas import Removed
from gg.control import answers, environments, ownership, plan, removals
from gg.control.dry_run import maybe_dry
from gg.domain.people import Person
from gg.server import auth
from gg.server.deadlines import AttendedWake
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


def install(app: FastAPI) -> None:
    """What placement needs beside its routes (``create_app`` includes the router)."""
    app.state.attended_wake = AttendedWake(app.state.core)


@router.post(paths.ENVIRONMENTS, status_code=201, response_model=EnvironmentCharted)
def chart(body: EnvironmentChart, request: Request,
                person: Person = Depends(auth.person)) -> dict:
    return environments.chart(request.app.state.core, person, body.name, body.means)


@router.get(paths.ENVIRONMENTS, response_model=list[EnvironmentView])
def list_environments(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return environments.environments_view(request.app.state.core)


@router.get(paths.ENVIRONMENT, response_model=EnvironmentView)
def show_environment(name: str, request: Request,
                           person: Person = Depends(auth.person)) -> dict:
    return environments.environment_view(request.app.state.core, name)


@router.put(paths.ROOT, response_model=RootApplied)
def apply_root(body: RootApply, request: Request, person: Person = Depends(auth.person),
                     dry_run: bool = False) -> dict:
    return maybe_dry(request.app.state.core, dry_run, environments.apply_root, person,
                     body.model_dump())


@router.get(paths.ROOT, response_model=RootView)
def show_root(request: Request, person: Person = Depends(auth.person)) -> dict:
    return environments.root_view(request.app.state.core)


@router.get(paths.LABELS, response_model=list[LabelDispositions])
async def list_labels(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return await answers.labels_listed(request.app.state.core)


def _ownership_route(path: str, action: str) -> None:
    def act(ref: str, request: Request, person: Person = Depends(auth.person)) -> dict:
        return ownership.change(request.app.state.core, person, ref, action)

    act.__name__ = f"runner_{action}"
    router.post(path, name=f"runner_{action}", response_model=OwnershipChanged,
                summary=f"{action.capitalize()} a runner (whose a machine is, SPEC 11)")(act)


for _path, _action in ((paths.RUNNER_CLAIM, "claim"), (paths.RUNNER_UNCLAIM, "unclaim"),
                       (paths.RUNNER_RESERVE, "reserve"), (paths.RUNNER_RELEASE, "release")):
    _ownership_route(_path, _action)


@router.post(paths.RUNNER_OWNERSHIP, response_model=OwnershipChanged)
def set_ownership(ref: str, body: OwnershipSet, request: Request,
                        person: Person = Depends(auth.person)) -> dict:
    return ownership.set_ownership(request.app.state.core, person, ref, body.ownership)


@router.get(paths.FLIGHT_PLAN, response_model=Plan)
def flight_plan(flight_id: str, request: Request,
                      person: Person = Depends(auth.person)) -> dict:
    return plan.plan_for(request.app.state.core, flight_id)


@router.delete(paths.ENVIRONMENT, response_model=Removed)
def remove_environment(name: str, request: Request,
                             person: Person = Depends(auth.person)) -> dict:
    return removals.remove_environment(request.app.state.core, person, name)
