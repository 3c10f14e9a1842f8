"""Fleet profiles, enrolment tokens, enrolment, and runner credential references."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.enrolment import (
    CredentialRefRow,
    CredentialRefs,
    CredentialRefsSet,
    Enrol,
    Enrolled,
    EnrolTokenMinted,
    EnrolTokenView,
    ProfileApplied,
    ProfileApply,
    ProfileView,
    TokenMint,
)
from gg.api.schemas import Removed
from gg.control import answers, credentials, enrolment, profiles, removals
from gg.control.dry_run import maybe_dry
from gg.domain.people import Person
from gg.domain.runners import Runner
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.put(paths.PROFILE, response_model=ProfileApplied)
def apply_profile(name: str, body: ProfileApply, request: Request,
                        person: Person = Depends(auth.person), dry_run: bool = False) -> dict:
    """Apply a fleet profile: narrowings at once, widenings behind one admin gate
    (``dry_run``: what it would do, nothing kept)."""
    return maybe_dry(request.app.state.core, dry_run, profiles.apply_profile, person, name,
                     body.profile)


@router.get(paths.PROFILES, response_model=list[ProfileView])
def list_profiles(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return profiles.list_profiles(request.app.state.core)


@router.get(paths.PROFILE, response_model=ProfileView)
def show_profile(name: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return profiles.show_profile(request.app.state.core, name)


@router.post(paths.ENROL_TOKENS, status_code=201, response_model=EnrolTokenMinted)
def mint_token(body: TokenMint, request: Request,
                     person: Person = Depends(auth.person)) -> dict:
    """A ``gge_`` token, in this answer only."""
    return answers.token_minted(request.app.state.core, person, profile=body.profile,
                                uses=body.uses, ttl=body.ttl, owner=body.owner,
                                ownership=body.ownership, ephemeral=body.ephemeral,
                                group=body.group)


@router.get(paths.ENROL_TOKENS, response_model=list[EnrolTokenView])
def list_tokens(request: Request, person: Person = Depends(auth.person)) -> list[dict]:
    return enrolment.list_tokens(request.app.state.core, person)


@router.post(paths.ENROL_TOKEN_REVOKE, response_model=EnrolTokenView)
def revoke_token(fingerprint: str, request: Request,
                       person: Person = Depends(auth.person)) -> dict:
    return enrolment.revoke_token(request.app.state.core, person, fingerprint)


@router.post(paths.ENROL, status_code=201, response_model=Enrolled)
def enrol(body: Enrol, request: Request) -> dict:
    """Spend one use of the ``gge_`` bearer token: register this machine's key."""
    return answers.enrolled(request.app.state.core, auth.bearer(request), name=body.name,
                            public_key=body.public_key, workers=body.workers,
                            inventory=body.inventory, version=body.version, nonce=body.nonce,
                            signature=body.signature)


@router.put(paths.RUNNER_CREDENTIALS, response_model=CredentialRefsSet)
def set_credential_refs(body: CredentialRefs, request: Request,
                              runner: Runner = Depends(auth.runner)) -> dict:
    """The runner's whole list of credential references (never a secret)."""
    return answers.refs_set(request.app.state.core, runner, [r.model_dump() for r in body.refs])


@router.get(paths.CREDENTIALS, response_model=list[CredentialRefRow])
def list_credential_refs(request: Request,
                               person: Person = Depends(auth.person)) -> list[dict]:
    return credentials.list_refs(request.app.state.core)


@router.delete(paths.PROFILE, response_model=Removed)
def delete_profile(name: str, request: Request,
                         person: Person = Depends(auth.person)) -> dict:
    """Delete a fleet profile no runner and no redeemable token uses."""
    return removals.delete_profile(request.app.state.core, person, name)
