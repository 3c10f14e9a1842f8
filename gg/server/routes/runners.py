"""Runner endpoints: registration, check-in, goodbye, credentials; listings.

The claim (long-poll) and the lease calls are answered ahead of the framework and
documented by routes made from the same bodies (``claims.py``, ``lease_calls.py``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response

from gg.api import paths
from gg.api.enrolment import MaintenanceReport
from gg.api.runners import (
    Challenge,
    CheckedIn,
    CredentialRenewed,
    KeyNonce,
    Registered,
    RunnerDetail,
    RunnerRow,
)
from gg.api.schemas import CheckIn, CredentialRenew, KeyNonceAsk, Ok, RunnerRegister
from gg.control import answers, key_proof, runners
from gg.domain.people import Person
from gg.domain.runners import Runner, RunnerIdentity
from gg.errors import BadRequest, TooManyRequests
from gg.server import auth
from gg.server.json_body import JsonRoute
from gg.server.off_loop import answered_off_loop, off_loop

router = APIRouter(route_class=JsonRoute)
RUNNERS_PAGE_MAX = 1000  # the most runners one page holds (as a page of flights)
RUNNER_ROW = TypeAdapter(RunnerRow)


@router.post(paths.KEY_NONCES, status_code=201, response_model=KeyNonce)
async def key_nonce(body: KeyNonceAsk, request: Request) -> dict:
    """A single-use nonce for the private key to sign (no token: the request it is spent on
    carries the token; the nonce alone grants nothing). Limited per address."""
    core = request.app.state.core
    if not request.app.state.nonce_rate.allow(request.client.host if request.client else "",
                                              time.monotonic()):
        raise TooManyRequests("too many key proofs asked from this address; try again in a "
                              "minute")
    # the limit on the loop (its buckets are the loop's); the control key read off it
    return await off_loop(key_proof.issue, core, body.purpose, body.public_key)


@router.post(paths.RUNNERS, status_code=201, response_model=Registered)
async def register(body: RunnerRegister, request: Request,
                   person: Person = Depends(auth.person)) -> dict:
    return await answers.registered(
        request.app.state.core, person, name=body.name, public_key=body.public_key,
        labels=body.labels, workers=body.workers, inventory=body.inventory,
        version=body.version, nonce=body.nonce, signature=body.signature)


@router.get(paths.RUNNERS, response_model=list[RunnerRow])
async def list_runners(request: Request, person: Person = Depends(auth.person),
                       limit: Annotated[int | None, Query(ge=1, le=RUNNERS_PAGE_MAX)] = None,
                       after: Annotated[str | None, Query(max_length=100)] = None) -> Response:
    """Every runner, oldest first; with ``limit``, a page of at most that many, the next page
    starting ``after`` the id of the page's last runner."""
    return await answered_off_loop(RUNNER_ROW, answers.runners_listed,
                                   request.app.state.core, after=after, limit=limit)


@router.get(paths.RUNNER, response_model=RunnerDetail)
def show_runner(ref: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return answers.runner_shown(request.app.state.core, ref)


@router.get(paths.RUNNER_BY_FINGERPRINT, response_model=RunnerDetail)
def runner_by_fingerprint(request: Request, fingerprint: str = Query(max_length=100),
                                person: Person = Depends(auth.person)) -> dict:
    return answers.runner_by_fingerprint(request.app.state.core, fingerprint)


@router.post(paths.RUNNER_CHECK_IN, response_model=CheckedIn)
async def check_in(body: CheckIn, request: Request,
                   runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    report = _maintenance(body.maintenance) if body.maintenance is not None else None
    return await answers.checked_in(
        request.app.state.core, runner, readings=body.readings, inventory=body.inventory,
        capabilities=body.capabilities, version=body.version, held=body.held,
        peer_address=request.client.host if request.client else None, workers=body.workers,
        labels_stated=body.labels, agents=body.agents,
        maintenance_items=[i.model_dump() for i in report.items] if report else None,
        credentials_digest=report.credentials_digest if report else None)


def _maintenance(report: dict) -> MaintenanceReport:
    """Parse the check-in's maintenance report (free-form on the wire for older runners)."""
    try:
        return MaintenanceReport.model_validate(report)
    except ValidationError as exc:
        first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BadRequest(f"maintenance.{where}: {first.get('msg', 'is not valid')}") from None


@router.post(paths.RUNNER_GOODBYE, response_model=Ok)
async def goodbye(request: Request,
                  runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    await off_loop(runners.goodbye, request.app.state.core, runner)
    request.app.state.dispatcher.release(runner.id)
    return {"ok": True}


@router.post(paths.RUNNER_CHALLENGE, response_model=Challenge)
def challenge(request: Request,
                    runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    return runners.challenge(request.app.state.core, runner)


@router.post(paths.RUNNER_CREDENTIAL, response_model=CredentialRenewed)
def renew_credential(body: CredentialRenew, request: Request,
                           runner: Runner = Depends(auth.runner)) -> dict:
    return runners.renew_credential(request.app.state.core, runner, body.nonce, body.signature)
