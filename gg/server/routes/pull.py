"""Pull-mode runners: ``gg runner attach`` (docs/runner-modes.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api.pull import RUNNER_ATTACH, AttachAsk
from gg.api.runners import Attached
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.post(RUNNER_ATTACH, status_code=201, response_model=Attached)
async def attach(body: AttachAsk, request: Request, person: Person = Depends(auth.person)) -> dict:
    return await request.app.state.poller.attach(person, url=body.url, name=body.name,
                                                 fingerprint=body.fingerprint)
