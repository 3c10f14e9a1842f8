"""Hooks (admin): add, list, show with the last deliveries, remove."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.hooks import Hook, HookAdd, HookDetail, HookWithSecret
from gg.control import hooks
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.post(paths.HOOKS, status_code=201, response_model=HookWithSecret)
def add_hook(body: HookAdd, request: Request, person: Person = Depends(auth.person)) -> dict:
    hook, secret = hooks.add_hook(request.app.state.core, person, url=body.url, on=body.on,
                                  environment=body.environment)
    return {"hook": hook, "secret": secret}


@router.get(paths.HOOKS, response_model=list[Hook])
def list_hooks(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return hooks.list_hooks(request.app.state.core, person)


@router.get(paths.HOOK, response_model=HookDetail)
def show_hook(hook_id: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return hooks.show_hook(request.app.state.core, person, hook_id)


@router.delete(paths.HOOK, response_model=Hook)
def remove_hook(hook_id: str, request: Request,
                      person: Person = Depends(auth.person)) -> dict:
    return hooks.remove_hook(request.app.state.core, person, hook_id)
