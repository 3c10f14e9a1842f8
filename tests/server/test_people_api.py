"""/v1/people over HTTP: who may list, remove and rotate, and the JSON error for bad input."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from support import Clock

DAY = 86400.0


class Api:
    def __init__(self, client: TestClient, clock: Clock, owner: str):
        self.client, self.clock, self.owner = client, clock, owner

    def call(self, method: str, path: str, token: str, **kw):
        return self.client.request(method, path, headers={"authorization": f"Bearer {token}"}, **kw)

    def add(self, name: str, **body) -> str:
        answer = self.call("POST", "/v1/people", self.owner, json={"name": name, **body})
        assert answer.status_code == 201, answer.text
        return answer.json()["token"]


@pytest.fixture
def api(client, clock):
    return Api(client, clock, client.owner)


def _error(answer, status: int, code: str, message: str | None = None) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()["error"]
    assert body["code"] == code, body
    if message is not None:
        assert body["message"] == message


def test_the_list_shows_role_owner_fingerprint_expiry_and_created(api):
    api.add("ada", admin=True)
    api.add("ci", ttl="never")
    rows = api.call("GET", "/v1/people", api.owner).json()
    assert [(r["name"], r["role"], r["is_owner"]) for r in rows] == [
        ("owner", "admin", True), ("ada", "admin", False), ("ci", "member", False)]
    by_name = {r["name"]: r for r in rows}
    assert by_name["owner"]["token_expires_at"] is None and by_name["ci"]["token_expires_at"] is None
    assert by_name["ada"]["token_expires_at"] == api.clock.now + 90 * DAY
    assert all(r["token_fingerprint"].startswith("sha256:") and r["created_at"] for r in rows)
    assert all("token_hash" not in r and "token" not in r for r in rows)


def test_removal_answers_the_tombstone_and_the_list_hides_it_unless_asked(api):
    member = api.add("bob")
    removed = api.call("DELETE", "/v1/people/bob", api.owner)
    assert removed.status_code == 200
    assert removed.json()["removed_by"] == "owner"
    assert [r["name"] for r in api.call("GET", "/v1/people", api.owner).json()] == ["owner"]
    every = api.call("GET", "/v1/people", api.owner, params={"removed": "true"}).json()
    assert [r["name"] for r in every] == ["owner", "bob"]
    _error(api.call("GET", "/v1/whoami", member), 401, "unauthorized", "the token was not accepted")


def test_unknown_people_are_404_and_members_are_403(api):
    member = api.add("bob")
    api.add("ada")
    _error(api.call("DELETE", "/v1/people/zed", api.owner), 404, "not_found",
           "there is no person named zed")
    _error(api.call("POST", "/v1/people/zed/token", api.owner, json={}), 404, "not_found")
    _error(api.call("DELETE", "/v1/people/ada", member), 403, "forbidden",
           "only an admin may remove a person")
    _error(api.call("POST", "/v1/people/ada/token", member, json={}), 403, "forbidden")
    _error(api.call("POST", "/v1/people", member, json={"name": "eve"}), 403, "forbidden")
    assert api.call("GET", "/v1/people", member).status_code == 200  # members may look


def test_the_owner_and_oneself_cannot_be_removed(api):
    admin = api.add("ada", admin=True)
    _error(api.call("DELETE", "/v1/people/owner", admin), 403, "forbidden",
           "the owner cannot be removed")
    _error(api.call("DELETE", "/v1/people/ada", admin), 403, "forbidden",
           "you cannot remove yourself; ask another admin to do it")
    _error(api.call("DELETE", "/v1/people/owner", api.owner), 403, "forbidden",
           "the owner cannot be removed")


@pytest.mark.parametrize("ttl", [0, -5, "forever", 3651 * DAY, True, "12h"])
def test_a_bad_ttl_is_400_with_the_json_error(api, ttl):
    _error(api.call("POST", "/v1/people", api.owner, json={"name": "ada", "ttl": ttl}),
           400, "invalid_request")
    api.add("bob")
    _error(api.call("POST", "/v1/people/bob/token", api.owner, json={"ttl": ttl}),
           400, "invalid_request")
    assert [r["name"] for r in api.call("GET", "/v1/people", api.owner).json()] == ["owner", "bob"]


def test_a_member_rotates_their_own_token_but_not_to_never(api):
    old = api.add("bob")
    _error(api.call("POST", "/v1/people/bob/token", old, json={"ttl": "never"}), 403, "forbidden",
           "only an admin may mint a token that never expires")
    answer = api.call("POST", "/v1/people/bob/token", old, json={"ttl": 3600})
    assert answer.status_code == 200
    new = answer.json()["token"]
    assert answer.json()["person"]["token_expires_at"] == api.clock.now + 3600
    _error(api.call("GET", "/v1/whoami", old), 401, "unauthorized")
    assert api.call("GET", "/v1/whoami", new).json()["person"]["name"] == "bob"
    api.clock.advance(3600)
    _error(api.call("GET", "/v1/whoami", new), 401, "unauthorized")
