"""The pure rules of hooks: the --on names and their events, what a hook hears, the body
and its signature, and the capped backoff."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from gg.domain import hooks
from gg.domain.events import EventKind
from gg.errors import BadRequest


def test_each_on_name_is_one_event_kind_and_the_issue_names_are_there():
    assert all(isinstance(k, EventKind) for k in hooks.HOOK_EVENTS.values())
    assert len(set(hooks.HOOK_EVENTS.values())) == len(hooks.HOOK_EVENTS)
    assert hooks.HOOK_EVENTS["landed"] is EventKind.FLIGHT_LANDED
    assert hooks.HOOK_EVENTS["failed"] is EventKind.FLIGHT_FAILED
    assert hooks.HOOK_EVENTS["cancelled"] is EventKind.FLIGHT_CANCELLED
    assert hooks.HOOK_EVENTS["gated"] is EventKind.GATE_OPENED
    assert hooks.HOOK_EVENTS["runner.offline"] is EventKind.RUNNER_AGED_OUT
    assert hooks.NAME_OF[EventKind.FLIGHT_LANDED.value] == "landed"


def test_on_names_are_parsed_and_an_unknown_one_is_refused_in_one_sentence():
    assert hooks.parse_on(" failed,landed ,landed") == ["landed", "failed"]
    with pytest.raises(BadRequest) as unknown:
        hooks.parse_on("landed,exploded")
    assert unknown.value.message.startswith("exploded is not an event a hook can hear")
    assert "\n" not in unknown.value.message
    with pytest.raises(BadRequest):
        hooks.parse_on(" , ")


@pytest.mark.parametrize("url", ["ftp://h/x", "http://", "example.com/x", "http://u:p@h/x",
                                 "http://h/a b", "http://h/" + "x" * 2048])
def test_a_url_that_is_not_plain_http_with_a_host_is_refused(url):
    with pytest.raises(BadRequest):
        hooks.check_url(url)


def test_a_hook_hears_its_kinds_and_with_an_environment_only_that_environments_flights():
    every = {"events": ["landed", "runner.offline"], "environment": None}
    prod = {"events": ["landed"], "environment": "prod"}
    assert hooks.hears(every, EventKind.FLIGHT_LANDED, None)
    assert hooks.hears(every, EventKind.RUNNER_AGED_OUT, None)
    assert not hooks.hears(every, EventKind.FLIGHT_FAILED, None)
    assert not hooks.hears(every, EventKind.PERSON_ADDED, None)
    assert hooks.hears(prod, EventKind.FLIGHT_LANDED, "prod")
    assert not hooks.hears(prod, EventKind.FLIGHT_LANDED, "staging")
    assert not hooks.hears(prod, EventKind.FLIGHT_LANDED, None)


def test_the_body_is_fixed_bytes_and_the_signature_is_hmac_sha256_over_them():
    event = {"seq": 7, "kind": EventKind.FLIGHT_LANDED.value, "at": 1000.5, "flight_id": "f_1",
             "runner_id": "r_1", "actor": "r1", "body": {"exit_code": 0}}
    payload = hooks.body(delivery_id="d_1", hook_id="h_1", event=event, environment="prod")
    assert payload == hooks.body(delivery_id="d_1", hook_id="h_1", event=event,
                                 environment="prod")
    read = json.loads(payload)
    assert read["event"] == "landed" and read["delivery"] == "d_1" and read["seq"] == 7
    assert read["body"] == {"exit_code": 0} and read["environment"] == "prod"
    secret = hooks.new_secret()
    assert secret.startswith(hooks.SECRET_PREFIX) and secret != hooks.new_secret()
    want = hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()
    assert hooks.signature(secret, payload) == "sha256=" + want
    assert hooks.signature(secret, payload + b" ") != hooks.signature(secret, payload)


def test_retries_double_from_the_base_and_are_capped():
    waits = [hooks.next_try(n, 100.0, base=1.0, cap=30.0) - 100.0 for n in range(1, 9)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert hooks.next_try(10_000, 0.0, base=1.0, cap=300.0) == 300.0
    assert hooks.delivered(200) and hooks.delivered(204)
    assert not any(hooks.delivered(s) for s in (None, 199, 301, 404, 500))
