"""The runner's lease calls (renew, facts, hand-back) are answered ahead of FastAPI
(gg/server/lease_calls.py): every refusal is the app's own answer byte for byte, and every
answer is the route's."""

from __future__ import annotations

import pytest

from gg.settings import Settings

from support import auth, http_proof

JSON = {"content-type": "application/json"}


@pytest.fixture
def settings():
    return Settings(dev=True, max_body_bytes=4096, claim_wait=30, lease_ttl=60)


def _runner(client, name: str) -> str:
    answer = client.post("/v1/runners", json={"name": name, **http_proof(client, "register")},
                         headers=auth(client.owner)).json()
    credential = answer["credential"]
    caps = {"isolation": ["none", "sandbox"]}
    assert client.post("/v1/runner/check-in", json={"capabilities": caps},
                       headers=auth(credential)).status_code == 200
    return credential


def _flying(client, credential: str) -> str:
    flight = client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
    claimed = client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(credential))
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["flight"]["id"] == flight.json()["id"]
    return flight.json()["id"]


def _same(ours, theirs, what):
    assert (ours.status_code, ours.content, dict(ours.headers)) == \
        (theirs.status_code, theirs.content, dict(theirs.headers)), what


def test_every_refusal_before_the_use_case_is_the_apps_own_answer(client, framework):
    credential = _runner(client, "r")
    flight = _flying(client, credential)
    good = auth(credential) | JSON
    for call, body in (("renew", b'{"epoch": 1}'), ("facts", b'{"epoch": 1, "facts": [{"kind": "output"}]}'),
                       ("hand-back", b'{"epoch": 1, "outcome": "landed"}')):
        path = f"/v1/runner/flights/{flight}/{call}"
        asked = [
            ({}, body),  # no credential
            (auth("ggr_not-a-credential") | JSON, body),
            (auth(client.owner) | JSON, body),  # a person's token
            (good, b'{"epoch": '),
            (good, b'{"epoch": NaN}'),
            (good, b'{"epoch": 1e999}'),
            (good, b"[" * 100_000 + b"]" * 100_000),
            (good, b''),
            (good, b'[]'),
            (good, b'{"epoch": 0}'),
            (good, b'{"epoch": 1, "extra": 1}'),
            (good, b'{"epoch": 1, "facts": [{"kind": "exit", "ago": 1}], "outcome": "landed"}'),
            (good, b'{"epoch": 1, "outcome": "landed", "facts": [{"kind": "output"}]}'),
            (good, b'{"epoch": 1, "facts": [{"kind": "started", "ago": -1}]}'),
            (good, b'{"epoch": 1, "outcome": "landed", "claim_next": -1}'),
            (good, b'{"epoch": 1, "outcome": "landed", "claim_next": 257}'),
            (good, b'{"epoch": 1, "outcome": "landed", "claim_next": "one"}'),
            (good, b'{"epoch": 1, "pad": "' + b"x" * 5000 + b'"}'),  # past the body limit
            (auth(credential) | {"content-type": "text/plain"}, body),
            (auth(credential), body),  # no content type
            (good | {"content-length": "nope"}, body),
        ]
        for headers, content in asked:
            ours = client.post(path, content=content, headers=headers)
            theirs = framework.post(path, content=content, headers=headers)
            assert 400 <= ours.status_code < 500, (call, content[:40], ours.text)
            assert ours.json()["error"]["code"]
            _same(ours, theirs, (call, headers, content[:40]))
        assert client.get(path).status_code == 405  # another method: the app's


def test_a_stale_epoch_is_refused_exactly_as_the_route_refused_it(client, clock, framework):
    a, b = _runner(client, "a"), _runner(client, "b")
    flight = _flying(client, a)
    clock.advance(61)  # a's lease ran out: the flight goes to b at epoch 2
    for credential in (a, b):
        client.post("/v1/runner/check-in", json={}, headers=auth(credential))
    assert client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(b)).json()["lease"]["epoch"] == 2
    stale = [("renew", {"epoch": 1}),
             ("facts", {"epoch": 1, "facts": [{"kind": "output", "body": {"text": "late"}}]}),
             ("hand-back", {"epoch": 1, "outcome": "landed", "exit_code": 0, "key": "1:hand-back",
                            "facts": [{"kind": "started", "ago": 0.5}]})]
    for call, body in stale:
        path = f"/v1/runner/flights/{flight}/{call}"
        ours = client.post(path, json=body, headers=auth(a))
        theirs = framework.post(path, json=body, headers=auth(a))
        assert ours.status_code == 409 and ours.json()["error"]["code"] == "lease_superseded"
        _same(ours, theirs, call)
    unknown = client.post("/v1/runner/flights/nope/renew", json={"epoch": 1}, headers=auth(a))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    _same(unknown, framework.post("/v1/runner/flights/nope/renew", json={"epoch": 1},
                                  headers=auth(a)), "unknown")
    facts = client.get(f"/v1/flights/{flight}", headers=auth(client.owner)).json()["facts"]
    assert all(f["epoch"] == 2 or f["kind"] == "expired" for f in facts)


def test_answers_are_the_routes_own_and_counted_under_their_templates(client, framework):
    answers = {}
    for who in ("ours", "theirs"):
        http = client if who == "ours" else framework
        credential = _runner(client, who)
        flight = _flying(client, credential)
        base = f"/v1/runner/flights/{flight}"
        answers[who] = [
            http.post(base + "/renew", json={"epoch": 1}, headers=auth(credential)),
            http.post(base + "/facts", json={"epoch": 1, "facts": [
                {"kind": "started", "key": "1:started:1", "ago": 0.25},
                {"kind": "output", "body": {"text": "hi\n"}, "key": "1:output:2"}]},
                headers=auth(credential)),
            http.post(base + "/facts", json={"epoch": 1, "facts": [
                {"kind": "output", "body": {"text": "hi\n"}, "key": "1:output:2"}]},
                headers=auth(credential)),  # a retry: stored once
            http.post(base + "/hand-back", json={"epoch": 1, "outcome": "landed", "exit_code": 0,
                                                 "key": "1:hand-back"}, headers=auth(credential)),
            http.post(base + "/hand-back", json={"epoch": 1, "outcome": "landed", "exit_code": 0,
                                                 "key": "1:hand-back"}, headers=auth(credential)),
        ]
    for ours, theirs in zip(answers["ours"], answers["theirs"], strict=True):
        assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
        assert ours.headers["content-type"] == theirs.headers["content-type"]
        assert set(ours.json()) == set(theirs.json())
    renewed, stored, again, handed, repeat = (r.json() for r in answers["ours"])
    assert renewed["epoch"] == 1 and renewed["expires_at"] > renewed["server_time"]
    assert (stored, again) == ({"stored": 2, "received": 2}, {"stored": 0, "received": 1})
    assert handed == {"flight": handed["flight"], "stage": "landed", "repeat": False,
                      "next": None}  # no claim_next asked: no next flight
    assert repeat["repeat"] is True
    assert b", " not in answers["ours"][0].content  # compact, as FastAPI's
    metrics = [line for line in client.get("/metrics").text.splitlines()
               if line.startswith("gg_http_requests_total") and "/hand-back" in line]
    assert any("{flight_id}" in line and 'status="200"' in line for line in metrics), metrics


def test_a_hand_back_asking_for_the_next_flight_carries_it_in_its_answer(client, framework):
    """``claim_next``: the slot the flight frees is filled at once, in the hand-back's own
    answer (one request a flight fewer); nothing ready, a repeat, a draining runner or a
    retired runner's last word get no next flight. The ahead route and the app agree."""
    for who in ("ours", "theirs"):
        http = client if who == "ours" else framework
        credential = _runner(client, who)
        first = _flying(client, credential)
        queued = client.post("/v1/flights", json={"command": ["true"]},
                             headers=auth(client.owner)).json()["id"]
        body = {"epoch": 1, "outcome": "landed", "exit_code": 0, "key": "1:hand-back",
                "claim_next": 1}
        handed = http.post(f"/v1/runner/flights/{first}/hand-back", json=body,
                           headers=auth(credential))
        assert handed.status_code == 200, handed.text
        following = handed.json()["next"]
        assert following["flight"]["id"] == queued and following["lease"]["epoch"] == 1
        assert following["policy"] and following["protocol"]["hand_back_claims"] is True
        seen = client.get(f"/v1/flights/{queued}", headers=auth(client.owner)).json()
        assert seen["stage"] == "flying", seen
        again = http.post(f"/v1/runner/flights/{first}/hand-back", json=body,
                          headers=auth(credential)).json()
        assert again["repeat"] is True and again["next"] is None  # a repeat changes nothing
        client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
        nothing = http.post(f"/v1/runner/flights/{queued}/hand-back", json={
            **body, "claim_next": 0}, headers=auth(credential)).json()
        assert nothing["next"] is None  # not asked: the queued flight stays for a claim
        taken = client.post("/v1/runner/claim", json={"wait": 0}, headers=auth(credential))
        assert taken.status_code == 200
        third = taken.json()["flight"]["id"]
        assert client.post(f"/v1/runners/{who}/drain", headers=auth(client.owner)
                           ).status_code == 200
        waiting = client.post("/v1/flights", json={"command": ["true"]},
                              headers=auth(client.owner)).json()["id"]
        drained = http.post(f"/v1/runner/flights/{third}/hand-back", json=body,
                            headers=auth(credential)).json()
        assert drained["repeat"] is False and drained["next"] is None
        assert client.post(f"/v1/flights/{waiting}/cancel", json={},
                           headers=auth(client.owner)).status_code == 200  # not the next one's
    gone = _runner(client, "gone")
    held = _flying(client, gone)
    waiting = client.post("/v1/flights", json={"command": ["true"]},
                          headers=auth(client.owner)).json()["id"]
    assert client.post("/v1/runners/gone/retire", headers=auth(client.owner)).status_code == 200
    last_word = client.post(f"/v1/runner/flights/{held}/hand-back", headers=auth(gone), json={
        "epoch": 1, "outcome": "returned", "key": "1:hand-back", "claim_next": 1})
    assert last_word.status_code == 200 and last_word.json()["next"] is None
    seen = client.get(f"/v1/flights/{waiting}", headers=auth(client.owner)).json()
    assert seen["stage"] != "flying"
    assert client.get("/v1/runner/claim").status_code == 405
