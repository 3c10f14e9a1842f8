"""Who is calling: a person (``ggp_``) or a runner (``ggr_``), never one for the other.

The checks are a digest and one indexed read on this thread's read connection: they run on
the event loop (``async def``), not in the thread pool FastAPI gives plain functions, whose
hand-off cost more than the check itself."""

from __future__ import annotations

from fastapi import Request
from starlette.requests import HTTPConnection

from gg.control import people, runners
from gg.control.core import Core
from gg.domain import tokens
from gg.domain.people import Person
from gg.domain.runners import Runner, RunnerIdentity
from gg.errors import Forbidden, Unauthorized


def bearer(request: HTTPConnection) -> str | None:  # a request or a websocket
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def person(request: Request) -> Person:
    return person_with(request.app.state.core, bearer(request))


def person_with(core: Core, token: str | None) -> Person:
    """The person ``token`` is theirs (:func:`person`, and the open answered ahead)."""
    if token is None:
        raise Unauthorized("sign in first: gg login --server URL --token-file FILE")
    return people.authenticate_person(core, token)


async def person_only(request: Request) -> Person:
    """A person; a runner's (or member's) credential is refused with 403, not 401 (pools and
    strategies)."""
    token = bearer(request)
    if token is not None and token.startswith(tokens.RUNNER):
        runners.authenticate(request.app.state.core, token)  # a bad one is still a 401
        raise Forbidden("pools and strategies are for people; a runner's credential cannot "
                        "read or change them")
    return await person(request)


async def runner(request: Request) -> Runner:
    """The runner's row, as it is now: for the routes that read its policy, labels or key."""
    return runners.authenticate_row(request.app.state.core, bearer(request))


async def runner_identity(request: Request) -> RunnerIdentity:
    """Who the runner is (a cached credential check, no store read): the lease calls."""
    return runners.authenticate(request.app.state.core, bearer(request))


def runner_handing_back(core, token: str | None) -> RunnerIdentity:
    """As ``runners.authenticate``, but a retired runner passes: its hand-back of a flight it
    still holds acknowledges the stop (the use case refuses it anything else)."""
    return runners.authenticate(core, token, retired_may_hand_back=True)
