"""Pull-mode runners: attach one, and take what one poll brought into the same use cases.

A pull-mode runner never dials out (docs/runner-modes.md); the server's poller
(:mod:`gg.server.pull`) calls it every CHECK_IN_INTERVAL and hands what it answered to
:func:`polled`, which runs exactly what a dial-out runner's requests would have run: the
check-in, each report and hand-back (fenced by epoch like any other), the renewal of every
lease it still holds (the control plane renews while it can reach the runner) and a claim
for each free slot (the same matching, placement and grant). Nothing here times anything:
a runner the poller cannot reach is not renewed, and its leases expire by the clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gg import keys
from gg.control import answers, leases
from gg.control import runners as runner_ops
from gg.control.control_key import signing_key
from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain import pull as rules
from gg.domain.events import EventKind
from gg.domain.flights import Outcome
from gg.domain.identity import key_fingerprint
from gg.domain.people import Person
from gg.domain.runners import AdminState, Runner, RunnerIdentity
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Forbidden, GGError

AUTO_CLAIMS = 64  # grants handed in one poll at most (its free slots, at most this)


def control_key_fingerprint(core: Core) -> str:
    found = key_fingerprint(keys.public_text(signing_key(core)))
    assert found is not None, "the control plane's own key is an Ed25519 key"
    return found


def public_control_key(core: Core) -> str:
    return keys.public_text(signing_key(core))


def signed_headers(key: keys.Ed25519PrivateKey, method: str, path: str, *, body: bytes,
                   now: float, meant_for: str) -> tuple[dict[str, str], str]:
    """The headers that sign one request to the listening runner whose key fingerprint is
    ``meant_for`` (gg.domain.pull), and the request's nonce."""
    stamp, nonce = f"{now:.3f}", rules.new_nonce()
    return {rules.TIMESTAMP_HEADER: stamp, rules.NONCE_HEADER: nonce,
            rules.SIGNATURE_HEADER: keys.sign(
                key, rules.request_message(meant_for, method, path, stamp, nonce, body))}, nonce


def answer_signed(runner_key: object, *, status: int, nonce: str, headers: Any, body: bytes,
                  now: float, skew: float) -> bool:
    """Whether an answer was signed by ``runner_key`` for the request with ``nonce``, lately."""
    stamp = headers.get(rules.TIMESTAMP_HEADER, "")
    return (isinstance(runner_key, str)
            and keys.verify(runner_key, rules.answer_message(status, nonce, stamp, body),
                            headers.get(rules.SIGNATURE_HEADER, ""))
            and rules.fresh(stamp, now, skew))


def check_attach(core: Core, person: Person, *, name: str, public_key: str,
                 fingerprint: str | None) -> str:
    """Whether ``person`` may attach a runner holding ``public_key`` as ``name``; returns the
    key's fingerprint. Refused: a non-admin, a fingerprint that is not the key's, a retired
    key, a key a dial-out runner holds, a name a live runner holds."""
    require_admin(person)
    if not runner_ops.valid_name(name):
        raise BadRequest("a runner name is 1-63 letters, digits, '.', '_' or '-'")
    if not keys.valid_public_key(public_key):
        raise BadRequest("the runner did not answer with a base64 Ed25519 public key")
    found = key_fingerprint(public_key)
    assert found is not None, "checked above to be a base64 Ed25519 public key"
    if fingerprint is not None and fingerprint.strip() != found:
        raise Conflict(f"the runner's key fingerprint is {found}, not {fingerprint.strip()}: "
                       "not attached (is the URL the machine you meant?)",
                       code=ErrorCode.FINGERPRINT_MISMATCH)
    if core.store.tombstoned(public_key):
        raise Forbidden("this runner key was retired and can never join again")
    existing = core.store.runner_by_key(public_key)
    if existing is not None and existing.mode != rules.MODE_PULL:
        raise Conflict(f"this key is runner {existing.id}'s, which dials out; a machine runs "
                       "in one mode at a time", code=ErrorCode.RUNNER_MODE_TAKEN)
    runner_ops.refuse_taken_name(core, name, existing.id if existing else None, core.now())
    return found


def attach(core: Core, person: Person, *, name: str, url: str, public_key: str) -> Runner:
    """Register (or re-attach) the pull-mode runner holding ``public_key``: one key, one row.
    It is checked in by its first poll; until then it reads offline."""
    check_attach(core, person, name=name, public_key=public_key, fingerprint=None)
    now = core.now()
    with core.store.atomic():
        existing = core.store.runner_by_key(public_key)
        fields: dict[str, Any] = dict(name=name, url=url, mode=rules.MODE_PULL, kind=rules.KIND,
                      registered_by=person.id, goodbye_at=None, profile=None,
                      profile_in_force={})
        if existing is not None:
            core.store.update_runner(existing.id, **fields)
            runner_id = existing.id
        else:
            runner_id = runner_ops.insert_keyed(core, public_key=public_key, fields=fields,
                                                now=now)
        core.event(EventKind.RUNNER_ATTACHED, actor=person.name, runner_id=runner_id,
                   name=name, url=url, fingerprint=key_fingerprint(public_key),
                   superseded=existing is not None)
    return core.runner_again(runner_id)


def attached(core: Core, runner: Runner, fingerprint: str) -> dict:
    """``gg runner attach``'s answer."""
    return {"runner": answers.runner_shown(core, runner.id), "fingerprint": fingerprint,
            "control_key_fingerprint": control_key_fingerprint(core)}


async def polled(core: Core, runner: Runner, answer: Any, peer: str | None) -> dict:
    """Take one poll's answer (:class:`gg.api.pull.Polled`) as the runner's own requests would
    have been taken; returns the :class:`gg.api.pull.Delivery` to hand it."""
    retired = runner_ops.is_retired(runner)
    body = answer.check_in
    checked: dict = {}
    if not retired:
        checked = await answers.checked_in(
            core, runner, readings=body.readings, inventory=body.inventory,
            capabilities=body.capabilities, version=body.version, held=body.held,
            peer_address=peer, workers=body.workers, labels_stated=body.labels,
            agents=None, maintenance_items=None)
        checked["directives"] = [d for d in checked.get("directives", [])
                                 if d != "renew_credential"]  # it has no bearer credential
    applied, refusals = [], []
    for entry in answer.outbox:  # reports and hand-backs, fenced by epoch as ever
        try:
            if entry.kind == "report" and retired:  # as its credential would be refused
                raise runner_ops.retired_refusal(runner)
            if entry.kind == "report" and entry.facts:
                await core.run(leases.report, runner, entry.flight, epoch=entry.epoch,
                               facts=[f.model_dump() for f in entry.facts], durable=False)
            elif entry.kind == "hand_back" and entry.hand_back is not None:
                hb = entry.hand_back
                await core.run(leases.hand_back, runner, entry.flight, epoch=hb.epoch,
                               outcome=Outcome(hb.outcome).value, exit_code=hb.exit_code,
                               reason=hb.reason, key=hb.key,
                               facts=[f.model_dump() for f in hb.facts])
            applied.append(entry.seq)
        except GGError as exc:
            applied.append(entry.seq)  # refused for good: the runner hears why
            refusals.append(_refusal(entry.flight, exc, seq=entry.seq))
    renewals = []
    handed = {e.flight for e in answer.outbox if e.kind == "hand_back"}
    for held in answer.held:
        if held.flight in handed:
            continue
        if retired:  # told as a dial-out runner is told: stop it and hand it back
            refusals.append(_refusal(held.flight, runner_ops.retired_refusal(runner)))
            continue
        if not await asyncio.to_thread(_renewal_due, core, runner, held.flight, held.epoch):
            continue
        try:
            renewals.append(await core.run(leases.renew, runner, held.flight, held.epoch))
        except GGError as exc:
            refusals.append(_refusal(held.flight, exc))
    grants = []
    fresh = await asyncio.to_thread(core.store.runner, runner.id) or runner
    free = min(body.free_slots, AUTO_CLAIMS)
    if answer.goodbye and not retired:  # a graceful stop: offline at once, as a goodbye says
        await asyncio.to_thread(runner_ops.goodbye, core, fresh)
    elif not retired and fresh.admin_state == AdminState.ACTIVE.value:
        while free > 0:
            got = await core.run(leases.try_claim, runner.id, free)
            if got is None:
                break
            grants.append(await asyncio.to_thread(answers.claimed, core,
                                                  RunnerIdentity.of(fresh), got))
            free -= 1
    delivery = {"runner": runner.id, "checked_in": checked, "applied": applied,
                "refusals": refusals, "renewals": renewals, "grants": grants,
                "retired": retired}
    if answer.poll is not None:  # a runner from before numbered polls knows no such field
        delivery["poll"] = answer.poll
    return delivery


def _renewal_due(core: Core, runner: Runner, flight_id: str, epoch: int) -> bool:
    """Whether to renew now: a lease of this runner's with no more than
    :func:`gg.domain.pull.renew_when` left (the next poll might come too late for the
    runner's own deadline), or anything else (the renewal then refuses it, as it would refuse
    the runner). A busy runner is polled often; its leases are not rewritten at every poll."""
    flight = core.store.flight(flight_id)
    if flight is None or flight.lease_runner != runner.id or flight.epoch != epoch \
            or flight.lease_expires_at is None:
        return True
    return flight.lease_expires_at - core.now() <= rules.renew_when(core.settings)


def _refusal(flight_id: str, exc: GGError, *, seq: int | None = None) -> dict:
    return {"flight": flight_id, "seq": seq, "status": getattr(exc, "status", 400),
            "code": getattr(exc, "code", ErrorCode.BAD_REQUEST), "message": exc.message}

