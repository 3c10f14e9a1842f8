"""Placement's HTTP surface, in-process against the real app and a real SQLite file."""

from __future__ import annotations

import pytest

from support import auth, http_proof


@pytest.fixture
def client(client):
    """The shared client; ``client.ada`` is the headers of a member, ada."""
    member = client.post("/v1/people", json={"name": "ada"}, headers=auth(client.owner))
    client.ada = auth(member.json()["token"])
    return client


def register(client, name, labels=None, inventory=None):
    r = client.post("/v1/runners", json={"name": name, **http_proof(client, "register"),
                                         "labels": labels or {}}, headers=auth(client.owner))
    assert r.status_code == 201, r.text
    credential = {"authorization": f"Bearer {r.json()['credential']}"}
    body = {"labels": labels or {}}
    if inventory is not None:
        body["inventory"] = inventory
    assert client.post("/v1/runner/check-in", json=body, headers=credential).status_code == 200
    return credential


def test_every_placement_path_is_published(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/environments", "/v1/environments/{name}", "/v1/airspace/root",
                 "/v1/labels", "/v1/runners/{ref}/claim", "/v1/runners/{ref}/unclaim",
                 "/v1/runners/{ref}/reserve", "/v1/runners/{ref}/release",
                 "/v1/runners/{ref}/ownership", "/v1/flights/{flight_id}/plan"):
        assert path in paths, path


def test_a_malformed_meaning_is_a_400_with_its_position_and_nothing_is_charted(client):
    r = client.post("/v1/environments", json={"name": "ui", "means": "cpu_cuont >= 4"},
                    headers=auth(client.owner))
    assert r.status_code == 400
    assert r.json() == {"error": {"code": "invalid_meaning", "message": (
        "the meaning names an unknown fact cpu_cuont at line 1, column 1; did you mean cpu_count?")}}
    assert client.get("/v1/environments", headers=auth(client.owner)).json() == []


def test_chart_clear_and_fly(client):
    register(client, "r1", {"environment": "ui"}, {"os": "Linux", "cpu_count": 4})
    env = client.post("/v1/environments", json={"name": "ui", "means": 'os == "linux"'},
                      headers=auth(client.owner))
    assert env.status_code == 201 and env.json()["gate_status"] == "open"
    refused = client.post("/v1/flights", json={"command": ["true"], "environment": "ui"},
                          headers=client.ada)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "environment_gated"
    gate = env.json()["gate"]
    assert client.post(f"/v1/gates/{gate}/clear", headers=client.ada).status_code == 403
    assert client.post(f"/v1/gates/{gate}/clear", headers=auth(client.owner)).status_code == 200
    shown = client.get("/v1/environments/ui", headers=auth(client.owner)).json()
    assert (shown["meaning"], shown["measured"], shown["gate_status"]) == ('os == "linux"', 1, "cleared")
    f = client.post("/v1/flights", json={"command": ["true"], "environment": "ui"},
                    headers=client.ada)
    assert f.status_code == 201 and f.json()["stage"] == "ready"
    labels = client.get("/v1/labels", headers=client.ada).json()
    assert [(r["name"], [d["disposition"] for d in r["labels"]]) for r in labels] == [
        ("r1", ["measured"])]


def test_the_root_envelope_round_trip_and_its_refusals(client):
    assert client.get("/v1/airspace/root", headers=auth(client.owner)).status_code == 404
    unserved = client.put("/v1/airspace/root", json={"environments": ["ui"]}, headers=auth(client.owner))
    assert unserved.status_code == 409 and unserved.json()["error"]["code"] == "environment_unserved"
    bad = client.put("/v1/airspace/root", json={"environments": ["UI"]}, headers=auth(client.owner))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_airspace"
    register(client, "r1", {"environment": "ui"})
    assert client.put("/v1/airspace/root", json={"environments": ["ui"]},
                      headers=client.ada).status_code == 403
    ok = client.put("/v1/airspace/root", json={"environments": ["ui"]}, headers=auth(client.owner))
    assert ok.status_code == 200 and ok.json()["not_in_force"] == ["ui"]
    assert client.get("/v1/airspace/root", headers=client.ada).json()["environments"] == ["ui"]


def test_ownership_over_http(client):
    register(client, "r1")
    assert client.post("/v1/runners/r1/claim", headers=client.ada).status_code == 403
    assert client.post("/v1/runners/r1/ownership", json={"ownership": "open"},
                       headers=client.ada).status_code == 403
    assert client.post("/v1/runners/r1/ownership", json={"ownership": "claimed"},
                       headers=auth(client.owner)).status_code == 400
    assert client.post("/v1/runners/r1/ownership", json={"ownership": "open"},
                       headers=auth(client.owner)).json()["ownership"] == "open"
    claimed = client.post("/v1/runners/r1/claim", headers=client.ada).json()
    assert (claimed["owner_name"], claimed["reserved"]) == ("ada", False)
    assert client.post("/v1/runners/r1/reserve", headers=client.ada).json()["reserved"] is True
    assert client.post("/v1/runners/r1/claim", headers=auth(client.owner)).status_code == 409
    assert client.post("/v1/runners/nobody/claim", headers=client.ada).status_code == 404


def test_a_plan_over_http_and_a_label_that_is_a_reading_is_refused(client):
    f = client.post("/v1/flights", json={"command": ["true"], "labels": {"gpu": "a100"}},
                    headers=client.ada).json()
    plan = client.get(f"/v1/flights/{f['id']}/plan", headers=client.ada).json()
    assert plan["waiting"] == "waiting: no runner advertises gpu=a100"
    assert [(i["need"], i["held"]) for i in plan["items"]] == [
        ("no gate holds it", True), ("a runner advertises gpu=a100", False),
        ("a runner that advertises gpu=a100 can take it now", False)]
    reading = client.post("/v1/flights", json={"command": ["true"], "labels": {"cpu": "4"}},
                          headers=client.ada)
    assert reading.status_code == 400 and reading.json()["error"]["code"] == "invalid_label"
    assert client.get("/v1/flights/f_nope/plan", headers=client.ada).status_code == 404
