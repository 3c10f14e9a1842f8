"""``POST /v1/runner/claim``, answered ahead of FastAPI, so that a parked claim stays small.

A parked claim waits for work for up to ``GG_CLAIM_WAIT``; through FastAPI it held the
framework's request, dependency and middleware frames all that time (about 30 KB a claim).
:data:`CLAIM` is answered by ``ahead.Ahead`` and documented by the route ``ahead.document``
makes from it; both run :func:`claim`:

- the runner's credential is checked (``runners.authenticate``, with its cache), then the
  body with the ``Claim`` model;
- a claim with readings is the runner's check-in: its heartbeat is written coalesced with
  other runners' (``runners.heartbeat_coalesced``), and it may be told an instruction at once;
- ``dispatcher.claim`` parks it until work comes (or the wait ends: 204, nothing for you), and
  the answer is serialised with the route's response model (``Claimed | Instructed``).
"""

from __future__ import annotations

from gg.api import paths
from gg.api.runners import Claimed, Instructed
from gg.api.schemas import Claim
from gg.control import answers, runners
from gg.domain.runners import RunnerIdentity
from gg.server.ahead import Call
from gg.server.auth import runner_of
from gg.server.off_loop import off_loop


async def claim(state, scope, runner: RunnerIdentity, body: Claim) -> dict | None:
    """The claim's answer: a flight with its lease, an instruction, or None (204)."""
    core, dispatcher = state.core, state.dispatcher
    readings = body.readings
    if readings is not None:  # the claim is the runner's check-in; it may be told something now
        client = scope.get("client")
        told = await runners.heartbeat_coalesced(  # written with other runners' at once
            core, runner, readings=readings, free_slots=body.free_slots,
            peer_address=client[0] if client else None, stated_policy=body.policy)
        if told is not None and body.free_slots > 0:
            dispatcher.release(runner.id)  # its older parked claim, if any
            return answers.instructed(told)
    free_slots, wait = body.free_slots, answers.claim_wait(core, body.wait)
    instructable = readings is not None
    del body, readings  # not held while it parks (a model, its fields and its set of them)
    got = await dispatcher.claim(runner.id, free_slots, wait, instructable=instructable,
                                 parked_on=scope)
    if isinstance(got, str):
        return answers.instructed(got)
    if got is None:
        return None
    return await off_loop(answers.claimed, core, runner, got)  # its secrets, inputs, limits


CLAIM = Call(paths.RUNNER_CLAIM, claim, Claim, Claimed | Instructed, runner_of,
             responses={204: {"description": "nothing for you"}})
