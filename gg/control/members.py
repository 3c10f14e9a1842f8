"""Members: created, reset and removed only as the plan says, and joined with a one-time code.

A maintainer carries out one action at a time (``POST /v1/pools/POOL/actions``). Each is
checked against a plan computed afresh inside the same write transaction, so a maintainer
cannot start a member the bounds do not allow, nor touch one that has just taken a flight:
the action is refused with ``plan_changed`` and the maintainer asks for the plan again.

A member has one runner row for its whole life (so ``gg runners`` and flight history name it
the same way across resets); each cycle gives that row a fresh key and credential::

    start / roll / replace --> member (starting) + ggm_ code (MEMBER_CODE_TTL)
    code exchanged (POST /v1/members/join) --> its runner row (made on the first join),
        kind "member", labels fixed from the strategy, a new key, a credential valid
        MEMBER_CREDENTIAL_TTL that is never renewed
    reset --> the row's credential is dead and the row is offline (a goodbye) until the
        next cycle checks in; the member gets a new code
    remove / roll / replace --> the row is retired (kept for history), the member deleted

Ending the cycle in the same transaction as the plan check is what keeps an action from
racing a claim: an offline or retired runner is never offered a flight, and the answer to
the action comes only after that is committed. On PostgreSQL (no global write lock) the
action holds the pool's lock and the named member's runner lock (gg.store.row_locks) from
before the plan is read, so replicas' actions on one pool take turns and no claim grants
that runner a flight between the plan's check and the commit.
"""

from __future__ import annotations

from typing import Any

from gg import keys
from gg.control import health, key_proof
from gg.control import labels as label_ops
from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.control.pools import look, maintained
from gg.control.runners import build_skew, refuse_taken_name
from gg.control.views import runner_view
from gg.domain import tokens
from gg.domain.events import EventKind
from gg.domain.pool_planner import Action, Remove, Reset, Start
from gg.domain.pools import MEMBER_ID_PREFIX, MEMBER_KIND, PoolMember, StrategyRecord, code_refusal
from gg.domain.runners import AdminState, Runner
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Unauthorized

ACTIONS = ("start", "reset", "roll", "replace", "remove")
_NAME_ROOM = 50  # a member's name is POOL-<id>, within a runner name's 63 characters


def act(core: Core, runner: Runner, pool: str, kind: str, *,
        member_id: str | None = None) -> tuple[dict, list[str]]:
    """Carry out the control plane's side of one planned action. Returns the answer for the
    maintainer (with a new member's one-time code) and the runner whose cycle it ended."""
    if kind not in ACTIONS:
        raise BadRequest(f"action must be one of {', '.join(ACTIONS)} (got {kind!r})")
    if kind != "start" and not member_id:
        raise BadRequest(f"a {kind} names the member it acts on")
    now = core.now()
    ended: list[str] = []
    with core.store.atomic():
        lease_ops.expire_due(core, now)
        core.store.lock_pool(pool)  # another replica's action on the pool waits: bounds hold
        if member_id:  # and no claim grants the member's runner a flight meanwhile
            named = core.store.member(member_id)
            if named is not None and named.runner_id:
                core.store.lock_runner(named.runner_id)
        record = maintained(core, runner, pool, claim=True)
        shares = look(core, record, now, asking=runner).shares
        assert shares is not None, "look() splits the plan"
        # this maintainer's share of a plan made afresh here: a start another host was just
        # given, or a member another host holds, is not in it
        action = _planned(shares.of(runner.id), kind, member_id)
        if action is None:
            what = kind if kind == "start" else f"{kind} {member_id}"
            raise Conflict(f"the plan for pool {pool} no longer says {what}: the pool changed "
                           "since it was planned; ask for the plan again",
                           code=ErrorCode.PLAN_CHANGED)
        answer: dict = {"action": kind, "member_id": member_id}
        if kind in ("remove", "roll", "replace"):
            member = _member_again(core, member_id)
            ended += _end_cycle(core, member, now, retire=True)
            core.store.delete_member(member.id)
            answer["removed"] = member_id
        if kind in ("start", "roll", "replace"):
            assert not isinstance(action, Remove), "the plan's action is of this kind"
            member, code = _new_member(core, record, maintainer=runner, digest=action.digest,
                                        now=now)
            answer.update(member=_member_dict(member), code=code)
        if kind == "reset":
            assert isinstance(action, Reset), "the plan's action is of this kind"
            member = _member_again(core, member_id)
            ended += _end_cycle(core, member, now, retire=False)
            code = tokens.mint(tokens.MEMBER_CODE)
            core.store.update_member(
                member.id, state="resetting", digest=action.digest, resets=member.resets + 1,
                cycle_grants=core.store.grants_to(member.runner_id) if member.runner_id else 0,
                code_hash=tokens.digest(code),
                code_expires_at=now + code_ttl(core, record), cycle_started_at=now,
                updated_at=now)
            answer.update(member=_member_dict(_member_again(core, member_id)), code=code)
    for runner_id in ended:  # their credentials are refused at once
        core.credentials.forget(runner_id)
    return answer, ended


def code_ttl(core: Core, record: StrategyRecord) -> float:
    """How long a member's one-use code lives, which is how long its machine has to check in:
    the strategy's ``command.join-within``, else MEMBER_CODE_TTL."""
    within = record.in_force.join_within if record.in_force is not None else None
    return within if within is not None else core.settings.member_code_ttl


def _member_again(core: Core, member_id: str | None) -> PoolMember:
    """The member a planned action names (every kind but a start names one: refused above
    otherwise), read in the action's transaction, where the plan just found it."""
    member = core.store.member(member_id) if member_id else None
    assert member is not None, "the plan found it just now, in this transaction"
    return member


def _planned(actions: tuple[Action, ...], kind: str, member_id: str | None) -> Action | None:
    for action in actions:
        if action.kind != kind:
            continue
        if isinstance(action, Start) or getattr(action, "member_id", None) == member_id:
            return action
    return None


def _end_cycle(core: Core, member: PoolMember, now: float, *, retire: bool) -> list[str]:
    """End the member's cycle: its credential is dead at once and its runner is offline
    (reset) or retired (removed). Returns the runner whose parked claim must be answered."""
    if member.runner_id is None:
        return []
    core.store.set_credential(member.runner_id, None, None, None)
    values: dict = {"goodbye_at": now}
    if retire:
        values.update(admin_state=AdminState.RETIRED.value, retired_at=now)
    core.store.update_runner(member.runner_id, **values)
    return [member.runner_id]


def _new_member(core: Core, record: StrategyRecord, *, maintainer: Runner, digest: str,
                now: float) -> tuple[PoolMember, str]:
    member_id = tokens.new_id(MEMBER_ID_PREFIX)
    code = tokens.mint(tokens.MEMBER_CODE)
    member = PoolMember(id=member_id, pool=record.pool,
                        name=f"{record.pool[:_NAME_ROOM]}-{member_id.removeprefix(MEMBER_ID_PREFIX)}",
                        state="starting", digest=digest, maintainer_id=maintainer.id,
                        code_hash=tokens.digest(code),
                        code_expires_at=now + code_ttl(core, record),
                        cycle_started_at=now, created_at=now, updated_at=now)
    core.store.insert_member(member)
    return member, code


def _member_dict(member: PoolMember) -> dict:
    return {"id": member.id, "name": member.name, "pool": member.pool, "state": member.state,
            "digest": member.digest, "resets": member.resets,
            "code_expires_at": member.code_expires_at}


def join(core: Core, code: str | None, *, public_key: str, inventory: dict,
         version: str | None, nonce: str | None = None, signature: str | None = None) -> dict:
    """A member exchanges its one-time code for its own runner credential.

    The request proves the member's private key (gg.control.key_proof). Unknown, spent and
    expired codes and failed proofs get the same opaque 401. The credential lasts
    MEMBER_CREDENTIAL_TTL and is never renewed; the labels are the strategy's, not the
    machine's."""
    if not code or not code.startswith(tokens.MEMBER_CODE):
        raise Unauthorized()
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
    if not key_proof.proved(core, "join", public_key=public_key, nonce=nonce,
                            signature=signature):
        raise Unauthorized()
    wanted = tokens.digest(code)
    now = core.now()
    with core.store.atomic():
        member = core.store.member_by_code(wanted)
        if (member is None or not tokens.same_digest(member.code_hash or "", wanted)
                or code_refusal(member.code_expires_at, now)):
            raise Unauthorized()
        record = core.store.strategy_for_pool(member.pool)
        if record is None or record.in_force is None:
            raise Unauthorized()
        if core.store.runner_by_key(public_key) is not None or core.store.tombstoned(public_key):
            raise BadRequest("this key is registered already; a member makes a fresh key "
                             "for every cycle")
        refuse_taken_name(core, member.name, member.runner_id, now)
        credential = tokens.mint(tokens.RUNNER)
        expires = now + core.settings.member_credential_ttl
        fields: dict[str, Any]  # a Runner's fields, of their several types
        fields = dict(public_key=public_key, labels={"environment": record.in_force.environment},
                      workers=1, started_workers=1, inventory=inventory, version=version,
                      version_skew=build_skew(core, version, inventory), kind=MEMBER_KIND,
                      credential_expires_at=expires, goodbye_at=None, last_seen_at=None,
                      offline_noted_at=None, group=record.in_force.group)
        core.store.ensure_group(record.in_force.group, now)  # the strategy's group
        runner_id = member.runner_id
        if runner_id is None:  # the member's first cycle makes its runner row
            runner_id = tokens.new_id("r_")
            fields.update(health.initial(core, 1))
            core.store.insert_runner(
                Runner(id=runner_id, name=member.name, created_at=now, **fields),
                credential_hash=tokens.digest(credential),
                credential_fingerprint=tokens.fingerprint(credential))
        else:
            core.store.update_runner(runner_id, **fields)
            core.store.set_credential(runner_id, tokens.digest(credential),
                                      tokens.fingerprint(credential), expires)
        label_ops.refresh(core, core.runner_again(runner_id))  # dispositions of its labels
        core.store.update_member(member.id, runner_id=runner_id, code_hash=None,
                                 code_expires_at=None, updated_at=now)
        core.event(EventKind.RUNNER_REGISTERED, actor=f"pool:{member.pool}", runner_id=runner_id,
                   at=now, name=member.name, member=member.id, pool=member.pool,
                   cycle=member.resets)
        runner = core.runner_again(runner_id)
    core.credentials.forget(runner_id)  # the last cycle's credential is refused at once
    return {"runner": runner_view(core, runner), "credential": credential,
            "credential_expires_at": expires, "labels": runner.labels,
            "member": member.id, "protocol": core.settings.protocol()}
