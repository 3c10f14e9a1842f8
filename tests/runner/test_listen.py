"""The listening runner's door, in process over loopback: what it serves, to whom, and once."""

from __future__ import annotations

import json
import math
import time

import httpx
import pytest

from gg import keys
from gg.domain import pull as rules
from gg.runner.listen import Listener
from gg.runner.pull import PullOptions, PullRunner


@pytest.fixture
def door(tmp_path):
    control = keys.generate()
    runner = PullRunner(PullOptions(host="127.0.0.1", port=0, state_dir=tmp_path / "state",
                                    name="p1"), say=lambda line: None)
    runner.pin(keys.public_text(control))
    opened = []

    def open_door() -> Listener:
        listener = Listener(runner, "127.0.0.1", 0)
        listener.start()
        opened.append(listener)
        return listener

    yield control, runner, open_door
    for listener in opened:
        listener.close()


def _signed(key, meant_for: str, path: str, body: bytes, stamp: float | None = None) -> dict:
    stamp_text = f"{time.time() if stamp is None else stamp:.3f}"
    nonce = rules.new_nonce()
    return {rules.TIMESTAMP_HEADER: stamp_text, rules.NONCE_HEADER: nonce,
            rules.SIGNATURE_HEADER: keys.sign(key, rules.request_message(
                meant_for, "POST", path, stamp_text, nonce, body))}


def _post(listener: Listener, path: str, body: bytes, headers: dict) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{listener.port}{path}", content=body,
                      headers=headers, trust_env=False, timeout=10)


POLL = json.dumps({"runner": "r_1", "name": "p1"}).encode()


def test_a_signed_poll_is_served_once(door):
    control, runner, open_door = door
    listener = open_door()
    headers = _signed(control, runner.fingerprint, rules.POLL_PATH, POLL)
    first = _post(listener, rules.POLL_PATH, POLL, headers)
    assert first.status_code == 200 and "check_in" in first.json()
    again = _post(listener, rules.POLL_PATH, POLL, headers)
    assert again.status_code == 401
    message = rules.answer_message(401, headers[rules.NONCE_HEADER],
                                   again.headers[rules.TIMESTAMP_HEADER], again.content)
    assert keys.verify(runner.public_key, message, again.headers[rules.SIGNATURE_HEADER])


def test_a_request_signed_before_the_runner_started_is_refused(door):
    control, runner, open_door = door
    headers = _signed(control, runner.fingerprint, rules.POLL_PATH, POLL, stamp=time.time() - 1)
    listener = open_door()  # started after the request was signed: its nonce is unknown
    refused = _post(listener, rules.POLL_PATH, POLL, headers)
    assert refused.status_code == 401
    assert "before this runner started" in refused.json()["error"]["message"]


def test_a_request_signed_in_the_runners_first_millisecond_is_served(door):
    control, runner, open_door = door
    listener = open_door()
    # Stamps carry milliseconds; one signed in the millisecond the runner started, after it
    # started, reads as that millisecond and must not pass for one from before the start.
    first_millisecond = math.floor(listener.started_at * 1000) / 1000
    headers = _signed(control, runner.fingerprint, rules.POLL_PATH, POLL, stamp=first_millisecond)
    assert _post(listener, rules.POLL_PATH, POLL, headers).status_code == 200


def test_a_body_changed_after_signing_is_refused(door):
    control, runner, open_door = door
    listener = open_door()
    headers = _signed(control, runner.fingerprint, rules.POLL_PATH, POLL)
    other = json.dumps({"runner": "r_2", "name": "p1"}).encode()
    assert _post(listener, rules.POLL_PATH, other, headers).status_code == 401
    assert runner.runner_id is None  # nothing was served


def test_a_request_signed_for_another_runner_is_refused(door):
    """Every runner pins the same control plane key: a request signed for runner X (its key
    fingerprint) and replayed to this one is not this one's, whatever its nonce."""
    control, runner, open_door = door
    listener = open_door()
    other = keys.public_text(keys.generate())
    from gg.domain.identity import key_fingerprint

    for meant_for in (key_fingerprint(other), rules.ANYONE):
        refused = _post(listener, rules.POLL_PATH, POLL,
                        _signed(control, meant_for, rules.POLL_PATH, POLL))
        assert refused.status_code == 401
        assert "for this runner" in refused.json()["error"]["message"]
    assert runner.runner_id is None  # nothing was served
    served = _post(listener, rules.POLL_PATH, POLL,
                   _signed(control, runner.fingerprint, rules.POLL_PATH, POLL))
    assert served.status_code == 200
