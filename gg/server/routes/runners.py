"""Runner endpoints: registration, check-in, claim (long-poll), leases, goodbye; listings."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from gg.api import paths
from gg.api.schemas import (CheckIn, Claim, CredentialRenew, HandBack, KeyNonceAsk, Renew, Report,
                            RunnerRegister)
from gg.control import key_proof, labels, leases, runners
from gg.control import views
from gg.domain.runners import Runner, is_online
from gg.server import auth
from gg.server.json_body import JsonRoute
from gg.server.routes import fleet

router = APIRouter(route_class=JsonRoute)


@router.post(paths.KEY_NONCES, status_code=201)
async def key_nonce(body: KeyNonceAsk, request: Request) -> dict:
    """A single-use nonce for the private key to sign (no token: the request it is spent on
    carries the token; the nonce alone grants nothing)."""
    return key_proof.issue(request.app.state.core, body.purpose, body.public_key)


@router.post(paths.RUNNERS, status_code=201)
async def register(body: RunnerRegister, request: Request,
                   person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    runner, credential = runners.register(
        core, person, name=body.name, public_key=body.public_key, labels=body.labels,
        workers=body.workers, inventory=body.inventory, version=body.version,
        nonce=body.nonce, signature=body.signature)
    await labels.settled(core, runner.id)  # its labels' verdicts, computed off the loop
    return {"runner": views.runner_view(core, runner), "credential": credential,
            "credential_expires_at": runner.credential_expires_at,
            "protocol": core.settings.protocol()}


@router.get(paths.RUNNERS)
async def list_runners(request: Request, person: dict = Depends(auth.person)) -> list[dict]:
    core = request.app.state.core
    runners.notice_silence(core)  # an offline episode is recorded when anyone looks
    return views.runners_view(core)


@router.get(paths.RUNNER)
async def show_runner(ref: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    return views.runner_view(core, runners.resolve(core, ref), detail=True)


@router.post(paths.RUNNER_CHECK_IN)
async def check_in(body: CheckIn, request: Request, runner: Runner = Depends(auth.runner)) -> dict:
    core = request.app.state.core
    was_online = is_online(runner, core.now(), core.settings.offline_after)
    peer = request.client.host if request.client else None
    extra = fleet.before_check_in(request, runner, body.agents)  # enrolment
    answer = runners.check_in(core, runner, readings=body.readings, inventory=body.inventory,
                              capabilities=body.capabilities, version=body.version,
                              held=body.held, peer_address=peer, workers=body.workers,
                              labels=body.labels)
    await labels.settled(core, runner.id)  # new facts: their verdicts, computed off the loop
    fleet.after_check_in(request, runner, body.maintenance)  # enrolment: maintenance report
    answer.update(extra)
    if not was_online:
        core.signals.ready_changed()
    return answer


@router.post(paths.RUNNER_CLAIM, responses={204: {"description": "nothing for you"}})
async def claim(body: Claim, request: Request, runner: Runner = Depends(auth.runner)):
    core = request.app.state.core
    wait = core.settings.claim_wait if body.wait is None else min(body.wait, core.settings.claim_wait)
    got = await request.app.state.dispatcher.claim(runner.id, body.free_slots, wait)
    if got is None:
        return Response(status_code=204)
    flight, grant = got
    fresh = core.store.runner(runner.id)  # the policy in force at the grant, not at parking
    return {"flight": views.flight_for_runner(flight),
            "policy": fresh.policy if fresh else runner.policy, "lease": {
        "epoch": grant.epoch, "expires_at": grant.expires_at, "granted_at": grant.granted_at},
        "protocol": core.settings.protocol()}


@router.post(paths.LEASE_RENEW)
async def renew(flight_id: str, body: Renew, request: Request,
                runner: Runner = Depends(auth.runner)) -> dict:
    return leases.renew(request.app.state.core, runner, flight_id, body.epoch)


@router.post(paths.LEASE_FACTS)
async def report(flight_id: str, body: Report, request: Request,
                 runner: Runner = Depends(auth.runner)) -> dict:
    facts = [f.model_dump() for f in body.facts]
    return leases.report(request.app.state.core, runner, flight_id, body.epoch, facts)


@router.post(paths.LEASE_HAND_BACK)
async def hand_back(flight_id: str, body: HandBack, request: Request,
                    runner: Runner = Depends(auth.runner_handing_back)) -> dict:
    return leases.hand_back(request.app.state.core, runner, flight_id, body.epoch, body.outcome,
                            body.exit_code, body.reason, body.key)


@router.post(paths.RUNNER_GOODBYE)
async def goodbye(request: Request, runner: Runner = Depends(auth.runner)) -> dict:
    runners.goodbye(request.app.state.core, runner)
    request.app.state.dispatcher.release(runner.id)
    return {"ok": True}


@router.post(paths.RUNNER_CHALLENGE)
async def challenge(request: Request, runner: Runner = Depends(auth.runner)) -> dict:
    return runners.challenge(request.app.state.core, runner)


@router.post(paths.RUNNER_CREDENTIAL)
async def renew_credential(body: CredentialRenew, request: Request,
                           runner: Runner = Depends(auth.runner)) -> dict:
    return runners.renew_credential(request.app.state.core, runner, body.nonce, body.signature)
