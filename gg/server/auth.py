"""Who is calling: a person (``ggp_``) or a runner (``ggr_``), never one for the other.

A person's check is a digest and one indexed read: a plain function, which FastAPI runs in its
thread pool (the loop never reads the store, docs/architecture.md). A runner's credential is
cached: a hit is checked on the loop at once, a miss is read on a worker thread."""

from __future__ import annotations

from fastapi import Request
from starlette.requests import HTTPConnection

from gg.control import people, runners
from gg.control.core import Core
from gg.domain import tokens
from gg.domain.people import Person
from gg.domain.runners import Runner, RunnerIdentity
from gg.errors import Forbidden, Unauthorized
from gg.server.off_loop import off_loop


def bearer(request: HTTPConnection) -> str | None:  # a request or a websocket
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def person(request: Request) -> Person:
    return person_with(request.app.state.core, bearer(request))


def person_with(core: Core, token: str | None) -> Person:
    """The person ``token`` is theirs (:func:`person`, and the open answered ahead)."""
    if token is None:
        raise Unauthorized("sign in first: gg login --server URL --token-file FILE")
    return people.authenticate_person(core, token)


def person_only(request: Request) -> Person:
    """A person; a runner's (or member's) credential is refused with 403, not 401 (pools and
    strategies)."""
    token = bearer(request)
    if token is not None and token.startswith(tokens.RUNNER):
        runners.authenticate(request.app.state.core, token)  # a bad one is still a 401
        raise Forbidden("pools and strategies are for people; a runner's credential cannot "
                        "read or change them")
    return person(request)


def runner(request: Request) -> Runner:
    """The runner's row, as it is now: for the routes that read its policy, labels or key."""
    return runners.authenticate_row(request.app.state.core, bearer(request))


async def runner_identity(request: Request) -> RunnerIdentity:
    """Who the runner is (a cached credential check, no store read): the lease calls."""
    return await runner_of(request.app.state.core, bearer(request))


async def person_of(core: Core, token: str | None) -> Person:
    """:func:`person_with`, on a worker thread (the open answered ahead)."""
    return await off_loop(person_with, core, token)


async def runner_of(core: Core, token: str | None, *,
                    retired_may_hand_back: bool = False) -> RunnerIdentity:
    """``runners.authenticate``: a cached credential on the loop, a miss on a worker thread."""
    if runners.known(core, token):
        return runners.authenticate(core, token, retired_may_hand_back=retired_may_hand_back)
    return await off_loop(runners.authenticate, core, token,
                          retired_may_hand_back=retired_may_hand_back)


async def runner_handing_back(core, token: str | None) -> RunnerIdentity:
    """As :func:`runner_of`, but a retired runner passes: its hand-back of a flight it still
    holds acknowledges the stop (the use case refuses it anything else)."""
    return await runner_of(core, token, retired_may_hand_back=True)
