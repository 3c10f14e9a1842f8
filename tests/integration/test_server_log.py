"""A server's log holds what happened, not library noise: no warning block after the schema is
written and served, a flight is opened and bodies are read by the framework's own routes
(issue 24, point 11: pydantic warns of FastAPI's body alias the first time each route
validates a body, not only when the schema is written)."""

from __future__ import annotations

import httpx

from support import wait_until


def test_the_server_log_has_no_warning_after_the_schema_and_a_flight(fleet):
    for path in ("/openapi.json", "/v1/health"):
        assert httpx.get(fleet.url + path, timeout=30).status_code == 200
    opened = fleet.gg("fly", "--", "true")
    assert opened.returncode == 0, opened.stderr
    added = fleet.gg("person", "add", "ada")  # bodies validated by framework routes
    assert added.returncode == 0, added.stderr
    asked = httpx.post(fleet.url + "/v1/key-nonces", timeout=30,
                       json={"purpose": "register", "public_key": "x"})
    assert asked.status_code in (201, 400), asked.text
    log = fleet.root / "server.log"
    wait_until(lambda: "control plane on" in log.read_text(), 30, what="the server's log")
    text = log.read_text()
    assert "Warning" not in text, text[-2000:]
    assert "warnings.warn" not in text
