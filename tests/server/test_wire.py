"""The typed wire: every route declares its answer, and what it sends is what it declares.

In-process over httpx against the real app and a real SQLite file. Each answer is read back
with the model its route publishes; a field the server sends that the model does not
declare would be undocumented (``Answer`` keeps such fields rather than drop them), so any
is a failure here.
"""

from __future__ import annotations

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store

from fleet_support import SANDBOX_CAPABILITIES
from support import http_proof


class Clock:
    def __init__(self):
        self.now = 2_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(claim_wait=0.2), open_store(tmp_path), clock=Clock(),
                     data_dir=tmp_path)
    with TestClient(app) as c:
        c.owner = (tmp_path / "owner-token").read_text().strip()
        yield c


def auth(token):
    return {"authorization": f"Bearer {token}"}


def _routes(app) -> list[APIRoute]:
    """The app's routes, those of its included routers too (none has a prefix)."""
    found = []
    for route in app.routes:
        inner = getattr(route, "original_router", None)
        found += [r for r in (inner.routes if inner is not None else [route])
                  if isinstance(r, APIRoute)]
    return found


def _route(app, method: str, path: str) -> APIRoute:
    for route in _routes(app):
        if method in route.methods and route.path_regex.match(path):
            return route
    raise AssertionError(f"no route {method} {path}")


def _undeclared(value, where: str) -> list[str]:
    if isinstance(value, list):
        return [u for i, item in enumerate(value) for u in _undeclared(item, f"{where}[{i}]")]
    if not isinstance(value, BaseModel):
        return []
    found = [f"{where}.{key}" for key in (value.model_extra or {})]
    for name in type(value).model_fields:
        found += _undeclared(getattr(value, name), f"{where}.{name}")
    return found


def _declared(client, method: str, path: str, status: int, **kw):
    """Call the route; its answer must parse as the model it publishes, with no field more."""
    response = client.request(method, path, **kw)
    assert response.status_code == status, response.text
    model = _route(client.app, method, path.split("?")[0]).response_model
    answer = TypeAdapter(model).validate_python(response.json())
    assert _undeclared(answer, f"{method} {path}") == []
    return response.json()


def test_every_route_declares_its_answer_and_the_one_error_shape(client):
    routes = [r for r in _routes(client.app) if r.include_in_schema]
    assert len(routes) > 50
    assert [r.path for r in routes if r.response_model is None] == []
    spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            answers = operation["responses"]
            assert "422" not in answers, (method, path)  # a bad request is answered 400
            assert answers["4XX"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorAnswer"}, (method, path)
            ok = [code for code in answers if code.startswith("2") and code != "204"]
            assert ok and all("content" in answers[code] for code in ok), (method, path)


def test_what_a_flight_and_a_runner_send_is_what_their_models_declare(client):
    owner = client.owner
    _declared(client, "GET", "/v1/health", 200)
    _declared(client, "GET", "/v1/whoami", 200, headers=auth(owner))
    reg = _declared(client, "POST", "/v1/runners", 201, headers=auth(owner),
                    json={"name": "r1", "labels": {"os": "linux"}, **http_proof(client, "register")})
    runner = reg["credential"]
    _declared(client, "POST", "/v1/runner/check-in", 200, headers=auth(runner),
              json={"free_slots": 1, "capabilities": SANDBOX_CAPABILITIES})
    _declared(client, "GET", "/v1/runners", 200, headers=auth(owner))
    _declared(client, "GET", "/v1/runners/r1", 200, headers=auth(owner))
    opened = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                       json={"command": ["echo hi"], "title": "hello"})
    flight = opened["id"]
    page = _declared(client, "GET", "/v1/flights", 200, headers=auth(owner))
    assert set(page) == {"items", "next_cursor"} and page["next_cursor"] is None
    rows = page["items"]
    assert {"id", "stage", "environment", "runner", "attempt", "outcome", "exit_code", "waiting",
            "opened_by"} <= set(rows[0])  # the CLI's --json contract (SPEC section 14)
    grant = _declared(client, "POST", "/v1/runner/claim", 200, headers=auth(runner),
                      json={"free_slots": 1, "wait": 0})
    epoch = grant["lease"]["epoch"]
    _declared(client, "POST", f"/v1/runner/flights/{flight}/renew", 200, headers=auth(runner),
              json={"epoch": epoch})
    _declared(client, "POST", f"/v1/runner/flights/{flight}/facts", 200, headers=auth(runner),
              json={"epoch": epoch, "facts": [{"kind": "output", "body": {"text": "hi\n"}}]})
    _declared(client, "GET", f"/v1/flights/{flight}", 200, headers=auth(owner))
    _declared(client, "GET", f"/v1/flights/{flight}/plan", 200, headers=auth(owner))
    _declared(client, "POST", f"/v1/runner/flights/{flight}/hand-back", 200,
              headers=auth(runner), json={"epoch": epoch, "outcome": "landed", "exit_code": 0})
    page = _declared(client, "GET", f"/v1/flights/{flight}/facts", 200, headers=auth(owner))
    assert page["stage"] == "landed" and page["facts"]
    _declared(client, "GET", "/v1/events", 200, headers=auth(owner))
    change = _declared(client, "POST", "/v1/runners/r1/cordon", 200, headers=auth(owner))
    assert change["from"] == "active" and change["view"]["state"] == "cordoned"
    _declared(client, "POST", "/v1/runners/drain", 200, headers=auth(owner),
              json={"labels": {"os": "linux"}})
    _declared(client, "POST", "/v1/runners/r1/policy", 200, headers=auth(owner),
              json={"workers": 1})
    _declared(client, "GET", "/v1/labels", 200, headers=auth(owner))
    _declared(client, "POST", "/v1/runner/challenge", 200, headers=auth(runner))
    _declared(client, "POST", "/v1/runner/goodbye", 200, headers=auth(runner))
    _declared(client, "POST", "/v1/runners/r1/retire", 200, headers=auth(owner))


def test_gates_and_environments_send_what_their_models_declare(client):
    owner = client.owner
    charted = _declared(client, "POST", "/v1/environments", 201, headers=auth(owner),
                        json={"name": "ui", "means": 'os == "linux"'})
    gate = charted["gate"]
    _declared(client, "GET", "/v1/gates", 200, headers=auth(owner))
    _declared(client, "GET", f"/v1/gates/{gate}", 200, headers=auth(owner))
    _declared(client, "POST", f"/v1/gates/{gate}/clear", 200, headers=auth(owner))
    _declared(client, "GET", "/v1/environments", 200, headers=auth(owner))
    _declared(client, "GET", "/v1/environments/ui", 200, headers=auth(owner))


def test_hooks_send_what_their_models_declare(client):
    owner = client.owner
    added = _declared(client, "POST", "/v1/hooks", 201, headers=auth(owner),
                      json={"url": "http://127.0.0.1:9/h", "on": ["opened", "landed"]})
    hook = added["hook"]["id"]
    assert added["secret"].startswith("ggh_")
    _declared(client, "POST", "/v1/flights", 201, headers=auth(owner), json={"command": ["true"]})
    listed = _declared(client, "GET", "/v1/hooks", 200, headers=auth(owner))
    assert [h["id"] for h in listed] == [hook] and "secret" not in listed[0]
    shown = _declared(client, "GET", f"/v1/hooks/{hook}", 200, headers=auth(owner))
    assert [d["event"] for d in shown["deliveries"]] == ["opened"]
    _declared(client, "DELETE", f"/v1/hooks/{hook}", 200, headers=auth(owner))


def test_the_action_queue_sends_what_its_models_declare(client):
    owner = client.owner
    ada = _declared(client, "POST", "/v1/people", 201, headers=auth(owner),
                    json={"name": "ada", "admin": True})["token"]
    charted = _declared(client, "POST", "/v1/environments", 201, headers=auth(owner),
                        json={"name": "prod", "means": "true"})
    _declared(client, "POST", f"/v1/gates/{charted['gate']}/clear", 200, headers=auth(owner))
    env = _declared(client, "PUT", "/v1/environments/prod/approval", 200, headers=auth(owner),
                    json={"approval": "required"})
    assert (env["approval"], env["changed"]) == ("required", True)
    first = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                      json={"command": ["true"], "approval": True, "approver": "ada"})["id"]
    pending = _declared(client, "GET", "/v1/pending", 200, headers=auth(ada))
    assert [(p["id"], p["pending"][0]["you_may_clear"]) for p in pending] == [(first, True)]
    approved = _declared(client, "POST", f"/v1/flights/{first}/approve", 200, headers=auth(ada))
    assert approved["stage"] == "ready"
    second = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                       json={"command": ["true"], "approval": True})["id"]
    forced = _declared(client, "POST", f"/v1/flights/{second}/force", 200, headers=auth(ada))
    assert forced["flight"]["stage"] == "ready" and len(forced["cleared"]) == 1
    third = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                      json={"command": ["true"], "environment": "prod"})["id"]
    rejected = _declared(client, "POST", f"/v1/flights/{third}/reject", 200, headers=auth(ada),
                         json={"reason": "not today"})
    assert (rejected["stage"], rejected["ended_reason"]) == ("cancelled", "rejected by ada: not today")
    refused = client.post(f"/v1/flights/{first}/approve", headers=auth(owner))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "no_approval"


def test_services_send_what_their_models_declare(client):
    owner = client.owner
    opened = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                       json={"command": ["serve"], "service": {"port": 8080, "ready_cmd": "true"}})
    assert opened["kind"] == "service" and opened["service"]["generation"] == 1
    listed = _declared(client, "GET", "/v1/services", 200, headers=auth(owner))
    assert [(s["id"], s["wanted_generation"], s["ready"]) for s in listed] == [
        (opened["id"], 1, False)]
    updated = _declared(client, "POST", f"/v1/services/{opened['id']}/update", 200,
                        headers=auth(owner), json={"env": {"V": "2"}})
    assert updated["spec"]["generation"] == 2
    _declared(client, "GET", "/v1/flights", 200, headers=auth(owner))


def test_groups_attributes_and_the_fleet_stop_send_what_their_models_declare(client):
    owner = client.owner
    h = auth(owner)
    _declared(client, "PUT", "/v1/attributes/site", 200, headers=h, json={"values": ["dc1"]})
    _declared(client, "GET", "/v1/attributes", 200, headers=h)
    changed = _declared(client, "PUT", "/v1/groups/dc1", 200, headers=h,
                        json={"attributes": {"site": "dc1"}, "bindings": ["prod"],
                              "exclusive": True})
    assert changed["exclusive"] is True and changed["members"] == []
    _declared(client, "GET", "/v1/groups", 200, headers=h)
    _declared(client, "POST", "/v1/runners", 201, headers=h,
              json={"name": "r1", **http_proof(client, "register")})
    moved = _declared(client, "POST", "/v1/runners/r1/group", 200, headers=h,
                      json={"group": "dc1"})
    assert (moved["from"], moved["group"]) == ("default", "dc1")
    row = _declared(client, "GET", "/v1/runners", 200, headers=h)[0]
    assert (row["group"], row["group_exclusive"], row["group_attributes"]) == (
        "dc1", True, {"site": "dc1"})
    _declared(client, "POST", "/v1/flights", 201, headers=h,
              json={"command": ["true"], "group": "dc1", "where": {"site": "dc1"}})
    _declared(client, "POST", "/v1/groups/dc1/drain", 200, headers=h)
    _declared(client, "POST", "/v1/groups/dc1/resume", 200, headers=h)
    demand = _declared(client, "GET", "/v1/groups/dc1/demand", 200, headers=h)
    assert demand == {"group": "dc1", "queued": 1, "running": 0}
    _declared(client, "GET", "/v1/groups/dc1", 200, headers=h)
    _declared(client, "GET", "/v1/fleet", 200, headers=h)
    _declared(client, "POST", "/v1/fleet/quiesce", 200, headers=h)
    _declared(client, "POST", "/v1/fleet/resume", 200, headers=h)
    _declared(client, "PUT", "/v1/groups/empty", 200, headers=h, json={})
    _declared(client, "DELETE", "/v1/groups/empty", 200, headers=h)
    refused = client.delete("/v1/groups/dc1", headers=h)
    assert refused.status_code == 409 and "1 runner is in group dc1 (r1)" in refused.text


def test_the_flight_listing_pages_with_an_opaque_cursor(client):
    owner = client.owner
    opened = [_declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                        json={"command": ["true"], "title": f"f{i}"})["id"] for i in range(5)]
    seen, cursor, pages = [], None, 0
    while True:
        query = "/v1/flights?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = _declared(client, "GET", query, 200, headers=auth(owner))
        assert len(page["items"]) <= 2
        seen += [row["id"] for row in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == opened[::-1] and pages == 3  # newest first, each once
    late = _declared(client, "POST", "/v1/flights", 201, headers=auth(owner),
                     json={"command": ["true"]})["id"]
    first = _declared(client, "GET", "/v1/flights?limit=2", 200, headers=auth(owner))
    after = _declared(client, "GET", f"/v1/flights?limit=2&cursor={first['next_cursor']}", 200,
                      headers=auth(owner))
    assert [r["id"] for r in first["items"]] == [late, opened[4]]
    assert [r["id"] for r in after["items"]] == [opened[3], opened[2]]
    refused = client.get("/v1/flights?cursor=bm9wZQ", headers=auth(owner))
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("that cursor is not one this listing gave")


def test_a_heartbeat_claim_is_answered_with_a_declared_instruction(client):
    owner = client.owner
    reg = _declared(client, "POST", "/v1/runners", 201, headers=auth(owner),
                    json={"name": "r9", **http_proof(client, "register")})
    runner = reg["credential"]
    _declared(client, "POST", "/v1/runner/check-in", 200, headers=auth(runner),
              json={"free_slots": 1, "capabilities": SANDBOX_CAPABILITIES})
    _declared(client, "POST", "/v1/runners/r9/drain", 200, headers=auth(owner))
    told = _declared(client, "POST", "/v1/runner/claim", 200, headers=auth(runner),
                     json={"free_slots": 1, "wait": 0, "readings": {"cpu_percent": 1.0}})
    assert told == {"instruction": {"kind": "drain"}}
    shown = _declared(client, "GET", "/v1/runners/r9", 200, headers=auth(owner))
    assert shown["readings"] == {"cpu_percent": 1.0, "free_slots": 1}
