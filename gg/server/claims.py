"""``POST /v1/runner/claim`` answered ahead of FastAPI, so that a parked claim stays small.

A parked claim waits for work for up to ``GG_CLAIM_WAIT``; through FastAPI it held the
framework's request, dependency and middleware frames all that time (about 30 KB a claim).
:class:`ClaimRoute` wraps the app's middleware stack: it answers exactly that method and path
itself and passes everything else on. It does what the route in ``routes/runners.py`` does
(which stays registered, so the published schema documents it), in the same order:

- the body is read here, within ``GG_MAX_BODY_BYTES``, as strict JSON (``json_body.loads``);
- the runner's credential is checked (``runners.authenticate``, with its cache);
- the body is validated with the ``Claim`` model;
- the heartbeat, the instruction and ``dispatcher.claim`` run as in the route (the heartbeat's
  write coalesced with other runners', ``runners.heartbeat_coalesced``), and the answer
  is serialised with the route's response model (``Claimed | Instructed``, or 204).

Anything refused before a use case runs (an unusual content type, a body too large or not
JSON, a bad credential, a body the model refuses) is handed to the app with the body replayed,
so every refusal is the app's own answer, byte for byte. A refusal after that (a use case's
``GGError``) is answered in the one error shape here. The request is counted in the request
metrics under the route's template, as the route would be. The connection cap and timeouts
apply below ASGI (``connections.py``), so they hold here unchanged.
"""

from __future__ import annotations


from pydantic import TypeAdapter
from starlette.responses import Response

from gg.api import paths
from gg.api.runners import Claimed, Instructed
from gg.api.schemas import Claim
from gg.control import answers, runners
from gg.server import ahead

_ANSWER = TypeAdapter(Claimed | Instructed)


class ClaimRoute(ahead.Route):
    """ASGI: ``POST`` on :data:`paths.RUNNER_CLAIM` answered here, the rest by ``inner``."""

    def match(self, path: str) -> tuple[str, tuple] | None:
        return (paths.RUNNER_CLAIM, ()) if path == paths.RUNNER_CLAIM else None

    def accept(self, token, data):
        return (runners.authenticate(self.state.core, token),
                Claim.model_validate(data, from_attributes=True))

    async def respond(self, scope, accepted) -> Response:
        runner, claim = accepted
        return await self._answer(self.state.core, scope, runner, claim)

    async def _answer(self, core, scope, runner, body: Claim) -> Response:
        """The route's logic (``routes/runners.py`` ``claim``)."""
        dispatcher = self.state.dispatcher
        heartbeat = body.readings is not None
        if heartbeat:  # the claim is the runner's check-in; it may be told something at once
            client = scope.get("client")
            told = await runners.heartbeat_coalesced(  # written with other runners' at once
                core, runner, readings=body.readings, free_slots=body.free_slots,
                peer_address=client[0] if client else None, stated_policy=body.policy)
            if told is not None and body.free_slots > 0:
                dispatcher.release(runner.id)  # its older parked claim, if any
                return _json(answers.instructed(told))
        free_slots, wait = body.free_slots, answers.claim_wait(core, body.wait)
        del body
        got = await dispatcher.claim(runner.id, free_slots, wait, instructable=heartbeat,
                                     parked_on=scope)
        if isinstance(got, str):
            return _json(answers.instructed(got))
        answer = answers.claimed(core, runner, got)
        return Response(status_code=204) if answer is None else _json(answer)


def _json(answer: dict) -> Response:
    return ahead.answer(_ANSWER, answer)
