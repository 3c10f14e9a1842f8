"""Health, whoami and people."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.schemas import PersonAdd
from gg.control import people
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.get(paths.HEALTH)
async def health(request: Request) -> dict:
    core = request.app.state.core
    return {"ok": True, "version": core.version, "server_time": core.now()}


@router.get(paths.WHOAMI)
async def whoami(request: Request, person: dict = Depends(auth.person)) -> dict:
    org = request.app.state.core.store.organisation()
    return {"person": people.public_person(person), "organisation": org["name"] if org else None}


@router.post(paths.PEOPLE, status_code=201)
async def add_person(body: PersonAdd, request: Request, person: dict = Depends(auth.person)) -> dict:
    added, token = people.add_person(request.app.state.core, person, body.name, body.admin)
    return {"person": people.public_person(added), "token": token}


@router.get(paths.PEOPLE)
async def list_people(request: Request, person: dict = Depends(auth.person)) -> list[dict]:
    return [people.public_person(p) for p in request.app.state.core.store.people()]
