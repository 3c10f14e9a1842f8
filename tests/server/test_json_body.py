"""Every request body is strict JSON: NaN and the infinities are refused on every route.

The routes are taken from the app's own OpenAPI document, so a route added later (in a new
router that forgets the strict reading) fails here without anyone listing it.
"""

from __future__ import annotations

import re

import pytest

from gg.server.json_body import loads


def _body_routes(client) -> list[tuple[str, str]]:
    spec = client.get("/openapi.json").json()
    return [(method.upper(), re.sub(r"\{[^}]+\}", "x", path))
            for path, item in spec["paths"].items()
            for method, operation in item.items() if "requestBody" in operation]


def test_every_route_that_takes_a_body_refuses_nan_and_infinity(client):
    routes = _body_routes(client)
    assert len(routes) > 20  # the whole API, not an empty list
    for method, path in routes:
        for word in ("NaN", "Infinity", "-Infinity", "1e999"):
            answer = client.request(method, path, content=f'{{"a": [1, {{"b": {word}}}]}}',
                                    headers={"content-type": "application/json"})
            assert answer.status_code == 400, (method, path, word, answer.text)
            assert answer.json()["error"]["code"] == "invalid_request"
            assert "not valid JSON" in answer.json()["error"]["message"]


def test_ordinary_numbers_still_read_as_before():
    assert loads(b'{"a": [1, 2.5, -0.0, 1e308, -3]}') == {"a": [1, 2.5, -0.0, 1e308, -3]}
    with pytest.raises(ValueError, match="NaN is not a number JSON allows"):
        loads("[NaN]")
