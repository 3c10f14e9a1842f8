"""Who may remove whom, whose token may be rotated, and when a person's token stops working.

A person holds one token at a time. It works while the person is not removed and its
expiry (``token_expires_at``; ``None`` is never) lies in the future::

    added --rotate--> added (new token; the old one dead at once)
      |                  |
      +----remove--------+--> removed (tombstone: the row and name stay, no token works)

Removal is for good: the name is not given to anyone else, since history (flights opened,
runners registered, gates cleared) shows it. Pure: a person is a :class:`Person` as the
store reads it, ``now`` is passed in, refusals are raised with one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from gg.errors import BadRequest, Conflict, Forbidden, NotFound

NEVER = "never"
MAX_TTL = 3650 * 86400.0  # ten years: anything longer should be `never`, said out loud
ADMIN = "admin"
MEMBER = "member"


@dataclass(frozen=True)
class Person:
    """Someone who signs in with a person token: their row in the people table, less the
    hash of their token (that hash goes no further than the check that signs them in).

    Made once where a request is authenticated (``gg.control.people.authenticate_person``,
    a console session's ``gg.control.console.signed_in``) and passed whole to every use
    case and rule that asks who is acting."""

    id: str
    name: str
    role: str  # ADMIN or MEMBER
    is_owner: bool = False
    created_at: float = 0.0
    token_fingerprint: str = ""
    token_minted_at: float | None = None
    token_expires_at: float | None = None  # None: never
    removed_at: float | None = None  # a tombstone's: the row stays, no token works
    removed_by: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    @property
    def removed(self) -> bool:
        return self.removed_at is not None


def token_works(person: Person, now: float) -> bool:
    """Whether the token stored for ``person`` may sign them in at ``now``."""
    if person.removed:
        return False
    expires = person.token_expires_at
    return expires is None or now < expires


def token_expiry(actor: Person, target: Person | None, ttl: float | str | None, default: float,
                 now: float) -> float | None:
    """When a token ``actor`` mints for ``target`` (None: a new person) expires.

    ``ttl`` None means the default: ``default`` seconds, except for the owner, whose token
    never expires unless asked (an owner locked out by an expired token would lock the whole
    organisation out). ``never`` is for admins only.
    """
    if ttl is None:
        return None if target is not None and target.is_owner else now + default
    if ttl == NEVER:
        if not actor.is_admin:
            raise Forbidden("only an admin may mint a token that never expires")
        return None
    if isinstance(ttl, str) or isinstance(ttl, bool) or not 0 < ttl <= MAX_TTL:
        raise BadRequest("--ttl must be a duration above 0 and at most 3650d, or never "
                         f"(got {ttl!r})")
    return now + float(ttl)


def check_remove(actor: Person, target: Person | None, name: str) -> Person:
    """Refuse a removal that must not happen: not an admin, unknown, the owner, oneself;
    the person to remove otherwise."""
    if not actor.is_admin:
        raise Forbidden("only an admin may remove a person")
    if target is None:
        raise NotFound(f"there is no person named {name}")
    if target.removed:
        raise Conflict(f"{name} was removed already")
    if target.is_owner:
        raise Forbidden("the owner cannot be removed")
    if target.id == actor.id:
        raise Forbidden("you cannot remove yourself; ask another admin to do it")
    return target


def check_rotate(actor: Person, target: Person | None, name: str) -> Person:
    """Refuse a rotation by someone else than an admin or the person themself; the person
    whose token to rotate otherwise."""
    if not actor.is_admin and name != actor.name:
        raise Forbidden("only an admin or the person themself may rotate a person's token")
    if target is None or target.removed:
        raise NotFound(f"there is no person named {name}")
    return target
