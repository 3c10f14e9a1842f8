"""The HTTP surface, in-process over httpx against the real app and a real store (SQLite's
file, and a PostgreSQL database)."""

from __future__ import annotations

import base64

import pytest

from gg.settings import Settings

from fleet_support import CONFINED
from support import auth, http_proof, new_key

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def settings():
    return Settings(max_body_bytes=10_000)


def register(client, name="r1"):
    key = new_key()
    r = client.post("/v1/runners", json={"name": name, **http_proof(client, "register", key)},
                    headers=auth(client.owner))
    assert r.status_code == 201, r.text
    return key, r.json()


def test_health_answers_without_a_token_and_openapi_is_published(client):
    assert client.get("/v1/health").status_code == 200
    spec = client.get("/openapi.json").json()
    assert "/v1/runner/claim" in spec["paths"] and "/v1/flights" in spec["paths"]


def test_every_error_has_one_json_shape(client):
    cases = [
        client.get("/v1/flights"),  # no token
        client.get("/v1/flights", headers=auth("ggp_wrong")),
        client.get("/v1/flights/f_nope", headers=auth(client.owner)),
        client.post("/v1/flights", content=b"{not json", headers={**auth(client.owner),
                                                                  "content-type": "application/json"}),
        client.post("/v1/flights", json={"command": []}, headers=auth(client.owner)),
        client.post("/v1/flights", json={"command": ["x"], "surprise": 1}, headers=auth(client.owner)),
        client.get("/v1/nowhere"),
    ]
    assert [r.status_code for r in cases] == [401, 401, 404, 400, 400, 400, 404]
    for r in cases:
        body = r.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
        assert body["error"]["message"] and "\n" not in body["error"]["message"]


def test_an_oversized_body_is_refused_with_413(client):
    r = client.post("/v1/flights", json={"command": ["x" * 20_000]}, headers=auth(client.owner))
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"


def test_invalid_utf8_and_wrong_types_are_4xx(client):
    bad = client.post("/v1/flights", content=b'{"command": ["\xff\xfe"]}',
                      headers={**auth(client.owner), "content-type": "application/json"})
    assert 400 <= bad.status_code < 500
    wrong = client.post("/v1/flights", json={"command": "echo"}, headers=auth(client.owner))
    assert wrong.status_code == 400


def test_a_nul_character_is_refused_with_400_on_both_stores(client):
    """PostgreSQL's text cannot hold U+0000, so neither store keeps or looks up text with one:
    the same 400 on both (PostgreSQL answered 500, SQLite stored it or answered 404)."""
    owner = auth(client.owner)
    asked = [client.post("/v1/flights", json={"command": ["true"], "title": "a\x00b"},
                         headers=owner),
             client.post("/v1/flights", json={"command": ["echo", "a\x00b"]}, headers=owner),
             client.get("/v1/flights/f_%00", headers=owner),
             client.get("/v1/gates/g_%00", headers=owner),
             client.get("/v1/events?runner=r%00", headers=owner)]
    assert [a.status_code for a in asked] == [400] * len(asked)
    assert {a.json()["error"]["code"] for a in asked} == {"bad_request"}
    assert client.get("/v1/flights", headers=owner).json()["items"] == []
    command = ["printf", "a\x00b"]  # inside JSON (a command, a fact's body) it is kept escaped
    opened = client.post("/v1/flights", json={"command": command, "title": "nul"}, headers=owner)
    assert opened.status_code == 201 and opened.json()["command"] == command


def test_a_seq_past_64_bits_is_refused_with_400_on_both_stores(client):
    """An event's or a fact's seq is a 64-bit integer: ``after`` one past the largest is a
    400 (SQLite, which cannot bind it, answered 500)."""
    owner = auth(client.owner)
    flight = client.post("/v1/flights", json={"command": ["true"]}, headers=owner).json()["id"]
    largest = 2**63 - 1
    for path in ("/v1/events?after={}", f"/v1/flights/{flight}/facts?after={{}}"):
        assert client.get(path.format(largest), headers=owner).status_code == 200
        refused = client.get(path.format(largest + 1), headers=owner)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_request"


def test_a_persons_token_cannot_act_as_a_runner_nor_a_runners_as_a_person(client):
    _, reg = register(client)
    assert client.post("/v1/runner/check-in", json={}, headers=auth(client.owner)).status_code == 401
    assert client.get("/v1/flights", headers=auth(reg["credential"])).status_code == 401
    assert client.post("/v1/runner/check-in", json={}, headers=auth(reg["credential"])).status_code == 200


def _everything_stored(store, tmp_path) -> bytes:
    """SQLite's file and log as they are on disk; every cell of every PostgreSQL table."""
    if store.dialect == "postgresql":
        import psycopg

        with psycopg.connect(store.db.url) as pg:
            tables = [r[0] for r in pg.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()").fetchall()]
            return "\n".join(str(row) for t in tables
                             for row in pg.execute(f'SELECT * FROM "{t}"').fetchall()).encode()
    raw = (tmp_path / "gg.sqlite3").read_bytes()
    wal = tmp_path / "gg.sqlite3-wal"
    return raw + (wal.read_bytes() if wal.exists() else b"")


def test_tokens_are_prefixed_and_only_their_hash_is_stored(client, tmp_path):
    _, reg = register(client)
    person = client.post("/v1/people", json={"name": "ada"}, headers=auth(client.owner)).json()
    assert reg["credential"].startswith("ggr_") and person["token"].startswith("ggp_")
    assert client.owner.startswith("ggp_")
    raw = _everything_stored(client.store, tmp_path)
    for secret in (reg["credential"], person["token"], client.owner):
        assert secret.encode() not in raw
    assert oct((tmp_path / "owner-token").stat().st_mode)[-3:] == "600"


def test_only_an_admin_adds_people(client):
    member = client.post("/v1/people", json={"name": "bob"}, headers=auth(client.owner)).json()["token"]
    r = client.post("/v1/people", json={"name": "eve"}, headers=auth(member))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_a_runner_renews_its_credential_only_by_signing_the_challenge(client):
    key, reg = register(client)
    old = reg["credential"]
    nonce = client.post("/v1/runner/challenge", headers=auth(old)).json()["nonce"]
    other = new_key()
    forged = base64.b64encode(other.sign(f"gg-renew:{reg['runner']['id']}:{nonce}".encode())).decode()
    r = client.post("/v1/runner/credential", json={"nonce": nonce, "signature": forged}, headers=auth(old))
    assert r.status_code == 401
    nonce = client.post("/v1/runner/challenge", headers=auth(old)).json()["nonce"]
    good = base64.b64encode(key.sign(f"gg-renew:{reg['runner']['id']}:{nonce}".encode())).decode()
    r = client.post("/v1/runner/credential", json={"nonce": nonce, "signature": good}, headers=auth(old))
    assert r.status_code == 200
    new = r.json()["credential"]
    assert client.post("/v1/runner/check-in", json={}, headers=auth(old)).status_code == 401
    assert client.post("/v1/runner/check-in", json={}, headers=auth(new)).status_code == 200
    # A spent challenge cannot be replayed.
    again = client.post("/v1/runner/credential", json={"nonce": nonce, "signature": good}, headers=auth(new))
    assert again.status_code == 401


def test_an_expired_runner_credential_is_refused(client, clock):
    _, reg = register(client)
    clock.now += 31 * 86400
    r = client.post("/v1/runner/check-in", json={}, headers=auth(reg["credential"]))
    assert r.status_code == 401


def test_registering_the_same_key_again_supersedes_the_old_registration(client):
    key = new_key()
    first = client.post("/v1/runners", json={"name": "a", **http_proof(client, "register", key)},
                        headers=auth(client.owner)).json()
    second = client.post("/v1/runners", json={"name": "a2", **http_proof(client, "register", key)},
                         headers=auth(client.owner)).json()
    assert first["runner"]["id"] == second["runner"]["id"]
    assert client.post("/v1/runner/check-in", json={}, headers=auth(first["credential"])).status_code == 401
    rows = client.get("/v1/runners", headers=auth(client.owner)).json()
    assert [r["name"] for r in rows] == ["a2"]


def test_runners_listing_has_the_contract_fields(client):
    _, reg = register(client)
    # A non-dev server assigns sandbox: the runner is healthy once it reports bubblewrap works.
    report = {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True, "netns": True,
              "confinement": CONFINED}
    client.post("/v1/runner/check-in", json={"capabilities": report}, headers=auth(reg["credential"]))
    row = client.get("/v1/runners", headers=auth(client.owner)).json()[0]
    for key in ("id", "name", "labels", "online", "state", "health", "ownership", "owner",
                "reserved", "last_seen_at", "version_skew"):
        assert key in row
    assert row["online"] is True and row["state"] == "active" and row["health"] == "ok"
    assert row["checks_verdict"] == "checks passed" and row["policy"]["isolation"] == "sandbox"


def test_flights_listing_has_the_contract_fields_and_the_waiting_sentence(client):
    client.post("/v1/flights", json={"command": ["true"], "labels": {"gpu": "a100"}}, headers=auth(client.owner))
    row = client.get("/v1/flights", headers=auth(client.owner)).json()["items"][0]
    for key in ("id", "stage", "environment", "runner", "attempt", "outcome", "exit_code",
                "waiting", "opened_by"):
        assert key in row
    assert row["waiting"] == "waiting: no runner advertises gpu=a100"


def test_opening_a_flight_answers_its_row_not_its_whole_detail(client):
    r = client.post("/v1/flights", json={"command": ["true"], "title": "t"}, headers=auth(client.owner))
    assert r.status_code == 201, r.text
    row = r.json()
    assert row["stage"] == "ready" and row["title"] == "t" and row["opened_by_name"] == "owner"
    assert "facts" not in row and "attempts" not in row  # not the detail a GET answers
