"""Hostile input against a real ``gg server`` process: always a 4xx in the one JSON shape,
never a 5xx, and the server stays up with its memory bounded."""

from __future__ import annotations

import asyncio
import socket

import httpx
import psutil
import pytest

from gg.launch import LocalServer, free_port

from support import http_proof

LIMIT = 1_048_576  # the default max body size


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("adversarial")
    # The module holds one lease throughout: it must outlive the module on a loaded machine,
    # or its expiry would read as a change that a refused request made.
    env = {"GG_CLAIM_WAIT": "0.2", "GG_LEASE_TTL": "3600", "GG_LEASE_RENEW_AT": "600"}
    srv = LocalServer(root / "data", free_port(), env=env, log=root / "server.log").start()
    owner = {"authorization": f"Bearer {srv.owner_token()}"}
    reg = httpx.post(srv.url + "/v1/runners", headers=owner,
                     json={"name": "victim", **http_proof(httpx, "register", base=srv.url)}).json()
    srv.owner = owner
    srv.runner = {"authorization": f"Bearer {reg['credential']}"}
    httpx.post(srv.url + "/v1/runner/check-in", headers=srv.runner, json={}).raise_for_status()
    httpx.post(srv.url + "/v1/flights", headers=owner, json={"command": ["true"]}).raise_for_status()
    claim = httpx.post(srv.url + "/v1/runner/claim", headers=srv.runner, json={"wait": 0}).json()
    srv.flight = claim["flight"]["id"]
    try:
        yield srv
    finally:
        srv.stop()
        log = (root / "server.log").read_text()
        assert "internal error" not in log and "Traceback" not in log, log[-3000:]


def _refused(response: httpx.Response, *statuses: int) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    if statuses:
        assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return body["error"]


def _post(server, path: str, content: bytes | str, who: str = "owner", **headers) -> httpx.Response:
    auth = server.owner if who == "owner" else server.runner
    return httpx.post(server.url + path, content=content, timeout=30,
                      headers={**auth, "content-type": "application/json", **headers})


def _nested(depth: int, opener: str = '{"a":', closer: str = "}") -> str:
    return opener * depth + "1" + closer * depth


# -- size ------------------------------------------------------------------------------


def test_an_oversized_declared_body_is_refused_413_before_it_is_read(server):
    body = b'{"command": ["' + b"x" * (LIMIT + 10) + b'"]}'
    error = _refused(_post(server, "/v1/flights", body), 413)
    assert error["code"] == "too_large"


def test_an_oversized_streamed_body_is_refused_413(server):
    def chunks():
        yield b'{"command": ["'
        for _ in range(40):
            yield b"x" * 64_000
        yield b'"]}'

    response = httpx.post(server.url + "/v1/flights", content=chunks(), timeout=30,
                          headers={**server.owner, "content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"


# -- structure -------------------------------------------------------------------------


@pytest.mark.parametrize("path, who, make", [
    ("/v1/flights", "owner", lambda: "[" * 200_000 + "]" * 200_000),
    ("/v1/flights", "owner", lambda: '{"command": ["x"], "title": ' + _nested(5000) + "}"),
    ("/v1/runners", "owner", lambda: '{"name": "d", "public_key": "x", "inventory": '
                                     + _nested(900) + "}"),
    ("/v1/runner/check-in", "runner", lambda: '{"readings": ' + _nested(40) + "}"),
    ("/v1/runner/check-in", "runner", lambda: '{"capabilities": {"a": '
                                              + _nested(200, "[", "]") + "}}"),
    ("/v1/runner/flights/{flight}/facts", "runner",
     lambda: '{"epoch": 1, "facts": [{"kind": "note", "body": ' + _nested(800) + "}]}"),
])
def test_deep_nesting_is_refused_with_4xx(server, path, who, make):
    _refused(_post(server, path.format(flight=server.flight), make(), who))


def test_moderate_nesting_is_accepted_and_reads_back(server):
    fine = '{"epoch": 1, "facts": [{"kind": "note", "body": ' + _nested(20) + ', "key": "1:n:1"}]}'
    assert _post(server, f"/v1/runner/flights/{server.flight}/facts", fine, "runner").status_code == 200
    shown = httpx.get(f"{server.url}/v1/flights/{server.flight}", headers=server.owner)
    assert shown.status_code == 200


# -- encoding --------------------------------------------------------------------------


@pytest.mark.parametrize("content", [
    b'{"command": ["\xff\xfe"]}',
    b'{"command": ["\xed\xa0\x80"]}',  # an encoded surrogate
    b'{"command": ["\\ud800"]}',  # an escaped lone surrogate
    b'{"command": ["x"], "title": NaN}',
    b'{"command": ["x"], "attended": 1' + b"0" * 5000 + b"}",
    b"",
    b"null",
    b"{not json",
])
def test_invalid_encodings_are_refused_with_4xx(server, content):
    _refused(_post(server, "/v1/flights", content))


@pytest.mark.parametrize("url", [
    "/v1/flights/%ff%fe", "/v1/runners/%ed%a0%80", "/v1/flights/%00",
    "/v1/events?kind=%ff&runner=%ed%a0%80", "/v1/events?after=-1", "/v1/events?after=1e999",
    "/v1/flights?limit=abc", "/v1/flights?stage=%00", "/v1/flights/" + "x" * 5000,
])
def test_hostile_paths_and_queries_are_4xx(server, url):
    _refused(httpx.get(server.url + url, headers=server.owner, timeout=30))


# -- types -----------------------------------------------------------------------------


@pytest.mark.parametrize("path, who, body", [
    ("/v1/flights", "owner", '{"command": "echo"}'),
    ("/v1/flights", "owner", '{"command": [1, 2]}'),
    ("/v1/flights", "owner", '{"command": ["x"], "labels": ["a=b"]}'),
    ("/v1/flights", "owner", '{"command": ["x"], "labels": {"A B": "c"}}'),
    ("/v1/flights", "owner", '{"command": ["x"], "attended": "yes please"}'),
    ("/v1/flights", "owner", '{"command": ["x"], "runner": {"id": 1}}'),
    ("/v1/flights", "owner", '[{"command": ["x"]}]'),
    ("/v1/people", "owner", '{"name": 5}'),
    ("/v1/runners", "owner", '{"name": "r", "public_key": "x", "workers": -1}'),
    ("/v1/runners", "owner", '{"name": "r", "public_key": "not base64 at all"}'),
    ("/v1/runner/check-in", "runner", '{"free_slots": "many"}'),
    ("/v1/runner/check-in", "runner", '{"held": "f_1"}'),
    ("/v1/runner/claim", "runner", '{"wait": -5}'),
    ("/v1/runner/claim", "runner", '{"free_slots": 1e308}'),
    ("/v1/runner/flights/{flight}/renew", "runner", '{"epoch": 99999999999999999999999}'),
    ("/v1/runner/flights/{flight}/facts", "runner", '{"epoch": 1, "facts": [{"kind": "exit"}, 3]}'),
    ("/v1/runner/flights/{flight}/hand-back", "runner", '{"epoch": 1, "outcome": "exploded"}'),
    ("/v1/runner/flights/{flight}/hand-back", "runner", '{"epoch": 1, "outcome": "landed", "exit_code": 1e6}'),
    ("/v1/runner/credential", "runner", '{"nonce": "n", "signature": "!!!"}'),
])
def test_wrong_types_are_refused_with_4xx(server, path, who, body):
    _refused(_post(server, path.format(flight=server.flight), body, who))


def test_a_non_json_content_type_is_4xx(server):
    response = httpx.post(server.url + "/v1/flights", content=b'{"command": ["x"]}', timeout=30,
                          headers={**server.owner, "content-type": "text/plain"})
    _refused(response)


def test_garbage_on_the_socket_does_not_hurt_the_server(server):
    for payload in (b"\x00\xff" * 100 + b"\r\n\r\n",
                    b"POST /v1/flights HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                    b"GET / HTTP/1.1\r\n" + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(payload)
            try:
                answer = s.recv(200)
            except (ConnectionResetError, socket.timeout):
                answer = b""
            assert not answer.startswith(b"HTTP/1.1 5"), answer
    assert httpx.get(server.url + "/v1/health").status_code == 200


# -- a burst -------------------------------------------------------------------------------


def test_a_burst_of_hostile_requests_leaves_the_server_up_and_its_memory_bounded(server):
    proc = psutil.Process(server.proc.pid)
    bad_bodies = [
        b'{"command": ["' + b"x" * (LIMIT + 1) + b'"]}',
        ("[" * 50_000 + "]" * 50_000).encode(),
        b'{"command": ["\xff"]}',
        b'{"command": 7}',
        ('{"command": ["x"], "labels": ' + _nested(100) + "}").encode(),
    ]

    async def burst(n: int) -> dict[int, int]:
        statuses: dict[int, int] = {}
        limits = httpx.Limits(max_connections=16)
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as http:
            sem = asyncio.Semaphore(16)

            async def one(i: int) -> None:
                async with sem:
                    r = await http.post("/v1/flights", content=bad_bodies[i % len(bad_bodies)],
                                        headers={**server.owner, "content-type": "application/json"})
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

            await asyncio.gather(*(one(i) for i in range(n)))
        return statuses

    asyncio.run(burst(200))  # warm up allocator pools before the baseline
    before = proc.memory_info().rss
    statuses = asyncio.run(burst(1500))
    after = proc.memory_info().rss
    assert all(400 <= s < 500 for s in statuses), statuses
    assert sum(statuses.values()) == 1500
    assert httpx.get(server.url + "/v1/health").status_code == 200
    assert after - before < 32 * 2**20, f"RSS grew {(after - before) / 2**20:.1f} MiB over the burst"


# -- numbers JSON does not have ------------------------------------------------------------


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_nan_and_infinity_are_refused_400_and_nothing_is_stored(server, word):
    """Python's json reads NaN and Infinity (and 1e999 as infinity); the server must not."""
    def seen():
        runner = httpx.get(f"{server.url}/v1/runners/victim", headers=server.owner)
        facts = httpx.get(f"{server.url}/v1/flights/{server.flight}/facts", headers=server.owner)
        flights = httpx.get(f"{server.url}/v1/flights", headers=server.owner)
        assert {runner.status_code, facts.status_code, flights.status_code} == {200}
        return runner.json()["readings"], facts.json(), flights.json()

    before = seen()
    for path, who, body in (
        ("/v1/runner/check-in", "runner", '{"readings": {"cpu_percent": %s}}'),
        ("/v1/runner/check-in", "runner", '{"inventory": {"disks": [{"free": %s}]}}'),
        ("/v1/runner/flights/{flight}/facts", "runner",
         '{"epoch": 1, "facts": [{"kind": "note", "body": {"x": %s}, "key": "n:1"}]}'),
        ("/v1/flights", "owner", '{"command": ["x"], "title": "t", "attended": %s}'),
        ("/v1/runners", "owner", '{"name": "nan", "public_key": "x", "workers": %s}'),
        ("/v1/runner/claim", "runner", '{"free_slots": 1, "wait": %s}'),
    ):
        response = _post(server, path.format(flight=server.flight), body % word, who)
        error = _refused(response, 400)
        assert error["code"] == "invalid_request", (path, error)
        assert error["message"].startswith("the request body is not valid JSON ("), error
    assert seen() == before
