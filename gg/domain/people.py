"""Who may remove whom, whose token may be rotated, and when a person's token stops working.

A person holds one token at a time. It works while the person is not removed and its
expiry (``token_expires_at``; ``None`` is never) lies in the future::

    added --rotate--> added (new token; the old one dead at once)
      |                  |
      +----remove--------+--> removed (tombstone: the row and name stay, no token works)

Removal is for good: the name is not given to anyone else, since history (flights opened,
runners registered, gates cleared) shows it. Pure: people are dicts as the store returns
them, ``now`` is passed in, refusals are raised with one sentence.
"""

from __future__ import annotations

from typing import Any

from gg.errors import BadRequest, Conflict, Forbidden, NotFound

NEVER = "never"
MAX_TTL = 3650 * 86400.0  # ten years: anything longer should be `never`, said out loud


def token_works(person: dict[str, Any], now: float) -> bool:
    """Whether the token stored for ``person`` may sign them in at ``now``."""
    if person.get("removed_at") is not None:
        return False
    expires = person.get("token_expires_at")
    return expires is None or now < expires


def token_expiry(actor: dict[str, Any], target: dict[str, Any] | None,
                 ttl: float | str | None, default: float, now: float) -> float | None:
    """When a token ``actor`` mints for ``target`` (None: a new person) expires.

    ``ttl`` None means the default: ``default`` seconds, except for the owner, whose token
    never expires unless asked (an owner locked out by an expired token would lock the whole
    organisation out). ``never`` is for admins only.
    """
    if ttl is None:
        return None if target is not None and target.get("is_owner") else now + default
    if ttl == NEVER:
        if actor.get("role") != "admin":
            raise Forbidden("only an admin may mint a token that never expires")
        return None
    if isinstance(ttl, str) or isinstance(ttl, bool) or not 0 < ttl <= MAX_TTL:
        raise BadRequest("--ttl must be a duration above 0 and at most 3650d, or never "
                         f"(got {ttl!r})")
    return now + float(ttl)


def check_remove(actor: dict[str, Any], target: dict[str, Any] | None, name: str) -> None:
    """Refuse a removal that must not happen: not an admin, unknown, the owner, oneself."""
    if actor.get("role") != "admin":
        raise Forbidden("only an admin may remove a person")
    if target is None:
        raise NotFound(f"there is no person named {name}")
    if target.get("removed_at") is not None:
        raise Conflict(f"{name} was removed already")
    if target.get("is_owner"):
        raise Forbidden("the owner cannot be removed")
    if target["id"] == actor.get("id"):
        raise Forbidden("you cannot remove yourself; ask another admin to do it")


def check_rotate(actor: dict[str, Any], target: dict[str, Any] | None, name: str) -> None:
    """Refuse a rotation by someone else than an admin or the person themself."""
    if actor.get("role") != "admin" and name != actor.get("name"):
        raise Forbidden("only an admin or the person themself may rotate a person's token")
    if target is None or target.get("removed_at") is not None:
        raise NotFound(f"there is no person named {name}")
