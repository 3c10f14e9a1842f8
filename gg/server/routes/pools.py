"""Strategies and pools: apply and pin (admins), look (people), plan, act and attest (the
pool's maintainer only), and a member's one-time code exchange.

A runner's credential never reads the people's side (403 on every pool path), and a member's
runner credential is refused on every maintainer path by ``pools.may_maintain`` (403).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.pools import (
    ActionTaken,
    Attested,
    DigestPinned,
    MaintainerAllowed,
    MaintainerPlan,
    MemberJoined,
    Pool,
    Strategy,
    StrategyApplied,
)
from gg.api.schemas import (
    Attestation,
    MemberJoin,
    PoolAction,
    PoolAllow,
    Removed,
    StrategyApply,
    StrategyDigest,
)
from gg.control import members, pools, removals, strategies
from gg.control.dry_run import maybe_dry
from gg.domain.people import Person
from gg.domain.runners import Runner
from gg.server import auth
from gg.server.auth import person_only
from gg.server.json_body import JsonRoute
from gg.server.off_loop import off_loop

router = APIRouter(route_class=JsonRoute)


# -- strategies ---------------------------------------------------------------------------


@router.get(paths.STRATEGIES, response_model=list[Strategy])
def list_strategies(request: Request, person: Person = Depends(person_only)) -> list[dict]:
    return strategies.list_strategies(request.app.state.core)


@router.get(paths.STRATEGY, response_model=Strategy)
def show_strategy(name: str, request: Request, person: Person = Depends(person_only)) -> dict:
    return strategies.show(request.app.state.core, name)


@router.put(paths.STRATEGY, response_model=StrategyApplied)
def apply_strategy(name: str, body: StrategyApply, request: Request,
                         person: Person = Depends(person_only), dry_run: bool = False) -> dict:
    return maybe_dry(request.app.state.core, dry_run, strategies.apply, person, name,
                     body.strategy)


@router.post(paths.STRATEGY_DIGEST, response_model=DigestPinned)
def pin_digest(name: str, body: StrategyDigest, request: Request,
                     person: Person = Depends(person_only)) -> dict:
    return strategies.pin_digest(request.app.state.core, person, name, body.digest)


# -- pools, for people --------------------------------------------------------------------


@router.get(paths.POOLS, response_model=list[Pool])
def list_pools(request: Request, person: Person = Depends(person_only)) -> list[dict]:
    return pools.list_pools(request.app.state.core)


@router.get(paths.POOL, response_model=Pool)
def show_pool(pool: str, request: Request, person: Person = Depends(person_only)) -> dict:
    return pools.show_pool(request.app.state.core, pool)


@router.post(paths.POOL_ALLOW, response_model=MaintainerAllowed)
def allow(pool: str, body: PoolAllow, request: Request,
                person: Person = Depends(person_only)) -> dict:
    return pools.allow(request.app.state.core, person, pool, body.runner)


# -- pools, for their maintainer ------------------------------------------------------------


@router.get(paths.POOL_PLAN, response_model=MaintainerPlan)
def plan(pool: str, request: Request, runner: Runner = Depends(auth.runner),
         capacity: int | None = None) -> dict:
    return pools.plan_view(request.app.state.core, runner, pool, capacity)


@router.post(paths.POOL_ACTIONS, response_model=ActionTaken)
async def act(pool: str, body: PoolAction, request: Request,
              runner: Runner = Depends(auth.runner)) -> dict:
    answer, ended = await off_loop(members.act, request.app.state.core, runner, pool,
                                   body.action, member_id=body.member_id)
    for runner_id in ended:  # a member whose cycle ended: its parked claim gets "nothing" now
        request.app.state.dispatcher.release(runner_id)
    return answer


@router.post(paths.POOL_ATTEST, response_model=Attested)
def attest(pool: str, body: Attestation, request: Request,
                 runner: Runner = Depends(auth.runner)) -> dict:
    return pools.attest(request.app.state.core, runner, pool,
                        members=[m.model_dump() for m in body.members],
                        did=[d.model_dump() for d in body.did],
                        driver=body.driver.model_dump() if body.driver else None,
                        backoff=body.backoff.model_dump() if body.backoff else None)


# -- members ----------------------------------------------------------------------------------


@router.post(paths.MEMBER_JOIN, status_code=201, response_model=MemberJoined)
def join(body: MemberJoin, request: Request) -> dict:
    return members.join(request.app.state.core, auth.bearer(request), public_key=body.public_key,
                        inventory=body.inventory, version=body.version, nonce=body.nonce,
                        signature=body.signature)


@router.delete(paths.STRATEGY, response_model=Removed)
def delete_strategy(name: str, request: Request,
                          person: Person = Depends(person_only)) -> dict:
    return removals.delete_strategy(request.app.state.core, person, name)


@router.delete(paths.POOL, response_model=Removed)
def delete_pool(pool: str, request: Request, person: Person = Depends(person_only)) -> dict:
    return pools.delete_pool(request.app.state.core, person, pool)
