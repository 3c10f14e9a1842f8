"""Identity tokens (docs/jobs.md): the issuer's two public documents, a runner's mint for a
flight it holds, and an admin's key rotation."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import id_tokens as api
from gg.control import id_tokens
from gg.domain.people import Person
from gg.domain.runners import RunnerIdentity
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


def _base_url(request: Request) -> str:
    return str(request.base_url)


@router.get(api.DISCOVERY, response_model=api.Discovery)
def discovery(request: Request) -> dict:
    return id_tokens.discovery(request.app.state.core, _base_url(request), api.JWKS)


@router.get(api.JWKS, response_model=api.Jwks)
def jwks(request: Request) -> dict:
    return id_tokens.jwks(request.app.state.core)  # one read: never a write


@router.post(api.LEASE_ID_TOKEN, response_model=api.IdTokenMinted)
async def mint(flight_id: str, body: api.IdTokenAsk, request: Request,
               runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    core = request.app.state.core
    return await core.run(id_tokens.mint, runner, flight_id, epoch=body.epoch,
                          audience=body.audience, base_url=_base_url(request))


@router.post(api.SIGNING_KEY_ROTATE, response_model=api.SigningKeyRotated)
async def rotate(request: Request, person: Person = Depends(auth.person)) -> dict:
    core = request.app.state.core
    return await core.run(id_tokens.rotate, person)
