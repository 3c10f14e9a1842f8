"""The organisation, its people, and who is calling.

The rules (who may remove whom, when a token stops working) are :mod:`gg.domain.people`;
these use cases apply them in one transaction and record ``info:person:*`` events.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gg.control.core import Core
from gg.domain import people as rules
from gg.domain import tokens
from gg.domain.events import EventKind
from gg.domain.ownership import decide
from gg.domain.people import Person
from gg.errors import BadRequest, Conflict, Forbidden, Unauthorized

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def bootstrap(core: Core, data_dir: Path, org_name: str = "default") -> Path | None:
    """First start: create the organisation and its owner; write DATA_DIR/owner-token. Once
    per store: several servers starting together on one database make one owner (the
    insert is conditional, in a write transaction under the organisation's lock, which
    every replica takes in turn)."""
    with core.store.atomic():
        core.store.lock_organisation()
        if core.store.organisation() is not None:
            return None
        now = core.now()
        if not core.store.create_organisation(tokens.new_id("o_"), org_name, now):
            return None
        token = tokens.mint(tokens.PERSON)
        core.store.create_person(id=tokens.new_id("p_"), name="owner", role=rules.ADMIN,
                                 token_hash=tokens.digest(token),
                                 token_fingerprint=tokens.fingerprint(token), is_owner=True,
                                 now=now)
        path = Path(data_dir) / "owner-token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        os.chmod(path, 0o600)
        return path


def authenticate_person(core: Core, token: str | None) -> Person:
    """The person ``token`` signs in (401, the same opaque one for every reason, otherwise):
    the one place a request's :class:`Person` is made."""
    if not token or not token.startswith(tokens.PERSON):
        raise Unauthorized()
    wanted = tokens.digest(token)
    found = core.store.person_by_token_hash(wanted)
    if found is None or not tokens.same_digest(found[1], wanted):
        raise Unauthorized()
    person = found[0]
    if not rules.token_works(person, core.now()):  # removed or expired: the same opaque 401
        raise Unauthorized()
    return person


def require_admin(person: Person) -> None:
    if not person.is_admin:
        raise Forbidden("only an admin may do that")


def add_person(core: Core, actor: Person, name: str, *, admin: bool,
               ttl: float | str | None = None) -> tuple[Person, str]:
    """Mint a person and their token (shown once); it expires after ``ttl`` seconds
    (default PERSON_TOKEN_TTL), or never when an admin says ``never``."""
    require_admin(actor)
    if not _NAME.match(name or ""):
        raise BadRequest("a person's name is 1-64 letters, digits, '.', '_', '@' or '-'")
    with core.store.atomic():
        now = core.now()
        expires = rules.token_expiry(actor, None, ttl, core.settings.person_token_ttl, now)
        found = core.store.person_by_name(name)
        if found and found.removed:
            raise Conflict(f"{name} was a person here and was removed; names are not reused, "
                           "so choose another")
        if found:
            raise Conflict(f"a person named {name} exists already")
        token = tokens.mint(tokens.PERSON)
        person = core.store.create_person(
            id=tokens.new_id("p_"), name=name, role=rules.ADMIN if admin else rules.MEMBER,
            token_hash=tokens.digest(token), token_fingerprint=tokens.fingerprint(token),
            is_owner=False, now=now, token_expires_at=expires)
        core.event(EventKind.PERSON_ADDED, actor=actor.name, person=name,
                   role=person.role, token_fingerprint=person.token_fingerprint,
                   token_expires_at=expires)
    return person, token


def list_people(core: Core, actor: Person, removed: bool = False) -> list[dict]:
    """Everyone signed-in people may see; removed people only when asked."""
    return [public_person(p) for p in core.store.people(removed=removed)]


def remove_person(core: Core, actor: Person, name: str) -> dict:
    """Remove ``name`` for good: their token stops working on its very next use. The row
    stays as a tombstone (history keeps the name); runners they claimed are unclaimed,
    so nothing stays reserved for someone who can no longer fly. Runners they registered
    are untouched: a runner's credential is its own."""
    with core.store.atomic():
        now = core.now()
        target = rules.check_remove(actor, core.store.person_by_name(name), name)
        dead = tokens.digest(tokens.mint(tokens.PERSON))  # a hash no token anyone holds has
        if not core.store.remove_person(target.id, dead_hash=dead, removed_by=actor.name,
                                        now=now):
            raise Conflict(f"{name} was removed already")
        core.event(EventKind.PERSON_REMOVED, actor=actor.name, at=now, person=name,
                   role=target.role, token_fingerprint=target.token_fingerprint)
        released = _unclaim_runners_of(core, actor, target.id, now)
    if released:
        core.signals.ready_changed()
    return public_person(_reread(core, target))


def _reread(core: Core, person: Person) -> Person:
    """``person`` as the store holds them now (a removal or rotation just changed them)."""
    return core.store.person(person.id) or person


def _unclaim_runners_of(core: Core, actor: Person, person_id: str, now: float) -> int:
    count = 0
    for runner in core.store.runners():
        if runner.owner != person_id or runner.ownership != "claimed":
            continue
        outcome = decide("unclaim", runner, actor)
        assert outcome.event is not None, "unclaiming a claimed runner always changes it"
        core.store.update_runner(runner.id, **outcome.values)
        core.event(outcome.event, actor=actor.name, runner_id=runner.id, at=now,
                   reason="its owner was removed", **outcome.values)
        count += 1
    return count


def rotate_token(core: Core, actor: Person, name: str,
                 ttl: float | str | None = None) -> tuple[Person, str]:
    """A new token for ``name`` (shown once); the old one stops working at once."""
    with core.store.atomic():
        now = core.now()
        target = rules.check_rotate(actor, core.store.person_by_name(name), name)
        expires = rules.token_expiry(actor, target, ttl, core.settings.person_token_ttl, now)
        token = tokens.mint(tokens.PERSON)
        core.store.set_person_token(target.id, token_hash=tokens.digest(token),
                                    token_fingerprint=tokens.fingerprint(token),
                                    token_expires_at=expires, now=now)
        core.event(EventKind.PERSON_TOKEN_ROTATED, actor=actor.name, at=now, person=name,
                   old_fingerprint=target.token_fingerprint,
                   token_fingerprint=tokens.fingerprint(token), token_expires_at=expires)
    return _reread(core, target), token


PUBLIC = ("id", "name", "role", "is_owner", "created_at", "token_fingerprint",
          "token_expires_at", "removed_at", "removed_by")


def public_person(person: Person) -> dict:
    """What the wire says of a person (``gg.api.people.Person``): never when their token was
    minted, never anything of the token but its fingerprint."""
    return {k: getattr(person, k) for k in PUBLIC}
