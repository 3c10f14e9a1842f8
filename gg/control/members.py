"""Members: created, reset and removed only as the plan says, and joined with a one-time code.

A maintainer carries out one action at a time (``POST /v1/pools/POOL/actions``). Each is
checked against a plan computed afresh inside the same write transaction, so a maintainer
cannot start a member the bounds do not allow, nor touch one that has just taken a flight:
the action is refused with ``plan_changed`` and the maintainer asks for the plan again.

Every member cycle has its own runner row::

    start / roll / replace --> member (starting) + ggm_ code (MEMBER_CODE_TTL)
    code exchanged (POST /v1/members/join) --> runner row, kind "member", labels fixed
        from the strategy, credential valid MEMBER_CREDENTIAL_TTL and never renewed
    reset --> the old runner row is retired (credential dead, never offered work again),
        the member gets a new code; its next join makes the next row
    remove / roll / replace --> the old runner row is retired, the member is deleted

Retiring is what keeps an action from racing a claim: a retired runner is never offered a
flight, and the answer to the action comes only after the retirement is committed.
"""

from __future__ import annotations

from gg import keys
from gg.control import leases as lease_ops
from gg.control.core import Core
from gg.control.pools import look, maintained
from gg.control.runners import default_policy
from gg.control.views import runner_view
from gg.domain import tokens
from gg.domain.pool_planner import Action, PoolPlan, Start
from gg.domain.pools import MEMBER_ID_PREFIX, MEMBER_KIND, PoolMember, StrategyRecord, code_refusal
from gg.domain.runners import AdminState, Runner, version_skew
from gg.errors import BadRequest, Conflict, Unauthorized

ACTIONS = ("start", "reset", "roll", "replace", "remove")
_NAME_ROOM = 50  # a member's name is POOL-<id>, within a runner name's 63 characters


def act(core: Core, runner: Runner, pool: str, kind: str,
        member_id: str | None = None) -> tuple[dict, list[str]]:
    """Carry out the control plane's side of one planned action. Returns the answer for the
    maintainer (with a new member's one-time code) and the runner rows it retired."""
    if kind not in ACTIONS:
        raise BadRequest(f"action must be one of {', '.join(ACTIONS)} (got {kind!r})")
    if kind != "start" and not member_id:
        raise BadRequest(f"a {kind} names the member it acts on")
    now = core.now()
    retired: list[str] = []
    with core.store.atomic():
        lease_ops.expire_due(core, now)
        record = maintained(core, runner, pool, claim=True)
        action = _planned(look(core, record, now).plan, kind, member_id)
        if action is None:
            what = kind if kind == "start" else f"{kind} {member_id}"
            raise Conflict(f"the plan for pool {pool} no longer says {what}: the pool changed "
                           "since it was planned; ask for the plan again", code="plan_changed")
        answer: dict = {"action": kind, "member_id": member_id}
        if kind in ("remove", "roll", "replace"):
            member = core.store.member(member_id)
            retired += _end_cycle(core, member, now)
            core.store.delete_member(member_id)
            answer["removed"] = member_id
        if kind in ("start", "roll", "replace"):
            member, code = _new_member(core, record, runner, action.digest, now)
            answer.update(member=_member_dict(member), code=code)
        if kind == "reset":
            member = core.store.member(member_id)
            retired += _end_cycle(core, member, now)
            code = tokens.mint(tokens.MEMBER_CODE)
            core.store.update_member(
                member_id, state="resetting", digest=action.digest, resets=member.resets + 1,
                runner_id=None, code_hash=tokens.digest(code),
                code_expires_at=now + core.settings.member_code_ttl, cycle_started_at=now,
                updated_at=now)
            answer.update(member=_member_dict(core.store.member(member_id)), code=code)
    return answer, retired


def _planned(plan: PoolPlan, kind: str, member_id: str | None) -> Action | None:
    for action in plan.actions:
        if action.kind != kind:
            continue
        if isinstance(action, Start) or getattr(action, "member_id", None) == member_id:
            return action
    return None


def _end_cycle(core: Core, member: PoolMember, now: float) -> list[str]:
    """Retire the member's current runner row: its credential is dead at once."""
    if member.runner_id is None:
        return []
    core.store.update_runner(member.runner_id, admin_state=AdminState.RETIRED.value,
                             retired_at=now)
    core.store.set_credential(member.runner_id, None, None, None)
    return [member.runner_id]


def _new_member(core: Core, record: StrategyRecord, maintainer: Runner, digest: str,
                now: float) -> tuple[PoolMember, str]:
    member_id = tokens.new_id(MEMBER_ID_PREFIX)
    code = tokens.mint(tokens.MEMBER_CODE)
    member = PoolMember(id=member_id, pool=record.pool,
                        name=f"{record.pool[:_NAME_ROOM]}-{member_id.removeprefix(MEMBER_ID_PREFIX)}",
                        state="starting", digest=digest, maintainer_id=maintainer.id,
                        code_hash=tokens.digest(code),
                        code_expires_at=now + core.settings.member_code_ttl,
                        cycle_started_at=now, created_at=now, updated_at=now)
    core.store.insert_member(member)
    return member, code


def _member_dict(member: PoolMember) -> dict:
    return {"id": member.id, "name": member.name, "pool": member.pool, "state": member.state,
            "digest": member.digest, "resets": member.resets,
            "code_expires_at": member.code_expires_at}


def join(core: Core, code: str | None, *, public_key: str, inventory: dict,
         version: str | None) -> dict:
    """A member exchanges its one-time code for its own runner credential.

    Unknown, spent and expired codes get the same opaque 401. The credential lasts
    MEMBER_CREDENTIAL_TTL and is never renewed; the labels are the strategy's, not the
    machine's."""
    if not code or not code.startswith(tokens.MEMBER_CODE):
        raise Unauthorized()
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
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
        credential = tokens.mint(tokens.RUNNER)
        expires = now + core.settings.member_credential_ttl
        runner = Runner(id=tokens.new_id("r_"), name=member.name, public_key=public_key,
                        labels={"environment": record.in_force.environment}, workers=1,
                        started_workers=1, inventory=inventory, version=version,
                        version_skew=version_skew(version, core.version), kind=MEMBER_KIND,
                        created_at=now, credential_expires_at=expires,
                        policy=default_policy(core, 1))
        core.store.insert_runner(runner, credential_hash=tokens.digest(credential),
                                 credential_fingerprint=tokens.fingerprint(credential))
        core.store.update_member(member.id, runner_id=runner.id, code_hash=None,
                                 code_expires_at=None, updated_at=now)
        core.event("info:runner:registered", actor=f"pool:{member.pool}", runner_id=runner.id,
                   at=now, name=member.name, member=member.id, pool=member.pool)
        runner = core.store.runner(runner.id)
    core.signals.event_added()
    return {"runner": runner_view(core, runner), "credential": credential,
            "credential_expires_at": expires, "labels": runner.labels,
            "member": member.id, "protocol": core.settings.protocol()}
