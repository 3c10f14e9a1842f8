"""The web console's rules: a session, its form token, and who may press which button.

A person signs in by pasting their person token; the console hands back a session (a
``ggs_`` secret in an HttpOnly cookie) that works until ``expires_at`` or until they sign
out, and only while the person token it was made with still works and is still theirs
(rotating that token away, or removing the person, ends their sessions)::

    (person token) --sign in--> session --sign out / expiry / token rotated / removed--> gone

Every form carries the session's form token, derived from the session's secret: a page
of another site can neither read the cookie nor compute the token, so it cannot post a
form that passes (the synchronizer token, kept by deriving instead of storing). Pure:
``now`` is passed in.
"""

from __future__ import annotations

from typing import Any

from gg.domain import tokens
from gg.domain.people import Person, token_works


def new_session(person: Person, now: float, ttl: float) -> tuple[str, str, float]:
    """A session for ``person``: ``(secret, its hash to store, expires_at)``."""
    secret = tokens.mint(tokens.SESSION)
    return secret, tokens.digest(secret), now + ttl


def session_works(session: dict[str, Any], holder: Person | None, holder_token_hash: str | None,
                  now: float) -> bool:
    """Whether a stored session still signs its person in at ``now``. ``holder`` is whoever
    holds the person token the session was made with (None: nobody, since it was rotated
    away) and ``holder_token_hash`` the hash their row holds: the session works only while
    that is still its own person, with that token."""
    return (now < session["expires_at"] and holder is not None
            and holder.id == session["person_id"]
            and bool(session.get("person_token_hash"))
            and tokens.same_digest(holder_token_hash or "", session["person_token_hash"])
            and token_works(holder, now))


def form_token(secret: str) -> str:
    """The token every form of this session carries (never the secret itself)."""
    return tokens.digest("form:" + secret)


def form_token_matches(secret: str, given: str | None) -> bool:
    if not given:
        return False
    return tokens.same_digest(form_token(secret), given)


def may_cancel(person: Person, opened_by: str) -> bool:
    """The flight's opener or an admin (the rule ``gg cancel`` and the console share)."""
    return person.is_admin or opened_by == person.id
