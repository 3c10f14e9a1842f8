"""With the loop guard armed (``GG_LOOP_GUARD=on``, as for every server the suite starts), a
started server refuses a store call made on its event loop, and its hot routes still answer:
they hand their store work to a worker thread or to the writer (docs/architecture.md, "The
loop never does store work")."""

from __future__ import annotations

import pytest

from gg.settings import Settings
from gg.store.loop_guard import StoreOnTheLoop

from support import auth, http_proof


@pytest.fixture
def settings():
    return Settings(dev=True, loop_guard="on")


def test_a_started_server_with_the_guard_on_refuses_a_store_call_on_its_loop(client):
    async def read_on_the_loop():
        return client.store.runners()

    with pytest.raises(StoreOnTheLoop):
        client.portal.call(read_on_the_loop)


def test_register_check_in_claim_open_and_listings_answer_with_the_guard_on(client):
    owner = auth(client.owner)
    registered = client.post("/v1/runners", json={"name": "r1", **http_proof(client, "register")},
                             headers=owner)
    assert registered.status_code == 201, registered.text
    runner = auth(registered.json()["credential"])
    caps = {"isolation": ["none", "sandbox"]}
    checked = client.post("/v1/runner/check-in", json={"capabilities": caps}, headers=runner)
    assert checked.status_code == 200, checked.text
    opened = client.post("/v1/flights", json={"command": ["true"]},
                         headers=owner)
    assert opened.status_code == 201, opened.text
    claimed = client.post("/v1/runner/claim", json={"wait": 5, "readings": {"cpu": 1}},
                          headers=runner)
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["flight"]["id"] == opened.json()["id"]
    for path in ("/v1/whoami", "/v1/runners", "/v1/flights", "/v1/events", "/v1/labels"):
        assert client.get(path, headers=owner).status_code == 200, path
    assert client.get("/v1/runners/r1", headers=owner).json()["name"] == "r1"
