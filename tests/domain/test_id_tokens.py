"""The identity tokens' pure rules: what a token says, how long it lives, which keys are
published, which audiences are taken."""

from __future__ import annotations

import pytest

from gg.domain import id_tokens
from gg.domain.id_tokens import MAX_LIFETIME, Subject

NOW = 1_000_000.5


def _subject(**changes) -> Subject:
    fields = dict(flight_id="f_1", attempt=2, epoch=3, environment="prod", opener="ann",
                  approver="ada", runner="r1", group="eu", lease_expires_at=NOW + 60)
    return Subject(**{**fields, **changes})


def test_a_token_says_who_the_flight_is_and_where_it_flies():
    claims = id_tokens.claims(_subject(), issuer="https://gg.example", audience="sts.example",
                              now=NOW, jti="j1")
    assert claims == {"iss": "https://gg.example", "sub": "flight:f_1", "aud": "sts.example",
                      "iat": 1_000_000, "nbf": 1_000_000, "exp": 1_000_060, "jti": "j1",
                      "attempt": 2, "epoch": 3, "environment": "prod", "opener": "ann",
                      "approver": "ada", "runner": "r1", "group": "eu"}
    assert set(claims) == set(id_tokens.CLAIMS)


def test_a_flight_without_an_approver_has_no_approver_claim():
    claims = id_tokens.claims(_subject(approver=None), issuer="i", audience="a", now=NOW,
                              jti="j")
    assert "approver" not in claims


@pytest.mark.parametrize(("lease_left", "lives"), [(60, 60), (MAX_LIFETIME + 300, MAX_LIFETIME),
                                                    (0.9, 0)])
def test_a_token_lives_at_most_ten_minutes_and_never_past_the_lease(lease_left, lives):
    exp = id_tokens.expiry(NOW, NOW + lease_left)
    assert exp == int(NOW) + lives or exp == int(NOW + lease_left)
    assert exp <= NOW + MAX_LIFETIME and exp <= NOW + lease_left


@pytest.mark.parametrize("audience", ["sts.amazonaws.com", "api://AzureADTokenExchange",
                                      "https://iam.googleapis.com/projects/1/x", "a" * 255])
def test_an_audience_a_cloud_provider_names_is_taken(audience):
    assert id_tokens.audience_problem(audience) is None


@pytest.mark.parametrize(("audience", "sentence"), [
    ("", "an identity token needs an audience (--audience AUD), the party that verifies it"),
    ("two words", "an audience has no spaces or control characters (got 'two words')"),
    ("tab\there", "an audience has no spaces or control characters (got 'tab\\there')"),
    ("bell\x07", "an audience has no spaces or control characters (got 'bell\\x07')"),
    ("a" * 256, "an audience is at most 255 characters (got 256)"),
])
def test_a_bad_audience_gets_one_sentence(audience, sentence):
    assert id_tokens.audience_problem(audience) == sentence


def test_a_retired_key_is_published_until_every_token_it_signed_has_expired():
    assert id_tokens.in_jwks(None, NOW)
    assert id_tokens.in_jwks(NOW, NOW + MAX_LIFETIME - 1)
    assert not id_tokens.in_jwks(NOW, NOW + MAX_LIFETIME)


def test_the_issuer_is_the_setting_else_the_url_the_server_was_reached_at_without_a_slash():
    assert id_tokens.issuer_of("", "http://127.0.0.1:7000/") == "http://127.0.0.1:7000"
    assert id_tokens.issuer_of("https://gg.example/", "http://10.0.0.1/") == "https://gg.example"
    document = id_tokens.discovery("https://gg.example", "/.well-known/jwks")
    assert document["issuer"] == "https://gg.example"
    assert document["jwks_uri"] == "https://gg.example/.well-known/jwks"
    assert document["id_token_signing_alg_values_supported"] == ["RS256"]
