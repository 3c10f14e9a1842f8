"""The client honours the proxy environment a platform engineer's hosts set (``HTTP_PROXY``,
``HTTPS_PROXY``, ``NO_PROXY``, with a user in the URL): a real ``gg`` command and a real runner
reach a real server through a small forwarding proxy on loopback, and ``NO_PROXY`` exempts."""

from __future__ import annotations

import base64
import http.client
import http.server
import threading
import urllib.parse

import pytest

from support import wait_until


class _Forward(http.server.BaseHTTPRequestHandler):
    """Forwards a request sent in absolute form (``POST http://host:port/path``) and records it."""

    seen: list[tuple[str, str, str | None]]

    def _forward(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))
        target = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-authorization", "proxy-connection", "connection")}
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        path = target.path + (f"?{target.query}" if target.query else "")
        upstream.request(self.command, path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def proxy():
    seen: list = []
    handler = type("Handler", (_Forward,), {"seen": seen, "protocol_version": "HTTP/1.1"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_command_goes_through_the_proxy_its_environment_names(fleet, proxy, monkeypatch):
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://ops:s%40cret@{address}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    done = fleet.gg("fly", "--", "true")
    assert done.returncode == 0, done.stderr
    flight = done.stdout.strip()
    assert ("POST", f"{fleet.url}/v1/flights",
            "Basic " + base64.b64encode(b"ops:s@cret").decode()) in seen
    listed = fleet.gg("flights", "--json")
    assert listed.returncode == 0 and flight in listed.stdout
    assert any(p.startswith(f"{fleet.url}/v1/flights?") or p == f"{fleet.url}/v1/flights"
               for m, p, _ in seen if m == "GET")


def test_no_proxy_exempts_the_control_plane(fleet, proxy, monkeypatch):
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://{address}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert fleet.gg("fly", "--", "true").returncode == 0
    assert seen == []


def test_a_runner_reaches_its_server_through_the_proxy(fleet, proxy, monkeypatch):
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://{address}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    fleet.runner("r1")  # started with this environment
    fleet.wait_online("r1")
    flight = fleet.api().open_flight({"command": ["true"]})["id"]
    wait_until(lambda: fleet.api().flight(flight)["stage"] == "landed", what="landed")
    paths = {p.split("?")[0] for _, p, _ in seen}
    assert {f"{fleet.url}/v1/runner/claim", f"{fleet.url}/v1/runners"} <= paths
