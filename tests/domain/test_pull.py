"""What a pull-mode request and answer sign, and when a signature is still good."""

from __future__ import annotations

from gg import keys
from gg.domain import pull as rules
from gg.settings import Settings


def test_a_request_signature_covers_its_runner_method_path_time_nonce_and_body():
    key = keys.generate()
    public = keys.public_text(key)
    parts = ("SHA256:x", "POST", "/v1/pull/poll", "100.000", "n1", b'{"a":1}')
    signature = keys.sign(key, rules.request_message(*parts))
    assert keys.verify(public, rules.request_message(*parts), signature)
    for i, other in enumerate(("SHA256:y", "GET", "/v1/pull/deliver", "101.000", "n2",
                               b'{"a":2}')):
        changed = parts[:i] + (other,) + parts[i + 1:]
        assert not keys.verify(public, rules.request_message(*changed), signature)


def test_an_answer_signature_names_the_request_it_answers():
    key = keys.generate()
    message = rules.answer_message(200, "request-nonce", "100.000", b"{}")
    signature = keys.sign(key, message)
    assert keys.verify(keys.public_text(key), message, signature)
    assert not keys.verify(keys.public_text(key),
                           rules.answer_message(200, "another", "100.000", b"{}"), signature)
    assert not keys.verify(keys.public_text(key),
                           rules.answer_message(401, "request-nonce", "100.000", b"{}"),
                           signature)


def test_a_timestamp_is_fresh_only_within_the_skew_either_way():
    assert rules.fresh("1000.0", now=1030.0, skew=60)
    assert rules.fresh("1060.0", now=1000.0, skew=60)
    assert not rules.fresh("1000.0", now=1061.0, skew=60)
    assert not rules.fresh("1061.0", now=1000.0, skew=60)
    assert not rules.fresh("", now=1000.0, skew=60)
    assert not rules.fresh("soon", now=1000.0, skew=60)


def test_a_nonce_is_accepted_once_and_forgotten_only_after_its_time_is_stale():
    nonces = rules.Nonces(skew=60)
    assert nonces.accept("a", now=1000.0)
    assert not nonces.accept("a", now=1001.0)
    assert not nonces.accept("a", now=1000.0 + 119)  # its timestamp could still be fresh
    assert nonces.accept("b", now=1000.0 + 121)
    assert "a" not in nonces.seen  # stale by now: a replay is refused by its timestamp
    assert not nonces.accept("", now=1200.0)


# -- when the control plane renews a pull-mode runner's lease ------------------------------------

def test_a_pull_runners_lease_is_renewed_with_a_missed_poll_to_spare_before_its_deadline():
    defaults = Settings()
    assert rules.renew_when(defaults) == 20 + 15 + 1  # LEASE_RENEW_AT + CHECK_IN + a busy poll
    assert rules.renewal_window(defaults) == 36 - 10  # until the runner stops it (its margin)
    assert rules.polls_too_slow(defaults) is None
    # The tests' leases: renewed at every poll, and stopped 1 s before they run out
    fast = Settings(check_in_interval=0.5, lease_ttl=3, lease_renew_at=2)
    assert rules.renewal_window(fast) == 3 - 1
    assert rules.polls_too_slow(fast) is None


def test_a_busy_interval_below_the_gap_between_two_polls_counts_as_that_gap():
    assert rules.poll_every(Settings(pull_busy_interval=0.01)) == rules.MIN_POLL_GAP


def test_polls_too_seldom_for_the_leases_are_one_sentence():
    settings = Settings(check_in_interval=0.5, lease_ttl=3, lease_renew_at=2,
                        pull_busy_interval=2)
    assert rules.polls_too_slow(settings) == (
        "PULL_BUSY_INTERVAL (2s) must be shorter than the 2s a pull-mode runner's lease leaves "
        "for its renewal (LEASE_TTL 3s less the runner's stop margin 1s): poll more often or "
        "make the leases longer")
