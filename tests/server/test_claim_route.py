"""``POST /v1/runner/claim`` is answered ahead of FastAPI (gg/server/claims.py): its refusals
are the app's own answers byte for byte, its answers are the route's, and a parked claim holds
none of the framework's request objects while it waits."""

from __future__ import annotations

import gc
import threading

import pytest
from starlette.requests import Request

from gg.settings import Settings

from support import auth, http_runner, wait_until

CLAIM = "/v1/runner/claim"
JSON = {"content-type": "application/json"}


@pytest.fixture
def settings():
    return Settings(dev=True, max_body_bytes=4096, claim_wait=30)


def _runner(client, name: str) -> str:
    return http_runner(client, name, client.owner)


def test_every_refusal_is_the_apps_own_answer(client, framework):
    credential = _runner(client, "r")
    good = auth(credential) | JSON
    asked = [
        ({}, b'{"wait": 0}'),  # no credential
        (auth("ggr_not-a-credential") | JSON, b'{"wait": 0}'),
        (auth(client.owner) | JSON, b'{"wait": 0}'),  # a person's token
        ({"authorization": "Basic x"} | JSON, b'{"wait": 0}'),
        (good, b'{"wait": '),
        (good, b'{"wait": NaN}'),
        (good, b'{"wait": 1e999}'),
        (good, b'\xff\xfe'),
        (good, b"[" * 100_000 + b"]" * 100_000),
        (good, b'[]'),
        (good, b''),
        (good, b'{"free_slots": 999}'),
        (good, b'{"wait": -1}'),
        (good, b'{"wait": 0, "extra": 1}'),
        (good, b'{"readings": {"cpu": 1}, "policy": "' + b"x" * 65 + b'"}'),
        (good, b'{"wait": 0, "pad": "' + b"x" * 5000 + b'"}'),  # past the body limit
        (auth(credential) | {"content-type": "text/plain"}, b'{"wait": 0}'),
        (auth(credential), b'{"wait": 0}'),  # no content type
        (good | {"content-length": "nope"}, b'{"wait": 0}'),
        (auth("ggr_not-a-credential") | JSON, b'{"wait": '),  # which refusal comes first
    ]
    for headers, body in asked:
        ours = client.post(CLAIM, content=body, headers=headers)
        theirs = framework.post(CLAIM, content=body, headers=headers)
        assert 400 <= ours.status_code < 500, (headers, body[:40], ours.text)
        assert (ours.status_code, ours.content, dict(ours.headers)) == \
            (theirs.status_code, theirs.content, dict(theirs.headers)), (headers, body[:40])


def _shape(value):
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__


def test_answers_are_serialised_as_the_route_serialises_them(client, framework):
    runners = [_runner(client, name) for name in ("a", "b")]
    # The app's stack first: the dispatcher keeps the loop of the last claim it saw, and the
    # drain below must reach the client's.
    for answered_by, credential in zip((framework, client), runners, strict=True):
        nothing = answered_by.post(CLAIM, json={"wait": 0}, headers=auth(credential))
        assert (nothing.status_code, nothing.content) == (204, b"")
    for _ in runners:
        client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
    theirs, ours = (answered_by.post(CLAIM, json={"wait": 0, "readings": {"cpu_percent": 1.0}},
                                     headers=auth(credential))
                    for answered_by, credential in zip((framework, client), runners, strict=True))
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    assert ours.headers["content-type"] == theirs.headers["content-type"]
    assert _shape(ours.json()) == _shape(theirs.json())
    assert ours.json()["lease"]["epoch"] == 1 and ours.json()["flight"]["id"]
    assert b", " not in ours.content and b": " not in ours.content  # compact, as FastAPI's
    drained = client.post("/v1/runners/b/drain", headers=auth(client.owner))
    assert drained.status_code == 200, drained.text
    told = client.post(CLAIM, json={"wait": 0, "readings": {}}, headers=auth(runners[1]))
    assert told.status_code == 200 and told.json() == {"instruction": {"kind": "drain"}}, told.text


def test_a_parked_claim_holds_no_framework_request(client):
    credential = _runner(client, "parked")
    dispatcher = client.app.state.dispatcher
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(
        client.post(CLAIM, json={"wait": 30, "readings": {}}, headers=auth(credential))))
    waiting.start()
    try:
        wait_until(lambda: dispatcher.parked_count == 1, what="the claim parked")
        gc.collect()
        held = [o for o in gc.get_objects()
                if isinstance(o, Request) and o.scope.get("path") == CLAIM]
        assert held == []
    finally:
        dispatcher.loop.call_soon_threadsafe(dispatcher.release_all)
        waiting.join(timeout=60)
    assert answers and answers[0].status_code == 204
    requests = [line for line in client.get("/metrics").text.splitlines()
                if line.startswith("gg_http_requests_total") and CLAIM in line]
    assert any('status="204"' in line and line.endswith(" 1.0") for line in requests), requests
