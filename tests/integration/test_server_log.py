"""A server's log holds what happened, not library noise: no warning block after the schema is
written and served and a flight is opened (issue 24, point 11)."""

from __future__ import annotations

import httpx

from support import wait_until


def test_the_server_log_has_no_warning_after_the_schema_and_a_flight(fleet):
    for path in ("/openapi.json", "/v1/health"):
        assert httpx.get(fleet.url + path, timeout=30).status_code == 200
    opened = fleet.gg("fly", "--", "true")
    assert opened.returncode == 0, opened.stderr
    log = fleet.root / "server.log"
    wait_until(lambda: "control plane on" in log.read_text(), 30, what="the server's log")
    text = log.read_text()
    assert "Warning" not in text, text[-2000:]
    assert "warnings.warn" not in text
