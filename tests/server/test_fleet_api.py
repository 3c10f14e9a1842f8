"""Profiles, enrolment, credential references and maintenance over HTTP (in-process app)."""

from __future__ import annotations

import pytest

from gg.settings import Settings

from fleet_support import UI
from support import auth, http_proof


@pytest.fixture
def settings():
    return Settings(dev=True)


def apply(client, body=UI, name="ui"):
    r = client.put(f"/v1/profiles/{name}", json={"profile": body}, headers=auth(client.owner))
    assert r.status_code == 200, r.text
    return r.json()


def mint(client, **body):
    r = client.post("/v1/enrolment-tokens", json={"profile": "ui", **body},
                    headers=auth(client.owner))
    assert r.status_code == 201, r.text
    return r.json()


def enrol(client, token, name="m1"):
    return client.post("/v1/enrol", json={"name": name, **http_proof(client, "enrol")},
                       headers=auth(token))


def test_unknown_expired_exhausted_and_revoked_tokens_get_the_same_401(client, clock):
    apply(client)
    exhausted = mint(client)["token"]
    assert enrol(client, exhausted).status_code == 201
    expired = mint(client, ttl=10)["token"]
    revoked = mint(client, ttl=3600)
    client.post(f"/v1/enrolment-tokens/{revoked['fingerprint']}/revoke",
                headers=auth(client.owner)).raise_for_status()
    clock.advance(11)
    answers = [enrol(client, t, "intruder") for t in
               ("gge_" + "A" * 32, expired, exhausted, revoked["token"])]
    assert {r.status_code for r in answers} == {401}
    assert len({r.text for r in answers}) == 1
    assert len({tuple(sorted(r.headers.items())) for r in answers}) == 1
    assert answers[0].json()["error"]["code"] == "unauthorized"
    listed = {r["fingerprint"]: r["status"] for r in
              client.get("/v1/enrolment-tokens", headers=auth(client.owner)).json()}
    assert sorted(listed.values()) == ["exhausted", "expired", "revoked"]


def test_the_enrolled_runner_is_told_its_labels_and_profile_on_check_in(client):
    gate = apply(client)["gate"]["id"]
    answer = enrol(client, mint(client)["token"]).json()
    credential = answer["credential"]
    assert answer["runner"]["kind"] == "enrolled" and answer["profile"] == {
        "name": "ui", "in_force": None}
    before = client.post("/v1/runner/check-in", json={"agents": ["shell"]},
                         headers=auth(credential)).json()
    assert before["labels"] == {} and before["profile"]["in_force"] is None
    assert before["protocol"]["maintenance_check_interval"] == Settings().maintenance_check_interval
    client.post(f"/v1/gates/{gate}/clear", headers=auth(client.owner)).raise_for_status()
    after = client.post("/v1/runner/check-in", json={}, headers=auth(credential)).json()
    assert after["labels"] == {"environment": "ui"}
    assert after["profile"]["in_force"]["environment"] == "ui"
    assert after["policy"]["workers"] == 2


def test_a_runner_registers_credential_references_and_never_a_secret(client):
    apply(client)
    credential = enrol(client, mint(client)["token"]).json()["credential"]
    ref = {"kind": "repo", "ref": "git.example.com/acme/ui", "fingerprint": "sha256:" + "a" * 16,
           "added_at": "2024-01-01T00:00:00Z"}
    r = client.put("/v1/runner/credentials", json={"refs": [ref]}, headers=auth(credential))
    assert r.status_code == 200, r.text
    rows = client.get("/v1/credentials", headers=auth(client.owner)).json()
    assert [(row["runner_name"], row["ref"]) for row in rows] == [("m1", "git.example.com/acme/ui")]
    sneaky = {**ref, "secret": "hunter2"}
    assert client.put("/v1/runner/credentials", json={"refs": [sneaky]},
                      headers=auth(credential)).status_code == 400
    unslugged = {**ref, "ref": "https://git.example.com/acme/ui.git"}
    assert client.put("/v1/runner/credentials", json={"refs": [unslugged]},
                      headers=auth(credential)).status_code == 400


def test_a_flight_for_a_repository_nobody_holds_a_credential_for_says_so(client):
    r = client.post("/v1/flights", json={"command": ["make"],
                                         "repo": "https://git.example.com/acme/ui.git"},
                    headers=auth(client.owner))
    assert r.status_code == 201 and r.json()["waiting"] is None  # the bare row: GET explains
    shown = client.get(f"/v1/flights/{r.json()['id']}", headers=auth(client.owner)).json()
    assert shown["waiting"] == ("waiting: no credential is registered for repository "
                                "git.example.com/acme/ui")
    assert shown["remedy"] == "gg credential add --repo git.example.com/acme/ui"
    leaky = client.post("/v1/flights", json={"command": ["make"],
                                             "repo": "https://bot:hunter2@git.example.com/a/b"},
                        headers=auth(client.owner))
    assert leaky.status_code == 400 and "hunter2" not in leaky.text


def test_maintenance_gates_open_per_missing_item_and_clear_only_by_the_machine(client):
    profile = {**UI, "credentials": ["git.example.com/acme/ui", "npm-token"],
               "repository-hosts": []}
    gate = apply(client, profile)["gate"]["id"]
    client.post(f"/v1/gates/{gate}/clear", headers=auth(client.owner)).raise_for_status()
    credential = enrol(client, mint(client)["token"]).json()["credential"]
    report = {"items": [
        {"item": "agent:shell", "ok": True},
        {"item": "credential:git.example.com/acme/ui", "ok": False, "detail": "not in store"},
        {"item": "credential:npm-token", "ok": False, "detail": "not in store"},
        {"item": "credential:something-else", "ok": False},  # not the profile's: ignored
    ]}
    client.post("/v1/runner/check-in", json={"maintenance": report},
                headers=auth(credential)).raise_for_status()
    open_gates = client.get("/v1/gates", headers=auth(client.owner)).json()
    assert sorted(g["guards"] for g in open_gates) == [
        "credential git.example.com/acme/ui held by runner m1",
        "credential npm-token held by runner m1"]
    assert {g["kind"] for g in open_gates} == {"maintenance"}
    flights = client.get("/v1/flights", headers=auth(client.owner)).json()["items"]
    [flight] = [f for f in flights if f["kind"] == "maintenance"]
    assert flight["stage"] == "gated" and flight["waiting"].startswith("waiting: gate")
    refused = client.post(f"/v1/gates/{open_gates[0]['id']}/clear", headers=auth(client.owner))
    assert refused.status_code == 403

    # The machine confirms one item by registering the credential, the other by its report.
    ref = {"kind": "name", "ref": "npm-token", "fingerprint": "sha256:" + "b" * 16}
    client.put("/v1/runner/credentials", json={"refs": [ref]},
               headers=auth(credential)).raise_for_status()
    assert len(client.get("/v1/gates", headers=auth(client.owner)).json()) == 1
    report["items"][1]["ok"] = report["items"][2]["ok"] = True
    client.post("/v1/runner/check-in", json={"maintenance": report},
                headers=auth(credential)).raise_for_status()
    assert client.get("/v1/gates", headers=auth(client.owner)).json() == []
    landed = client.get(f"/v1/flights/{flight['id']}", headers=auth(client.owner)).json()
    assert landed["stage"] == "landed" and landed["outcome"] == "landed"
    cleared = client.get("/v1/gates?status=cleared", headers=auth(client.owner)).json()
    assert {g["cleared_by"] for g in cleared if g["kind"] == "maintenance"} == {
        f"runner:{landed['runner_target']}"}


def test_a_malformed_maintenance_report_is_a_400_not_a_500(client):
    apply(client)
    credential = enrol(client, mint(client)["token"]).json()["credential"]
    r = client.post("/v1/runner/check-in", json={"maintenance": {"items": [{"item": 3}]}},
                    headers=auth(credential))
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("maintenance.")


def test_fleet_paths_are_in_the_openapi_document(client):
    spec = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/profiles/{name}", "/v1/enrolment-tokens", "/v1/enrol",
                 "/v1/runner/credentials", "/v1/credentials"):
        assert path in spec


def test_a_report_checked_before_gg_credential_add_does_not_reopen_the_gate(client):
    from gg.domain.enrolment import refs_digest

    gate = apply(client, {**UI, "credentials": ["npm-token"], "repository-hosts": []})["gate"]
    client.post(f"/v1/gates/{gate['id']}/clear", headers=auth(client.owner)).raise_for_status()
    credential = enrol(client, mint(client)["token"]).json()["credential"]
    missing = {"items": [{"item": "credential:npm-token", "ok": False}],
               "credentials_digest": refs_digest([])}
    client.post("/v1/runner/check-in", json={"maintenance": missing},
                headers=auth(credential)).raise_for_status()
    assert len(client.get("/v1/gates", headers=auth(client.owner)).json()) == 1
    ref = {"kind": "name", "ref": "npm-token", "fingerprint": "sha256:" + "c" * 16}
    client.put("/v1/runner/credentials", json={"refs": [ref]},
               headers=auth(credential)).raise_for_status()
    assert client.get("/v1/gates", headers=auth(client.owner)).json() == []
    # The runner checked its store just before the add; its report arrives just after.
    client.post("/v1/runner/check-in", json={"maintenance": missing},
                headers=auth(credential)).raise_for_status()
    assert client.get("/v1/gates", headers=auth(client.owner)).json() == []
    # A report about the store as registered is believed: the secret really went missing.
    current = {**missing, "credentials_digest": refs_digest([ref])}
    client.post("/v1/runner/check-in", json={"maintenance": current},
                headers=auth(credential)).raise_for_status()
    assert len(client.get("/v1/gates", headers=auth(client.owner)).json()) == 1
