"""``POST /v1/flights`` is answered ahead of FastAPI (gg/server/open_call.py): every refusal
is the app's own answer byte for byte, and every answer is the route's."""

from __future__ import annotations

import pytest

from gg.settings import Settings

from support import auth, http_proof

JSON = {"content-type": "application/json"}


@pytest.fixture
def settings():
    return Settings(dev=True, max_body_bytes=4096, claim_wait=30, lease_ttl=60)


def _same(ours, theirs, what):
    assert (ours.status_code, ours.content, dict(ours.headers)) == \
        (theirs.status_code, theirs.content, dict(theirs.headers)), what


def _runner_credential(client) -> str:
    return client.post("/v1/runners", json={"name": "r", **http_proof(client, "register")},
                       headers=auth(client.owner)).json()["credential"]


def test_every_refusal_before_the_use_case_is_the_apps_own_answer(client, framework):
    removed = client.post("/v1/people", json={"name": "gone"}, headers=auth(client.owner)).json()
    assert client.delete("/v1/people/gone", headers=auth(client.owner)).status_code == 200
    good = auth(client.owner) | JSON
    body = b'{"command": ["true"]}'
    asked = [
        ({}, body),  # no token
        (JSON, body),  # no token, a JSON body
        (auth("ggp_not-a-token") | JSON, body),
        (auth(removed["token"]) | JSON, body),  # a removed person's token
        (auth(_runner_credential(client)) | JSON, body),  # a runner's credential
        ({"authorization": "Basic abc"} | JSON, body),
        (good, b'{"command": '),
        (good, b'{"command": ["true"], "timeout": NaN}'),
        (good, b'{"command": ["true"], "timeout": 1e999}'),
        (good, b"[" * 100_000 + b"]" * 100_000),
        (good, b''),
        (good, b'[]'),
        (good, b'{}'),
        (good, b'{"command": []}'),
        (good, b'{"command": ["true"], "extra": 1}'),
        (good, b'{"command": ["true"], "environment": "Not A Name"}'),
        (good, b'{"command": ["true"], "priority": "urgent"}'),
        (good, b'{"command": ["true"], "timeout": -1}'),
        (good, b'{"command": ["true"], "service": {"port": 0}}'),
        (good, b'{"command": ["true"], "pad": "' + b"x" * 5000 + b'"}'),  # past the body limit
        (auth(client.owner) | {"content-type": "text/plain"}, body),
        (auth(client.owner), body),  # no content type
        (good | {"content-length": "nope"}, body),
    ]
    for headers, content in asked:
        ours = client.post("/v1/flights", content=content, headers=headers)
        theirs = framework.post("/v1/flights", content=content, headers=headers)
        assert 400 <= ours.status_code < 500, (headers, content[:40], ours.text)
        assert ours.json()["error"]["code"]
        _same(ours, theirs, (headers, content[:40]))
    listed = client.get("/v1/flights", headers=auth(client.owner)).json()["items"]
    assert listed == []  # nothing refused was opened


def test_a_use_case_refusal_is_answered_in_the_routes_shape(client, framework):
    member = client.post("/v1/people", json={"name": "bob"}, headers=auth(client.owner)).json()
    asked = [
        (client.owner, {"command": ["true"], "environment": "nowhere"}),  # not charted
        (client.owner, {"command": ["true"], "runner": "nobody"}),
        (client.owner, {"command": ["true"], "repo": "not a repository"}),
        (member["token"], {"command": ["true"], "priority": "high"}),
        (client.owner, {"command": ["true"], "service": {}, "timeout": 5}),
    ]
    for token, body in asked:
        ours = client.post("/v1/flights", json=body, headers=auth(token))
        theirs = framework.post("/v1/flights", json=body, headers=auth(token))
        assert 400 <= ours.status_code < 500, (body, ours.text)
        _same(ours, theirs, body)
    assert client.get("/v1/flights", headers=auth(client.owner)).json()["items"] == []


def test_the_answer_is_the_routes_row_and_counted_under_its_path(client, framework):
    body = {"command": ["echo", "hi"], "title": "t", "labels": {"os": "linux"},
            "priority": "low", "timeout": 30, "output_limit": 1000}
    ours = client.post("/v1/flights", json=body, headers=auth(client.owner))
    theirs = framework.post("/v1/flights", json=body, headers=auth(client.owner))
    assert ours.status_code == theirs.status_code == 201, (ours.text, theirs.text)
    assert dict(ours.headers) | {"content-length": "0"} == \
        dict(theirs.headers) | {"content-length": "0"}
    mine, its = ours.json(), theirs.json()
    assert mine["id"] != its["id"]
    different = {"id", "opened_at", "title"}  # each opened its own flight
    assert {k: v for k, v in mine.items() if k not in different} == \
        {k: v for k, v in its.items() if k not in different}
    assert b", " not in ours.content  # compact, as FastAPI's
    assert mine["stage"] == "ready" and mine["opened_by_name"] == "owner"
    shown = client.get(f"/v1/flights/{mine['id']}", headers=auth(client.owner)).json()
    assert shown["command"] == ["echo", "hi"] and shown["priority"] == "low"
    lines = [line for line in client.get("/metrics").text.splitlines()
             if line.startswith("gg_http_requests_total") and '"/v1/flights"' in line
             and 'method="POST"' in line and 'status="201"' in line]
    assert lines and float(lines[0].rsplit(" ", 1)[1]) == 2.0, lines
