"""Secrets: set and remove (admin), list the names (anyone signed in). No route answers a value."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from gg.api import paths
from gg.api.secrets import Secret, SecretRemoved, SecretSet, SecretSetAnswer
from gg.control import secrets
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.put(paths.SECRET, response_model=SecretSetAnswer)
def set_secret(name: str, body: SecretSet, request: Request,
                     person: Person = Depends(auth.person)) -> dict:
    return secrets.set_secret(request.app.state.core, person, name,
                              environment=body.environment, value=body.value.encode("utf-8"))


@router.get(paths.SECRETS, response_model=list[Secret])
def list_secrets(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return secrets.list_secrets(request.app.state.core, person)


@router.delete(paths.SECRET, response_model=SecretRemoved)
def remove_secret(name: str, request: Request, person: Person = Depends(auth.person),
                        environment: str | None = Query(None, max_length=63)) -> dict:
    return secrets.remove_secret(request.app.state.core, person, name, environment)
