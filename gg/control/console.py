"""The web console's use cases: sign in and out, who a session is, and the pending queue.

Every page reads through the same use cases the HTTP API calls (``gg.control.flights``,
``answers``, ``gates``, ``pools``, ``admin``), so a person sees and may do in the console
exactly what they see and may do with ``gg``; only the session is the console's own.
"""

from __future__ import annotations

from gg.control import approvals as approval_ops
from gg.control import flights, gates, people
from gg.control.core import Core
from gg.domain import approvals, tokens
from gg.domain import console as rules
from gg.domain.events import EventKind
from gg.domain.flights import Stage
from gg.domain.people import Person
from gg.errors import Unauthorized

SIGNED_OUT = "you are signed out: sign in with your person token"


def sign_in(core: Core, person_token: str,
            replacing: str | None = None) -> tuple[Person, str, float]:
    """``(person, session secret, expires_at)`` for a working person token (401 otherwise).
    The browser's session before, ``replacing``, ends: each sign-in is a new session."""
    person_token = person_token.strip()
    person = people.authenticate_person(core, person_token)
    now = core.now()
    secret, digest, expires_at = rules.new_session(person, now, core.settings.console_session_ttl)
    with core.store.atomic():
        core.store.delete_sessions_ended(now)
        if replacing:
            core.store.delete_session(tokens.digest(replacing))
        core.store.add_session(token_hash=digest, person_id=person.id,
                               person_token_hash=tokens.digest(person_token), now=now,
                               expires_at=expires_at)
        core.event(EventKind.PERSON_SIGNED_IN, actor=person.name, at=now,
                   session=tokens.fingerprint(secret), expires_at=expires_at)
    return person, secret, expires_at


def signed_in(core: Core, secret: str | None) -> Person:
    """The person a session secret signs in; 401 when it is unknown, ended or theirs no more.

    The person is read by the token the session was made with (one indexed read, on every
    request and every replica): once that token is rotated away, or its person removed, no
    one holds it and the session ends at its next use."""
    if not secret or not secret.startswith(tokens.SESSION):
        raise Unauthorized(SIGNED_OUT)
    wanted = tokens.digest(secret)
    session = core.store.session(wanted)
    if session is None or not tokens.same_digest(session["token_hash"], wanted):
        raise Unauthorized(SIGNED_OUT)
    made_with = session.get("person_token_hash")
    found = core.store.person_by_token_hash(made_with) if made_with else None
    holder, holder_hash = found if found is not None else (None, None)
    if holder is None or not rules.session_works(session, holder, holder_hash, core.now()):
        with core.store.atomic():
            core.store.delete_session(wanted)
        raise Unauthorized(SIGNED_OUT)
    return holder  # the hash of their live token goes no further


def sign_out(core: Core, person: Person, secret: str | None) -> None:
    if not secret:
        return
    with core.store.atomic():
        if core.store.delete_session(tokens.digest(secret)):
            core.event(EventKind.PERSON_SIGNED_OUT, actor=person.name,
                       session=tokens.fingerprint(secret))


def pending(core: Core) -> list[dict]:
    """Flights waiting on a person, oldest question first: each open gate, what it guards,
    who may clear it and the flights it holds (with their waiting sentences). An approval is
    such a gate; its flight gets approve and reject buttons."""
    held = {f["id"]: f for f in flights.list_flights(core, stage=Stage.GATED.value, limit=1000)["items"]}
    out = []
    for gate in sorted(gates.list_gates(core, "open"), key=lambda g: g["opened_at"]):
        gate["flights"] = [held[f] for f in gate["flights_held"] if f in held]
        gate["asked"] = None
        if gate["kind"] == approvals.KIND and gate["flight_id"]:
            flight = core.store.flight(gate["flight_id"])  # what approving runs, and the change
            if flight is not None and not flight.final:
                row = core.store.gate(gate["id"])
                assert row is not None, "gates are never deleted"
                gate["asked"] = approval_ops.asked_for(row, flight)
        out.append(gate)
    return out


def newest_event(core: Core) -> int:
    """The seq of the newest event (0: none yet), where a page's long poll starts."""
    rows = core.store.events(after=0, limit=1, newest=True)
    return rows[-1]["seq"] if rows else 0
