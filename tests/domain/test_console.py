"""The console's pure rules: a session works until its expiry and while the person token it
was made with is still its person's, and works; a form token is derived from the session and
matches only its own; who may cancel."""

from __future__ import annotations

from dataclasses import replace

from gg.domain import console, tokens
from gg.domain.people import Person

ADMIN = Person(id="p_a", name="ada", role="admin")
MEMBER = Person(id="p_m", name="bob", role="member")
MADE_WITH = tokens.digest("ggp_made-with")


def test_a_session_works_until_its_expiry_and_only_while_its_person_may_sign_in():
    secret, digest, expires_at = console.new_session(MEMBER, now=100.0, ttl=50.0)
    assert secret.startswith(tokens.SESSION) and digest == tokens.digest(secret)
    session = {"expires_at": expires_at, "person_id": MEMBER.id, "person_token_hash": MADE_WITH}
    assert expires_at == 150.0
    assert console.session_works(session, MEMBER, MADE_WITH, 149.9)
    assert not console.session_works(session, MEMBER, MADE_WITH, 150.0)
    assert not console.session_works(session, None, None, 120.0)  # nobody holds its token now
    assert not console.session_works(session, replace(MEMBER, removed_at=110.0), MADE_WITH, 120.0)
    assert not console.session_works(session, replace(MEMBER, token_expires_at=115.0), MADE_WITH,
                                     120.0)


def test_a_session_works_only_while_the_token_it_was_made_with_is_its_persons():
    session = {"expires_at": 150.0, "person_id": MEMBER.id, "person_token_hash": MADE_WITH}
    assert console.session_works(session, MEMBER, MADE_WITH, 120.0)
    rotated = tokens.digest("ggp_rotated")
    assert not console.session_works(session, MEMBER, rotated, 120.0)
    assert not console.session_works(session, replace(MEMBER, id="p_other"), MADE_WITH, 120.0)
    made_before = {k: v for k, v in session.items() if k != "person_token_hash"}
    # made with no token kept
    assert not console.session_works(made_before, MEMBER, MADE_WITH, 120.0)


def test_a_form_token_is_derived_from_its_session_and_matches_no_other():
    one, _, _ = console.new_session(MEMBER, 0.0, 10.0)
    two, _, _ = console.new_session(MEMBER, 0.0, 10.0)
    assert console.form_token(one) != one and one not in console.form_token(one)
    assert console.form_token_matches(one, console.form_token(one))
    assert not console.form_token_matches(one, console.form_token(two))
    assert not console.form_token_matches(one, None)
    assert not console.form_token_matches(one, "")


def test_the_opener_or_an_admin_may_cancel_a_flight():
    assert console.may_cancel(MEMBER, "p_m")
    assert not console.may_cancel(MEMBER, "p_a")
    assert console.may_cancel(ADMIN, "p_m")
