"""The console's pure rules: a session works until its expiry and while its person's token
does; a form token is derived from the session and matches only its own; who may cancel."""

from __future__ import annotations

from gg.domain import console, tokens

ADMIN = {"id": "p_a", "role": "admin", "removed_at": None, "token_expires_at": None}
MEMBER = {"id": "p_m", "role": "member", "removed_at": None, "token_expires_at": None}


def test_a_session_works_until_its_expiry_and_only_while_its_person_may_sign_in():
    secret, digest, expires_at = console.new_session(MEMBER, now=100.0, ttl=50.0)
    assert secret.startswith(tokens.SESSION) and digest == tokens.digest(secret)
    session = {"expires_at": expires_at}
    assert expires_at == 150.0
    assert console.session_works(session, MEMBER, 149.9)
    assert not console.session_works(session, MEMBER, 150.0)
    assert not console.session_works(session, None, 120.0)  # the person is gone
    assert not console.session_works(session, {**MEMBER, "removed_at": 110.0}, 120.0)
    assert not console.session_works(session, {**MEMBER, "token_expires_at": 115.0}, 120.0)


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
