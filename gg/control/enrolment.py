"""Enrolment tokens and enrolled runners (SPEC 4, 5 "Enrolment").

An admin mints a ``gge_`` token for a profile (shown once; only its SHA-256 is stored). A
machine spends one use on its first start to register its own Ed25519 key, exactly as a
registration would, and gets its own ``ggr_`` credential; from then on it never needs the
token again. Every refused exchange, whatever the reason (unknown, expired, exhausted,
revoked, or not a ``gge_`` token at all), gets the very same 401 answer; ``gg fleet tokens``
is where an admin sees why.

The use is spent by ONE conditional ``UPDATE … RETURNING`` inside the exchange's
``BEGIN IMMEDIATE`` transaction (``Store.spend_enrol_token``), so fifty machines racing for a
one-use token give exactly one runner. Anything that refuses later in the same transaction
(a tombstoned key) rolls the decrement back.
"""

from __future__ import annotations

import re

from gg import keys
from gg.control import key_proof, profiles
from gg.control.core import Core
from gg.control.people import require_admin
from gg.control.runners import build_skew, refuse_taken_name, upsert_runner
from gg.domain import groups as group_rules
from gg.domain import tokens
from gg.domain.enrolment import MAX_TTL, MAX_USES, EnrolToken
from gg.domain.events import EventKind
from gg.domain.groups import DEFAULT_GROUP
from gg.domain.people import Person
from gg.domain.pools import MEMBER_KIND
from gg.domain.runners import OWNERSHIPS, Runner
from gg.errors import BadRequest, Forbidden, NotFound, Unauthorized

__all__ = ["REFUSED", "enrol", "list_tokens", "mint_token", "on_check_in", "revoke_token"]

REFUSED = "the enrolment token was not accepted"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def mint_token(core: Core, person: Person, *, profile: str, uses: int = 1,
               ttl: float | None = None, owner: str | None = None,
               ownership: str | None = None, ephemeral: bool = False,
               group: str = DEFAULT_GROUP) -> tuple[EnrolToken, str]:
    """A new ``gge_`` token for ``profile``; the token itself is returned this once.
    ``uses = 0``: any number of machines until it expires. ``ephemeral``: each machine it
    enrols takes one flight, then is retired. Its machines join runner group ``group``, whose
    row is made here if it is absent."""
    require_admin(person)
    if problem := group_rules.name_problem(group):
        raise BadRequest(problem)
    if not 0 <= uses <= MAX_USES:
        raise BadRequest(f"--uses must be from 0 (no limit until it expires) to {MAX_USES} "
                         f"(got {uses})")
    ttl = core.settings.enrol_token_ttl if ttl is None else ttl
    if not 0 < ttl <= MAX_TTL:
        raise BadRequest(f"--ttl must be more than 0 and at most 30d (got {ttl:g}s)")
    if ownership is not None and ownership not in OWNERSHIPS:
        raise BadRequest(f"--ownership must be one of {', '.join(OWNERSHIPS)} (got {ownership})")
    now = core.now()
    with core.store.atomic():
        record = core.store.profile_record(profile)
        if record is None:
            raise NotFound(f"no profile {profile} has been applied; apply it first: "
                           f"gg fleet apply {profile}")
        owner_id = None
        if owner is not None:
            found = core.store.person_by_name(owner) or core.store.person(owner)
            if found is None:
                raise NotFound(f"no person {owner}")
            owner_id = found.id
            ownership = ownership or "claimed"
        effective = ownership or record.applied.ownership
        if effective == "claimed" and owner_id is None:
            raise BadRequest(f"machines enrolled with profile {profile} start claimed; say "
                             "whose with --owner PERSON, or give --ownership organisation|open")
        if effective != "claimed" and owner_id is not None:
            raise BadRequest("--owner goes with --ownership claimed")
        token = tokens.mint(tokens.ENROLMENT)
        row = EnrolToken(fingerprint=tokens.fingerprint(token), profile=profile, uses=uses,
                         uses_left=uses, expires_at=now + ttl, created_at=now,
                         created_by=person.name, ownership=ownership, owner=owner_id,
                         ephemeral=ephemeral, group=group)
        if core.store.ensure_group(group, now):
            core.event(EventKind.GROUP_SET, actor=person.name, at=now, group=group,
                       attributes={}, bindings=[], exclusive=False)
        core.store.insert_enrol_token(token_hash=tokens.digest(token), token=row)
        core.event(EventKind.ENROLMENT_TOKEN_MINTED, actor=person.name, at=now,
                   fingerprint=row.fingerprint, profile=profile, uses=uses,
                   expires_at=row.expires_at, ephemeral=ephemeral)
    return row, token


def list_tokens(core: Core, person: Person) -> list[dict]:
    require_admin(person)
    now = core.now()
    people = {p.id: p.name for p in core.store.people()}
    rows = []
    for token in core.store.enrol_tokens():
        view = token.view(now)
        view["owner_name"] = people.get(token.owner) if token.owner else None
        rows.append(view)
    return rows


def revoke_token(core: Core, person: Person, fingerprint: str) -> dict:
    require_admin(person)
    now = core.now()
    with core.store.atomic():
        token = core.store.enrol_token(fingerprint)
        if token is None:
            raise NotFound(f"no enrolment token {fingerprint} (gg fleet tokens lists them)")
        if core.store.revoke_enrol_token(fingerprint, now, person.name):
            core.event(EventKind.ENROLMENT_TOKEN_REVOKED, actor=person.name, at=now,
                       fingerprint=fingerprint, profile=token.profile)
        token = core.store.enrol_token(fingerprint)
        assert token is not None, "read above, in this transaction"
    return token.view(now)


def enrol(core: Core, token: str | None, *, name: str, public_key: str, workers: int,
          inventory: dict, version: str | None, nonce: str | None = None,
          signature: str | None = None) -> tuple[Runner, str]:
    """Spend one use of ``token`` and register this machine's key as an enrolled runner.

    The request proves the private key (gg.control.key_proof); a failed proof is refused
    like a bad token and spends no use. A pool member's key is never enrolled."""
    if not _NAME.match(name or ""):
        raise BadRequest("a runner name is 1-63 letters, digits, '.', '_' or '-'")
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
    if not token or not token.startswith(tokens.ENROLMENT):
        raise Unauthorized(REFUSED)
    if not key_proof.proved(core, "enrol", public_key=public_key, nonce=nonce,
                            signature=signature):
        raise Unauthorized(REFUSED)
    wanted = tokens.digest(token)
    now = core.now()
    credential = tokens.mint(tokens.RUNNER)
    expires = now + core.settings.runner_credential_ttl
    with core.store.atomic():
        spent = core.store.spend_enrol_token(wanted, now)
        if spent is None or not tokens.same_digest(spent[1], wanted):
            raise Unauthorized(REFUSED)
        grant = spent[0]
        if core.store.tombstoned(public_key):  # rolls the spent use back
            raise Forbidden("this runner key was retired and can never register again")
        record = core.store.profile_record(grant.profile)
        in_force = record.in_force if record else None
        ownership = grant.ownership or (record.applied.ownership if record else "organisation")
        if ownership == "claimed" and grant.owner is None:  # the profile changed since minting
            ownership = "organisation"
        fields = dict(name=name, labels={}, workers=workers, started_workers=workers,
                      inventory=inventory, version=version,
                      version_skew=build_skew(core, version, inventory),
                      registered_by=grant.created_by, goodbye_at=None, kind="enrolled",
                      profile=grant.profile, ownership=ownership, owner=grant.owner,
                      reserved=False, ephemeral=grant.ephemeral, group=grant.group)
        core.store.ensure_group(grant.group, now)  # deleted since minting: made again
        existing = core.store.runner_by_key(public_key)
        if existing is not None and existing.kind == MEMBER_KIND:  # rolls the spent use back
            raise Unauthorized(REFUSED)
        refuse_taken_name(core, name, existing.id if existing else None, now)  # rolls back too
        runner_id = upsert_runner(core, existing, public_key=public_key, fields=fields,
                                  credential=credential, expires=expires, now=now)
        profiles.sync_runner(core, core.runner_again(runner_id), in_force)
        core.event(EventKind.RUNNER_ENROLLED, actor=f"enrolment:{grant.fingerprint}",
                   runner_id=runner_id, at=now, name=name, profile=grant.profile,
                   token=grant.fingerprint, superseded=existing is not None, group=grant.group)
        runner = core.runner_again(runner_id)
    core.credentials.forget(runner_id)  # a superseded credential is refused at once
    return runner, credential


def on_check_in(core: Core, runner: Runner, *, agents: list[str] | None) -> dict:
    """Before the core check-in: remember the agents the runner reports. Returns what the
    check-in answer adds for the runner: its profile in force (or null)."""
    if agents is not None:
        reported = sorted(set(agents))
        if reported != sorted(runner.agents or []):
            with core.store.atomic():
                core.store.update_runner(runner.id, agents=reported)
            core.signals.ready_changed()
    return {"profile": runner_profile(runner)}


def runner_profile(runner: Runner) -> dict | None:
    """What an enrolled runner is told about its profile: the profile in force, or None
    (registered runners, and enrolled ones whose profile is not in force)."""
    if runner.kind != "enrolled":
        return None
    return {"name": runner.profile, "in_force": runner.profile_in_force or None}
