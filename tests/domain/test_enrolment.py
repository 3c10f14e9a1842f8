"""Token status, enrolled labels, maintenance items and the credential digest."""

from __future__ import annotations

from gg.domain.enrolment import (
    EnrolToken,
    enrolled_labels,
    expected_items,
    refs_digest,
    token_status,
)
from gg.domain.profiles import Profile


def token(**kw) -> EnrolToken:
    values = dict(fingerprint="sha256:" + "0" * 16, profile="ui", uses=1, uses_left=1,
                  expires_at=100.0, created_at=0.0)
    values.update(kw)
    return EnrolToken(**values)


def test_expired_wins_then_revoked_then_exhausted():
    assert token_status(token(), 50.0) == "active"
    assert token_status(token(uses_left=0), 50.0) == "exhausted"
    assert token_status(token(uses_left=0, revoked_at=10.0), 50.0) == "revoked"
    assert token_status(token(uses_left=0, revoked_at=10.0), 100.0) == "expired"


def test_a_token_of_uses_0_is_never_exhausted_only_expired_or_revoked():
    unlimited = token(uses=0, uses_left=0)
    assert token_status(unlimited, 50.0) == "active"
    assert unlimited.view(50.0)["uses_left"] is None
    assert token_status(token(uses=0, uses_left=0, revoked_at=10.0), 50.0) == "revoked"
    assert token_status(unlimited, 100.0) == "expired"


def test_an_enrolled_machine_advertises_exactly_its_environment_while_in_force():
    profile = Profile(name="ui", purpose="p", roles=("runner",), environment="web")
    assert enrolled_labels(profile) == {"environment": "web"}
    assert enrolled_labels(None) == {}


def test_the_maintenance_items_are_the_agent_each_credential_and_each_host():
    profile = Profile(name="ui", purpose="p", roles=("runner",), environment="ui",
                      agent="codex", credentials=("https://git.example.com/acme/ui.git", "npm"),
                      repository_hosts=("git.example.com", "10.0.0.5:2222"))
    assert list(expected_items(profile)) == [
        "agent:codex", "credential:git.example.com/acme/ui", "credential:npm",
        "host:git.example.com", "host:10.0.0.5:2222"]
    assert "gg credential add --repo git.example.com/acme/ui" in \
        expected_items(profile)["credential:git.example.com/acme/ui"]
    assert expected_items(None) == {}


def test_the_credential_digest_ignores_order_and_added_at_but_not_a_rotation():
    a = {"kind": "name", "ref": "npm", "fingerprint": "sha256:" + "a" * 16, "added_at": "x"}
    b = {"kind": "repo", "ref": "h.example/a/b", "fingerprint": "sha256:" + "b" * 16}
    assert refs_digest([a, b]) == refs_digest([b, {**a, "added_at": "y"}])
    assert refs_digest([a]) != refs_digest([{**a, "fingerprint": "sha256:" + "c" * 16}])
    assert refs_digest([]) != refs_digest([a])
