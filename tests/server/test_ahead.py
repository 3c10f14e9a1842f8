"""A call answered ahead of the framework (gg/server/ahead.py) and the route that documents it
run one body: the route's endpoint is made from the same ``Call`` the ahead path answers, so
the two cannot drift, and the published schema still describes every such call."""

from __future__ import annotations

from fastapi.routing import APIRoute

from gg.api import paths
from gg.server import ahead, lease_calls


def _posts(app, template: str) -> list[APIRoute]:
    return [r for r in app.routes
            if isinstance(r, APIRoute) and r.path == template and "POST" in r.methods]


def test_each_call_answered_ahead_has_one_route_and_it_runs_the_same_body(client):
    app = client.app
    assert isinstance(app.middleware_stack, ahead.Ahead)
    calls = app.middleware_stack.calls
    assert {c.template for c in calls} == {paths.RUNNER_CLAIM, paths.LEASE_RENEW,
                                           paths.LEASE_FACTS, paths.LEASE_HAND_BACK, paths.FLIGHTS}
    for call in calls:
        routes = _posts(app, call.template)
        assert len(routes) == 1, (call.template, routes)  # no hand-written route beside it
        route = routes[0]
        assert getattr(route.endpoint, "call", None) is call, call.template
        assert route.response_model == call.response_model, call.template
        assert route.status_code == call.status, call.template
        assert route.body_field is not None and route.body_field.field_info.annotation is call.model


def test_no_route_runs_a_body_the_ahead_path_does_not_answer(client):
    app = client.app
    documented = [r.endpoint.call for r in app.routes
                  if isinstance(r, APIRoute) and hasattr(r.endpoint, "call")]
    assert sorted(c.template for c in documented) == \
        sorted(c.template for c in app.middleware_stack.calls)


def test_the_schema_describes_every_call_answered_ahead(client):
    schema = client.get("/openapi.json").json()
    for call in client.app.middleware_stack.calls:
        operation = schema["paths"][call.template]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/" + call.model.__name__), call.template
        assert str(call.status) in operation["responses"], call.template
        assert "4XX" in operation["responses"], call.template
        assert [p["name"] for p in operation.get("parameters", [])] == list(call.names)
    claim = schema["paths"][paths.RUNNER_CLAIM]["post"]
    assert claim["operationId"] == "claim_v1_runner_claim_post" and "204" in claim["responses"]


def test_a_call_with_a_path_parameter_matches_its_template_only():
    hand_back = next(c for c in lease_calls.CALLS if c.template == paths.LEASE_HAND_BACK)
    assert hand_back.names == ("flight_id",)
    found = hand_back.pattern.match("/v1/runner/flights/f-1/hand-back")
    assert found is not None and found.groupdict() == {"flight_id": "f-1"}
    for other in ("/v1/runner/flights//hand-back", "/v1/runner/flights/a/b/hand-back",
                  "/v1/runner/flights/f-1/hand-back/x", "/v1/runner/flights/f-1/renew"):
        assert hand_back.pattern.match(other) is None, other
