"""The runner's lease calls (renew, facts, hand-back) answered ahead of FastAPI.

Every flight makes these calls (docs/lease-protocol.md, "A flight's requests"), and through
the framework each cost more CPU than its use case: the dependency tree, the request object,
the body read twice over, the response model's validation, two middlewares.
:class:`LeaseCalls` wraps the app's middleware stack (as ``claims.py`` does for the claim) and
answers ``POST`` on :data:`paths.LEASE_RENEW`, :data:`paths.LEASE_FACTS` and
:data:`paths.LEASE_HAND_BACK` itself, passing everything else on. It does what the routes in
``routes/runners.py`` do (which stay registered, so the published schema documents them), in
the same order and with the same pieces (``ahead.py``):

- the body is read within ``GG_MAX_BODY_BYTES`` as strict JSON (``json_body.loads``);
- the runner's credential is checked (``runners.authenticate``, with its cache; a retired
  runner passes for the hand-back only, as ``auth.runner_handing_back``);
- the body is validated with the route's model (``Renew``, ``Report``, ``HandBack``);
- the use case runs on the store's writer (``core.run``; a report without an fsync of its
  own), and the answer is serialised with the route's response model.

Anything refused before the use case runs is handed to the app with the body replayed, so
every such refusal is the app's own answer, byte for byte; a use case's refusal (a stale
epoch's 409 ``lease_superseded``, 404, 403 ``runner_retired``, 413 ``output_capped``) is
answered in the one error shape here. Each request is counted in the request metrics under
its route's template.
"""

from __future__ import annotations


from pydantic import TypeAdapter

from gg.api import paths
from gg.api.runners import FactsStored, HandedBack, LeaseRenewed
from gg.api.schemas import HandBack, Renew, Report
from gg.control import answers, leases, runners
from gg.server import ahead
from starlette.responses import Response

_PREFIX, _, _ = paths.LEASE_RENEW.partition("{flight_id}")
_RENEWED, _STORED, _HANDED = (TypeAdapter(LeaseRenewed), TypeAdapter(FactsStored),
                              TypeAdapter(HandedBack))
# The last part of the path -> (route template, body model, may a retired runner call it).
_CALLS = {
    paths.LEASE_RENEW.rpartition("/")[2]: (paths.LEASE_RENEW, Renew, False),
    paths.LEASE_FACTS.rpartition("/")[2]: (paths.LEASE_FACTS, Report, False),
    paths.LEASE_HAND_BACK.rpartition("/")[2]: (paths.LEASE_HAND_BACK, HandBack, True),
}


def _call(path: str) -> tuple[str, str] | None:
    """(flight id, the call's last path part) for a lease call this answers, else None."""
    if not path.startswith(_PREFIX):
        return None
    flight_id, _, call = path[len(_PREFIX):].partition("/")
    if not flight_id or call not in _CALLS:
        return None
    return flight_id, call


class LeaseCalls(ahead.Route):
    """ASGI: the lease calls answered here, the rest by ``inner``."""

    def match(self, path: str) -> tuple[str, tuple] | None:
        call = _call(path)
        return None if call is None else (_CALLS[call[1]][0], call)

    def accept(self, token, data, flight_id: str, call: str):
        _, model, retired_may = _CALLS[call]
        return (runners.authenticate(self.state.core, token, retired_may_hand_back=retired_may),
                model.model_validate(data))

    async def respond(self, scope, accepted, flight_id: str, call: str) -> Response:
        runner, body = accepted
        return await self._answer(self.state.core, call, runner, flight_id, body)

    async def _answer(self, core, call: str, runner, flight_id: str, body):
        """The routes' logic (``routes/runners.py`` ``renew``, ``report``, ``hand_back``)."""
        if call == "renew":
            return ahead.answer(_RENEWED, await core.run(leases.renew, runner, flight_id,
                                                          body.epoch))
        if call == "facts":
            # Output facts need not survive a power cut: their group may skip the fsync (a
            # process crash loses nothing); the hand-back's durable commit covers them.
            facts = [f.model_dump() for f in body.facts]
            return ahead.answer(_STORED, await core.run(
                leases.report, runner, flight_id, epoch=body.epoch, facts=facts, durable=False))
        return ahead.answer(_HANDED, await handed_back(core, self.state.dispatcher, runner,
                                                       flight_id, body))


async def handed_back(core, dispatcher, runner, flight_id: str, body: HandBack) -> dict:
    """The hand-back, then, with ``claim_next``, a claim that does not park: the runner's
    next flight in the same answer (``next``), one request a flight fewer. Not for a repeat,
    nor for a retired runner's last word (``routes/runners.py`` ``hand_back`` too)."""
    answer = await core.run(
        leases.hand_back, runner, flight_id, epoch=body.epoch, outcome=body.outcome,
        exit_code=body.exit_code, reason=body.reason, key=body.key,
        facts=[f.model_dump() for f in body.facts])
    if body.claim_next > 0 and not answer["repeat"] and not runners.is_retired(runner):
        got = await dispatcher.claim(runner.id, body.claim_next, 0)
        if got is not None:
            answer["next"] = answers.claimed(core, runner, got)
    return answer
