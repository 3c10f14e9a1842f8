"""The pool paths over HTTP, in-process against the real app: who may call which, and how a
member's code and credential are refused."""

from __future__ import annotations

import pytest

from gg.settings import Settings

from support import auth, http_proof

DIGEST = "sha256:" + "c" * 64
STRATEGY = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 2, "warm": 1},
            "image": {"ref": "ui-image", "digest": DIGEST}}


@pytest.fixture
def settings():
    return Settings(dev=True)


@pytest.fixture
def client(client):
    """The shared client, with environment ui charted and cleared: flights may use it."""
    charted = ok(client.post("/v1/environments", json={"name": "ui", "means": "true"},
                             headers=auth(client.owner)), 201)
    ok(client.post(f"/v1/gates/{charted['gate']}/clear", headers=auth(client.owner)))
    return client


def ok(response, status=200):
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture
def keeper(client):
    """Strategy ui in force, and a registered runner allowed to maintain its pool."""
    applied = ok(client.put("/v1/strategies/ui", json={"strategy": STRATEGY},
                            headers=auth(client.owner)))
    ok(client.post(f"/v1/gates/{applied['gate']['id']}/clear", headers=auth(client.owner)))
    reg = ok(client.post("/v1/runners", json={"name": "keeper", **http_proof(client, "register")},
                         headers=auth(client.owner)), 201)
    ok(client.post("/v1/runner/check-in", json={}, headers=auth(reg["credential"])))
    ok(client.post("/v1/pools/ui-pool/allow", json={"runner": "keeper"},
                   headers=auth(client.owner)))
    return reg["credential"]


def start(client, keeper) -> str:
    return ok(client.post("/v1/pools/ui-pool/actions", json={"action": "start"},
                          headers=auth(keeper)))["code"]


def join(client, code):
    return client.post("/v1/members/join", json=http_proof(client, "join"),
                       headers=auth(code))


def test_a_members_credential_is_refused_on_every_pool_path_with_403(client, keeper):
    code = start(client, keeper)
    assert code.startswith("ggm_")
    member = ok(join(client, code), 201)["credential"]
    assert ok(client.post("/v1/runner/check-in", json={}, headers=auth(member)))
    calls = [
        client.get("/v1/pools/ui-pool/plan", headers=auth(member)),
        client.post("/v1/pools/ui-pool/actions", json={"action": "start"}, headers=auth(member)),
        client.post("/v1/pools/ui-pool/attest", json={}, headers=auth(member)),
        client.get("/v1/pools", headers=auth(member)),
        client.get("/v1/pools/ui-pool", headers=auth(member)),
        client.get("/v1/strategies", headers=auth(member)),
        client.post("/v1/runner/challenge", headers=auth(member)),
    ]
    assert [r.status_code for r in calls] == [403] * len(calls)
    for r in calls:
        assert set(r.json()) == {"error"} and r.json()["error"]["message"]
    assert calls[0].json()["error"]["message"] == ("a pool member cannot maintain a pool or "
                                                   "call any pool endpoint")


def test_a_runner_nobody_allowed_gets_403_and_a_person_cannot_act_as_a_maintainer(client,
                                                                                  keeper):
    reg = ok(client.post("/v1/runners", json={"name": "stray", **http_proof(client, "register")},
                         headers=auth(client.owner)), 201)
    refused = client.get("/v1/pools/ui-pool/plan", headers=auth(reg["credential"]))
    assert refused.status_code == 403
    assert "gg pool allow ui-pool stray" in refused.json()["error"]["message"]
    assert client.get("/v1/pools/ui-pool/plan", headers=auth(client.owner)).status_code == 401
    assert ok(client.get("/v1/pools/ui-pool/plan", headers=auth(keeper)))["actions"] == [
        {"action": "start", "count": 1, "digest": DIGEST}]


def test_a_member_code_is_refused_once_spent_and_after_ten_minutes(client, keeper, clock):
    first = start(client, keeper)
    ok(join(client, first), 201)
    assert join(client, first).status_code == 401  # one-time
    client.post("/v1/flights", json={"command": ["true"], "environment": "ui"},
                headers=auth(client.owner))
    second = start(client, keeper)
    clock.now += 10 * 60 + 1
    late = join(client, second)
    assert late.status_code == 401 and late.json()["error"]["code"] == "unauthorized"
    assert join(client, "ggm_unknown").status_code == 401


def test_a_bad_strategy_is_refused_with_its_key_and_changes_nothing(client):
    bad = {**STRATEGY, "bounds": {"pool-max": 3}}
    r = client.put("/v1/strategies/ui", json={"strategy": bad}, headers=auth(client.owner))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_airspace"
    assert r.json()["error"]["message"] == ("<request>: bounds.pool-max: must not exceed "
                                            "inventory.size (2) (got 3)")
    assert ok(client.get("/v1/strategies", headers=auth(client.owner))) == []
    pin = client.post("/v1/strategies/ui/digest", json={"digest": "sha256:nope"},
                      headers=auth(client.owner))
    assert pin.status_code == 400


def test_the_pool_paths_are_in_the_openapi_document(client):
    spec = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/pools", "/v1/pools/{pool}/plan", "/v1/pools/{pool}/actions",
                 "/v1/pools/{pool}/attest", "/v1/members/join", "/v1/strategies/{name}"):
        assert path in spec


def test_a_maintainers_check_in_with_a_bad_capacity_is_refused_in_one_sentence(client, keeper):
    for value, sentence in (("-1", "capacity must be 0 or more (got -1)"),
                            ("lots", "capacity")):
        answer = client.get(f"/v1/pools/ui-pool/plan?capacity={value}", headers=auth(keeper))
        assert answer.status_code == 400, answer.text
        assert sentence in answer.json()["error"]["message"]
    shown = ok(client.get("/v1/pools/ui-pool/plan?capacity=3", headers=auth(keeper)))
    assert shown["actions"] and shown["unplaced"] == 0
    row = ok(client.get("/v1/pools/ui-pool", headers=auth(client.owner)))
    assert [(m["name"], m["capacity"], m["online"]) for m in row["maintainers"]] == [
        ("keeper", 3, True)]
