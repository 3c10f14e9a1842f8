"""Health, whoami and people."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query, Request

from gg.api import paths
from gg.api import people as wire
from gg.api.people import PersonAdd, PersonWithToken, TokenRotate, Whoami
from gg.api.schemas import Health, Name
from gg.control import answers, people
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)

PersonName = Path(min_length=1, max_length=64)


@router.get(paths.HEALTH, response_model=Health)
def health(request: Request) -> dict:
    return answers.health(request.app.state.core)


@router.get(paths.WHOAMI, response_model=Whoami)
def whoami(request: Request, person: Person = Depends(auth.person)) -> dict:
    return answers.whoami(request.app.state.core, person)


@router.post(paths.PEOPLE, status_code=201, response_model=PersonWithToken)
def add_person(body: PersonAdd, request: Request,
                     person: Person = Depends(auth.person)) -> dict:
    return answers.person_added(request.app.state.core, person, name=body.name, admin=body.admin,
                                ttl=body.ttl)


@router.get(paths.PEOPLE, response_model=list[wire.Person])
def list_people(request: Request, removed: bool = Query(False),
                      person: Person = Depends(auth.person)) -> list[dict]:
    return people.list_people(request.app.state.core, person, removed=removed)


@router.delete(paths.PERSON, response_model=wire.Person)
def remove_person(request: Request, name: Name = PersonName,
                        person: Person = Depends(auth.person)) -> dict:
    return people.remove_person(request.app.state.core, person, name)


@router.post(paths.PERSON_TOKEN, response_model=PersonWithToken)
def rotate_token(body: TokenRotate, request: Request, name: Name = PersonName,
                       person: Person = Depends(auth.person)) -> dict:
    return answers.token_rotated(request.app.state.core, person, name, body.ttl)
