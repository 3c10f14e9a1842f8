"""Fleet profiles, enrolment tokens, enrolment, and runner credential references."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError

from gg.api import paths
from gg.api.enrolment import CredentialRefs, Enrol, MaintenanceReport, ProfileApply, TokenMint
from gg.control import credentials, enrolment, maintenance, profiles, views
from gg.domain.runners import Runner
from gg.errors import BadRequest
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.put(paths.PROFILE)
async def apply_profile(name: str, body: ProfileApply, request: Request,
                        person: dict = Depends(auth.person)) -> dict:
    """Apply a fleet profile: narrowings at once, widenings behind one admin gate."""
    return profiles.apply_profile(request.app.state.core, person, name, body.profile)


@router.get(paths.PROFILES)
async def list_profiles(request: Request, person: dict = Depends(auth.person)) -> list[dict]:
    return profiles.list_profiles(request.app.state.core)


@router.get(paths.PROFILE)
async def show_profile(name: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    return profiles.show_profile(request.app.state.core, name)


@router.post(paths.ENROL_TOKENS, status_code=201)
async def mint_token(body: TokenMint, request: Request,
                     person: dict = Depends(auth.person)) -> dict:
    """A ``gge_`` token, in this answer only."""
    core = request.app.state.core
    row, token = enrolment.mint_token(core, person, profile=body.profile, uses=body.uses,
                                      ttl=body.ttl, owner=body.owner, ownership=body.ownership)
    return {**row.view(core.now()), "token": token}


@router.get(paths.ENROL_TOKENS)
async def list_tokens(request: Request, person: dict = Depends(auth.person)) -> list[dict]:
    return enrolment.list_tokens(request.app.state.core, person)


@router.post(paths.ENROL_TOKEN_REVOKE)
async def revoke_token(fingerprint: str, request: Request,
                       person: dict = Depends(auth.person)) -> dict:
    return enrolment.revoke_token(request.app.state.core, person, fingerprint)


@router.post(paths.ENROL, status_code=201)
async def enrol(body: Enrol, request: Request) -> dict:
    """Spend one use of the ``gge_`` bearer token: register this machine's key."""
    core = request.app.state.core
    runner, credential = enrolment.enrol(
        core, auth.bearer(request), name=body.name, public_key=body.public_key,
        workers=body.workers, inventory=body.inventory, version=body.version,
        nonce=body.nonce, signature=body.signature)
    return {"runner": views.runner_view(core, runner), "credential": credential,
            "credential_expires_at": runner.credential_expires_at,
            "profile": enrolment.runner_profile(runner),
            "protocol": core.settings.protocol()}


@router.put(paths.RUNNER_CREDENTIALS)
async def set_credential_refs(body: CredentialRefs, request: Request,
                              runner: Runner = Depends(auth.runner)) -> dict:
    """The runner's whole list of credential references (never a secret)."""
    refs = credentials.set_refs(request.app.state.core, runner,
                                [r.model_dump() for r in body.refs])
    return {"runner": runner.id, "refs": refs}


@router.get(paths.CREDENTIALS)
async def list_credential_refs(request: Request, person: dict = Depends(auth.person)) -> list[dict]:
    return credentials.list_refs(request.app.state.core)


def before_check_in(request: Request, runner: Runner, agents: list[str] | None) -> dict:
    """Called by the check-in route before the core check-in (agents reported)."""
    return enrolment.on_check_in(request.app.state.core, runner, agents=agents)


def after_check_in(request: Request, runner: Runner, report: dict | None) -> None:
    """Called by the check-in route after the core check-in (maintenance report)."""
    if report is None:
        return
    try:
        checked = MaintenanceReport.model_validate(report)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadRequest(f"maintenance.{where}: {first.get('msg', 'is not valid')}") from None
    maintenance.report(request.app.state.core, request.app.state.core.store.runner(runner.id),
                       [i.model_dump() for i in checked.items],
                       credentials_digest=checked.credentials_digest)

