"""Runner identity and life: register, authenticate, check in, renew the credential, goodbye."""

from __future__ import annotations

import re
import secrets

from gg import keys
from gg.control import estimates as estimate_ops
from gg.control import health, key_proof
from gg.control import labels as label_ops
from gg.control.core import CONTROL_PLANE, Core
from gg.control.heartbeats import Beat, Judged
from gg.domain import identity, tokens
from gg.domain import machine_console as console_rules
from gg.domain.events import EventKind
from gg.domain.people import Person
from gg.domain.pools import MEMBER_KIND
from gg.domain.runners import (
    AdminState,
    Instruction,
    Runner,
    RunnerIdentity,
    instruction_at_claim,
    is_online,
    silently_gone,
)
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_CHALLENGE_TTL = 120.0
EPHEMERAL_RETIRED = "this ephemeral runner took its one flight and was retired: its credential is dead"


def register(core: Core, person: Person, *, name: str, public_key: str, labels: dict,
             workers: int, inventory: dict, version: str | None, nonce: str | None = None,
             signature: str | None = None) -> tuple[Runner, str]:
    """A signed-in person registers this machine; one key, one row (a new key supersedes).

    The request proves the private key (gg.control.key_proof). A person supersedes only a
    runner that person registered (an admin, any registered runner); an enrolled runner or
    a pool member is never turned into a registered one. Every such refusal is the opaque
    401 of a bad token, so a caller learns nothing about the key it named."""
    if not _NAME.match(name or ""):
        raise BadRequest("a runner name is 1-63 letters, digits, '.', '_' or '-'")
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
    labels = label_ops.checked(labels)
    if not key_proof.proved(core, "register", public_key=public_key, nonce=nonce,
                            signature=signature):
        raise Unauthorized()
    now = core.now()
    credential = tokens.mint(tokens.RUNNER)
    expires = now + core.settings.runner_credential_ttl
    with core.store.atomic():
        if core.store.tombstoned(public_key):
            raise Forbidden("this runner key was retired and can never register again")
        existing = core.store.runner_by_key(public_key)
        if existing is not None and not may_supersede(person, existing):
            raise Unauthorized()
        refuse_taken_name(core, name, existing.id if existing else None, now, person=person)
        fields = dict(name=name, labels=labels, workers=workers, started_workers=workers,
                      inventory=inventory, version=version,
                      version_skew=build_skew(core, version, inventory),
                      registered_by=person.id, goodbye_at=None,
                      kind="registered", profile=None, profile_in_force={})
        runner_id = upsert_runner(core, existing, public_key=public_key, fields=fields,
                                  credential=credential, expires=expires, now=now)
        if existing is not None:
            health.judge(core, core.runner_again(runner_id), now, checked=False)
        core.event(EventKind.RUNNER_REGISTERED, actor=person.name, runner_id=runner_id,
                   name=name, superseded=existing is not None)
        runner = core.runner_again(runner_id)
        label_ops.refresh(core, runner)
    core.credentials.forget(runner_id)  # a superseded credential is refused at once
    return runner, credential


def may_supersede(person: Person, existing: Runner) -> bool:
    """Whether a person's registration may take over the row of an already known key."""
    if existing.kind != "registered":  # enrolled, or a pool member: never by a person
        return False
    return person.is_admin or existing.registered_by == person.id


def refuse_taken_name(core: Core, name: str, own_id: str | None, now: float, *,
                      person: Person | None = None) -> None:
    """Names are unique among runners that are not retired (gg.domain.identity): a
    registration, enrolment or pool join under a name a live runner other than itself holds
    is refused, and a person's registration also under the name of an offline runner that
    person did not register (admins may). Inside the caller's transaction."""
    for holder in core.store.runners_named(name):
        if holder.id == own_id:
            continue
        holds_lease = bool(core.store.flights_held_by(holder.id))
        if identity.holds_name(holder, now, core.settings.offline_after,
                               holds_lease=holds_lease):
            raise Conflict(
                f"the runner name {name} is taken by live runner {holder.id}: pick another "
                f"--name, or free it with gg runner forget {holder.id} once that runner is "
                "offline", code=ErrorCode.RUNNER_NAME_TAKEN)
        if person is not None and identity.keeps_name_from(
                holder, now, core.settings.offline_after, holds_lease=holds_lease,
                person_id=person.id, person_is_admin=person.is_admin):
            raise Conflict(
                f"the runner name {name} belongs to runner {holder.id}, which is offline but "
                "not retired: pick another --name, or ask an admin to retire or forget "
                f"{holder.id}", code=ErrorCode.RUNNER_NAME_TAKEN)


def upsert_runner(core: Core, existing: Runner | None, *, public_key: str, fields: dict,
                  credential: str, expires: float, now: float) -> str:
    """One key, one row: a known key's row is superseded in place (new credential, new
    fields); a new key gets a new row with its initial policy and health. Inside the
    caller's transaction; returns the runner's id. Registration and enrolment share it."""
    if existing is not None:
        core.store.update_runner(existing.id, **fields)
        core.store.set_credential(existing.id, tokens.digest(credential),
                                  tokens.fingerprint(credential), expires)
        return existing.id
    values = {**fields, **health.initial(core, fields.get("started_workers") or 1)}
    runner = Runner(id=tokens.new_id("r_"), public_key=public_key, created_at=now,
                    credential_expires_at=expires, **values)
    core.store.insert_runner(runner, credential_hash=tokens.digest(credential),
                             credential_fingerprint=tokens.fingerprint(credential))
    return runner.id


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name or ""))


def insert_keyed(core: Core, *, public_key: str, fields: dict, now: float) -> str:
    """A new row for a key that holds no bearer credential (a pull-mode runner: the control
    plane calls it, it never calls in), with its initial policy and health. Inside the
    caller's transaction; returns the runner's id."""
    values = {**fields, **health.initial(core, fields.get("started_workers") or 1)}
    runner = Runner(id=tokens.new_id("r_"), public_key=public_key, created_at=now, **values)
    core.store.insert_runner(runner, credential_hash=None, credential_fingerprint=None)
    return runner.id


def authenticate(core: Core, token: str | None, *,
                 retired_may_hand_back: bool = False) -> RunnerIdentity:
    """Who holds ``token`` (cached: a hit reads nothing); the same opaque 401 for every kind
    of refusal. :func:`authenticate_row` when the caller needs the runner's row.

    A retired runner's credential is refused with 403 ``runner_retired`` (so its process
    stops for good), except where ``retired_may_hand_back``: the hand-back route, where the
    retired runner acknowledges that it stopped a flight it still holds
    (:func:`gg.control.leases.hand_back` accepts nothing else from it).
    """
    if not token or not token.startswith(tokens.RUNNER):
        raise Unauthorized()
    wanted = tokens.digest(token)
    cache = core.credentials
    runner = cache.get(wanted)  # keyed by the full hash: a hit is that exact credential
    if runner is None:
        generation = cache.generation
        found = core.store.runner_by_credential(wanted)
        if found is None or not tokens.same_digest(found[1], wanted):
            raise Unauthorized()
        runner = RunnerIdentity.of(found[0])
        cache.put(wanted, runner, generation)
    if is_retired(runner) and not retired_may_hand_back:
        raise retired_refusal(runner)
    if runner.credential_expires_at is not None and core.now() >= runner.credential_expires_at:
        raise Unauthorized()
    return runner


def known(core: Core, token: str | None) -> bool:
    """Whether :func:`authenticate` answers ``token`` without reading the store: a credential
    in the cache, or a token that is not a runner's at all."""
    if not token or not token.startswith(tokens.RUNNER):
        return True
    return core.credentials.get(tokens.digest(token)) is not None


def authenticate_row(core: Core, token: str | None) -> Runner:
    """:func:`authenticate`, then the runner's row as it is now (its policy, labels, key…)."""
    runner = core.store.runner(authenticate(core, token).id)
    if runner is None:  # forgotten since the check
        raise Unauthorized()
    return runner


def is_retired(runner: Runner | RunnerIdentity) -> bool:
    return runner.retired_at is not None or runner.admin_state == AdminState.RETIRED.value


def retired_refusal(runner: Runner | RunnerIdentity | None = None) -> Forbidden:
    if runner is not None and runner.ephemeral:
        return Forbidden(EPHEMERAL_RETIRED, code=ErrorCode.RUNNER_RETIRED)
    return Forbidden("this runner was retired by an admin: its credential is dead",
                     code=ErrorCode.RUNNER_RETIRED)


def after_ephemeral_grant(core: Core, runner: Runner, now: float) -> None:
    """An ephemeral runner was granted its one flight: it drains at once, so nothing else is
    offered to it (the matcher reads draining). Inside the grant's transaction."""
    if runner.admin_state == AdminState.DRAINING.value:
        return
    core.store.update_runner(runner.id, admin_state=AdminState.DRAINING.value)
    core.event(EventKind.RUNNER_DRAIN_CHANGED, actor=CONTROL_PLANE, runner_id=runner.id, at=now,
               state=AdminState.DRAINING.value, reason="ephemeral: it took its one flight",
               **{"from": runner.admin_state})


def after_ephemeral_flight(core: Core, runner: Runner, now: float) -> None:
    """An ephemeral runner's flight ended (landed, failed, returned, expired or cancelled):
    it is retired like an admin would retire it — credential dead, key tombstoned, history
    kept — and its process exits on its next request. Inside the caller's transaction."""
    if is_retired(runner):
        return
    core.store.update_runner(runner.id, admin_state=AdminState.RETIRED.value, retired_at=now)
    core.store.tombstone(runner.public_key, runner.id, now)
    core.event(EventKind.RUNNER_RETIRED, actor=CONTROL_PLANE, runner_id=runner.id, at=now,
               name=runner.name, was=runner.admin_state, stopping=[],
               reason="ephemeral: its one flight ended")


def challenge(core: Core, runner: Runner | RunnerIdentity) -> dict:
    _refuse_member_renewal(runner)
    nonce = secrets.token_urlsafe(32)
    with core.store.atomic():
        core.store.add_challenge(tokens.digest(nonce), runner.id, core.now() + _CHALLENGE_TTL)
    return {"nonce": nonce, "expires_in": _CHALLENGE_TTL}


def renew_credential(core: Core, runner: Runner, nonce: str, signature: str) -> dict:
    """A new credential, only for a signature by the runner's own key over the challenge."""
    _refuse_member_renewal(runner)
    message = f"gg-renew:{runner.id}:{nonce}".encode()
    now = core.now()
    with core.store.atomic():
        if not core.store.take_challenge(tokens.digest(nonce), runner.id, now):
            raise Unauthorized("the challenge is unknown or has expired")
        if not keys.verify(runner.public_key, message, signature):
            raise Unauthorized("the signature does not match this runner's key")
        credential = tokens.mint(tokens.RUNNER)
        expires = now + core.settings.runner_credential_ttl
        core.store.set_credential(runner.id, tokens.digest(credential),
                                  tokens.fingerprint(credential), expires)
        core.event(EventKind.RUNNER_CREDENTIAL_RENEWED, actor=_actor(runner), runner_id=runner.id)
    core.credentials.forget(runner.id)  # the old credential is refused at once
    return {"credential": credential, "expires_at": expires}


def check_in(core: Core, runner: Runner, *, readings: dict, inventory: dict | None,
             capabilities: dict | None, version: str | None, held: list[str],
             peer_address: str | None, workers: int | None = None,
             labels: dict[str, str] | None = None) -> dict:
    now = core.now()
    with core.store.atomic(durable=False):  # a heartbeat: no fsync (see Database.atomic)
        reported = inventory if inventory is not None else runner.inventory
        skew = build_skew(core, version, reported)
        values: dict = dict(last_seen_at=now, readings=readings, peer_address=peer_address,
                            version=version, version_skew=skew)
        if inventory is not None:
            values["inventory"] = inventory
        if capabilities is not None:
            values["capabilities"] = capabilities
        if workers is not None:
            values["started_workers"] = workers
        _note_skew(core, runner, skew=skew, version=version, inventory=reported)
        if runner.kind == MEMBER_KIND and runner.last_seen_at is None:
            _warmed(core, runner, now)
        core.store.update_runner(runner.id, **values)
        more_work = health.judge(core, core.runner_again(runner.id), now, checked=True)
        relabelled = label_ops.after_check_in(
            core, core.runner_again(runner.id), labels=labels,
            facts_changed=inventory is not None or capabilities is not None)
        note_silent_runners(core, now)
        cancelled = _ended_among(core, held)
        consoles = _consoles_waiting(core, runner, now)
        runner = core.runner_again(runner.id)
    if more_work or relabelled:
        core.signals.takers_changed()  # it may take waiting flights it could not before
    expires = runner.credential_expires_at or now
    directives = []
    if runner.kind != MEMBER_KIND and expires - now < core.settings.runner_credential_ttl / 3:
        directives.append("renew_credential")
    if not runner.capabilities:
        directives.append("send_capabilities")
    return {
        "runner": runner.id,
        "admin_state": runner.admin_state,
        "policy": runner.policy,
        "labels": runner.labels,
        "health": runner.health,
        "check_in_interval": console_rules.check_in_interval(
            core.settings.check_in_interval, core.settings.console_check_in_interval,
            bool(consoles)),
        "protocol": core.settings.protocol(),
        "directives": directives,
        "consoles": consoles,
        "ended": cancelled,
        "server_time": now,
        "server_version": core.version,
    }


def _warmed(core: Core, runner: Runner, now: float) -> None:
    """A member's first check-in since its cycle began: its pool's warm-up, measured."""
    member = core.store.member_of_runner(runner.id)
    if member is not None and member.cycle_started_at is not None:
        estimate_ops.on_first_check_in(core, member.pool, runner_id=runner.id,
                                       started_at=member.cycle_started_at, now=now)


def heartbeat(core: Core, runner: Runner | RunnerIdentity, *, readings: dict, free_slots: int,
              peer_address: str | None, stated_policy: str | None) -> Instruction | None:
    """A claim that carries the runner's readings counts as its check-in: ``last_seen_at`` and
    the readings are written (no fsync, like a check-in), and the answer is the instruction the
    runner must hear before its claim parks, if any (:func:`instruction_at_claim`). A runner that
    was offline and claims again is back: waiting flights may go to it.

    Written here at once, in a transaction of its own; the server's claim handler uses
    :func:`heartbeat_coalesced`, which judges and writes many runners' heartbeats together."""
    beat = Beat(runner.id, core.now(), readings, free_slots, peer_address, stated_policy)
    with core.store.atomic(durable=False):
        judged = judge_heartbeats(core, [beat])
        if judged.rows:
            core.store.record_heartbeats(judged.rows)
    if judged.back:
        core.signals.takers_changed()  # back: waiting flights may go to it
    told = judged.told[0]
    if isinstance(told, BaseException):
        raise told
    return told


async def heartbeat_coalesced(core: Core, runner: Runner | RunnerIdentity, *, readings: dict,
                              free_slots: int, peer_address: str | None,
                              stated_policy: str | None) -> Instruction | None:
    """:func:`heartbeat` on the event loop, judged and written with other runners' in one unit
    of the store's writer (gg.control.heartbeats): the loop reads nothing, and no other thread
    is asked. Same answer, same rows written, same ``takers_changed`` when it is back; it
    returns once the heartbeat is committed."""
    beat = Beat(runner.id, core.now(), readings, free_slots, peer_address, stated_policy)
    return await core.heartbeats.note(core, judge_heartbeats, beat)


def judge_heartbeats(core: Core, beats: list[Beat]) -> Judged:
    """What each heartbeat's runner is told (an instruction, None, or the refusal of a runner
    unknown or retired), the rows to write, and whether a runner among them was offline
    before: the runners read together, each judged as :func:`instruction_at_claim` says."""
    ids = list({beat.runner_id for beat in beats})
    found = core.store.runners_for_heartbeat(ids)
    unheard = core.store.consoles_unheard(ids) if found else set()
    told: list = []
    rows: list[tuple] = []
    back = False
    for beat in beats:
        got = found.get(beat.runner_id)
        if got is None:
            told.append(Unauthorized())
            continue
        before, has_capabilities = got
        if is_retired(before):
            told.append(retired_refusal(before))
            continue
        instruction = instruction_at_claim(
            before, stated_policy=beat.stated_policy, free_slots=beat.free_slots, now=beat.now,
            renew_window=core.settings.runner_credential_ttl / 3,
            renews=before.kind != MEMBER_KIND, has_capabilities=has_capabilities,
            console_unheard=beat.runner_id in unheard)
        checks = None
        if beat.stated_policy is not None and instruction is None and not _pending(before):
            # It applies the assigned policy with the capabilities last judged (a change to
            # either would have brought a full check-in): that judgement is confirmed now.
            checks = beat.now
        rows.append((beat.runner_id, beat.now, {**beat.readings, "free_slots": beat.free_slots},
                     beat.peer_address, checks))
        back = back or not is_online(before, beat.now, core.settings.offline_after)
        told.append(instruction)
    return Judged(told, rows, back)


def _consoles_waiting(core: Core, runner: Runner, now: float) -> list[dict]:
    """The consoles waiting for ``runner`` (docs/console.md): named in its check-in answer so
    it dials them, and noted as heard (its claims are no longer told of them)."""
    waiting = core.store.consoles_waiting(runner.id)
    core.store.mark_consoles_heard([s.id for s in waiting if s.heard_at is None], now)
    return [{"id": s.id, "person": s.person_name, "command": s.command, "flight": s.flight_id,
             "term": s.term, "rows": s.rows, "cols": s.cols} for s in waiting]


def _pending(runner: Runner) -> bool:
    """The policy changed since its checks were last judged against a report."""
    return (runner.policy_changed_at is not None
            and (runner.checks_at is None or runner.policy_changed_at > runner.checks_at))


def _refuse_member_renewal(runner: Runner | RunnerIdentity) -> None:
    """A pool member's credential (MEMBER_CREDENTIAL_TTL) is never renewed: its pool replaces
    the member before the credential ends (gg.domain.pool_planner, Replace)."""
    if runner.kind == MEMBER_KIND:
        raise Forbidden("a pool member's credential is never renewed; its pool replaces the "
                        "member before it ends", code=ErrorCode.MEMBER_NOT_RENEWED)


def goodbye(core: Core, runner: Runner | RunnerIdentity) -> None:
    with core.store.atomic():
        core.store.update_runner(runner.id, goodbye_at=core.now())
        core.event(EventKind.RUNNER_GOODBYE, actor=_actor(runner), runner_id=runner.id)


def note_silent_runners(core: Core, now: float, *, every: float = 1.0) -> int:
    """Record ``warn:runner:aged_out`` once per offline episode of a runner gone silent.

    Whoever looks first records it (check-ins, listings); scanning at most once per
    ``every`` seconds keeps a fleet of thousands of check-ins cheap.
    """
    if now - core.silence_scanned_at < every:
        return 0
    core.silence_scanned_at = now
    noted = 0
    for runner in core.store.silent_candidates(now - core.settings.offline_after):
        if silently_gone(runner, now, core.settings.offline_after) and core.store.note_once(
                "runners", "id", runner.id, "offline_noted_at", runner.offline_noted_at, now):
            core.event(EventKind.RUNNER_AGED_OUT, actor=CONTROL_PLANE, runner_id=runner.id, at=now,
                       last_seen_at=runner.last_seen_at)
            noted += 1
    return noted


def silence_due(core: Core, now: float) -> bool:
    """Whether some runner's offline episode is not recorded yet: a read, so that whoever
    looks opens a write transaction only when there is something to write."""
    offline_after = core.settings.offline_after
    return any(silently_gone(runner, now, offline_after)
               for runner in core.store.silent_candidates(now - offline_after))


def notice_silence(core: Core) -> int:
    """:func:`note_silent_runners` in its own transaction, waking anyone following events.

    Called when someone lists runners and by the server's liveness watch, so an offline
    episode is recorded even when no other runner checks in. Nothing to record (nearly
    always): a read, and no write transaction.
    """
    now = core.now()
    if not silence_due(core, now):
        return 0
    with core.store.atomic():
        noted = note_silent_runners(core, now)
    return noted


def resolve(core: Core, ref: str, *, include_retired: bool = False) -> Runner:
    """A runner by id or by (unique) name; a retired one only by id, and only for history."""
    runner = core.store.runner(ref)
    if runner is not None and (runner.retired_at is None or include_retired):
        return runner
    named = core.store.runners_named(ref)
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        ids = ", ".join(r.id for r in named)
        raise BadRequest(f"{len(named)} runners are named {ref}; use an id ({ids})")
    raise NotFound(f"no runner {ref}")


def by_fingerprint(core: Core, text: str) -> Runner:
    """The runner whose key has this fingerprint (as ``ssh-keygen -l`` prints it; one key,
    one row). A retired runner is found too: checking a machine's identity is also history."""
    wanted = identity.normalise_fingerprint(text)
    runner = core.store.runner_by_fingerprint(wanted)
    if runner is not None:
        return runner
    raise NotFound(f"no runner has the key fingerprint {wanted}")


def _ended_among(core: Core, held: list[str]) -> list[str]:
    ended = []
    for flight_id in held[:256]:
        flight = core.store.flight(flight_id)
        if flight is not None and flight.final:
            ended.append(flight_id)
    return ended


def build_skew(core: Core, version: str | None, inventory: dict | None) -> str:
    """``none | skewed | unknown``: the runner's version and build commit (its inventory's
    ``gg_commit``) against the control plane's (gg.domain.identity.skew)."""
    commit = (inventory or {}).get("gg_commit")
    return identity.skew(version, commit if isinstance(commit, str) else None, core.version,
                         core.commit)


def _note_skew(core: Core, runner: Runner, *, skew: str, version: str | None,
               inventory: dict | None) -> None:
    """``warn:runner:version_skew`` for a skewed or unknown build, once per (runner, pair)."""
    commit = (inventory or {}).get("gg_commit")
    commit = commit if isinstance(commit, str) else None
    pair = identity.skew_pair(version, commit, core.version, core.commit)
    if pair == runner.skew_checked_pair:  # looked up when this build first checked in
        return
    if not core.store.note_once("runners", "id", runner.id, "skew_checked_pair",
                                runner.skew_checked_pair, pair):
        return  # another replica looked it up this moment
    if skew not in ("skewed", "unknown"):
        return
    recorded = {e["body"].get("pair") for e in
                core.store.events(kind=EventKind.RUNNER_VERSION_SKEW, runner_id=runner.id)}
    if identity.skew_warns(skew, pair, recorded):
        core.event(EventKind.RUNNER_VERSION_SKEW, actor=_actor(runner), runner_id=runner.id,
                   pair=pair, skew=skew, runner_version=version, runner_commit=commit,
                   server_version=core.version, server_commit=core.commit)


def _actor(runner: Runner | RunnerIdentity) -> str:
    return f"runner:{runner.name}"
