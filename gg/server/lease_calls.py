"""The runner's lease calls (renew, facts, hand-back), answered ahead of FastAPI.

Every flight makes these calls (docs/lease-protocol.md, "A flight's requests"), and through
the framework each cost more CPU than its use case: the dependency tree, the request object,
the body read twice over, the response model's validation, two middlewares. :data:`CALLS`
are answered by ``ahead.Ahead`` and documented by the routes ``ahead.document`` makes from
them; both ways in run the bodies below:

- the runner's credential is checked (``runners.authenticate``, with its cache; a retired
  runner passes for the hand-back only, ``auth.runner_handing_back``), then the body with
  the call's model (``Renew``, ``Report``, ``HandBack``);
- the use case runs on the store's writer (``core.run``; a report without an fsync of its
  own), and the answer is serialised with the call's response model.

A use case's refusal (a stale epoch's 409 ``lease_superseded``, 404, 403 ``runner_retired``,
413 ``output_capped``) is answered in the one error shape.
"""

from __future__ import annotations

from gg.api import paths
from gg.api.runners import FactsStored, HandedBack, LeaseRenewed
from gg.api.schemas import HandBack, Renew, Report
from gg.control import answers, leases, runners
from gg.domain.runners import RunnerIdentity
from gg.server.ahead import Call
from gg.server.auth import runner_handing_back, runner_of
from gg.server.off_loop import off_loop


async def renew(state, scope, runner: RunnerIdentity, body: Renew, *, flight_id: str) -> dict:
    return await state.core.run(leases.renew, runner, flight_id, body.epoch)


async def report(state, scope, runner: RunnerIdentity, body: Report, *, flight_id: str) -> dict:
    # Output facts need not survive a power cut: their group may skip the fsync (a process
    # crash loses nothing); the hand-back's durable commit covers them on disk.
    return await state.core.run(leases.report, runner, flight_id, epoch=body.epoch,
                                facts=[f.model_dump() for f in body.facts], durable=False)


async def hand_back(state, scope, runner: RunnerIdentity, body: HandBack, *,
                    flight_id: str) -> dict:
    """The hand-back, then, with ``claim_next``, a claim that does not park: the runner's
    next flight in the same answer (``next``), one request a flight fewer. Not for a repeat,
    nor for a retired runner's last word."""
    core = state.core
    answer = await core.run(
        leases.hand_back, runner, flight_id, epoch=body.epoch, outcome=body.outcome,
        exit_code=body.exit_code, reason=body.reason, key=body.key,
        facts=[f.model_dump() for f in body.facts])
    if body.claim_next > 0 and not answer["repeat"] and not runners.is_retired(runner):
        got = await state.dispatcher.claim(runner.id, body.claim_next, 0)
        if got is not None:
            answer["next"] = await off_loop(answers.claimed, core, runner, got)
    return answer


CALLS = (Call(paths.LEASE_RENEW, renew, Renew, LeaseRenewed, runner_of),
         Call(paths.LEASE_FACTS, report, Report, FactsStored, runner_of),
         Call(paths.LEASE_HAND_BACK, hand_back, HandBack, HandedBack, runner_handing_back))
