"""The one client's transport over a real control plane: a connection kept alive between
requests (whichever thread sends them), and one the server closed while idle opened again for
the next request."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading

import pytest

from gg.client import IDLE_KEPT, ONE_SEND_MOST, ApiError, Client

from support import wait_until


def _closed_by_peer(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""


def _idle_socket(api: Client) -> socket.socket | None:
    idle = api._http._idle
    return idle[-1].sock if idle else None


def test_a_request_after_the_server_closed_the_idle_connection_is_sent_on_a_new_one(fleet):
    api = Client(fleet.url, fleet.server.owner_token())
    assert api.health().ok
    first = _idle_socket(api)
    assert first is not None  # kept alive for the next request
    assert api.whoami().person.name == "owner"
    assert _idle_socket(api) is first  # ...and used by it
    # the server closes a connection idle for its keep-alive timeout (5 s by default)
    wait_until(lambda: _closed_by_peer(first), timeout=60)
    assert api.whoami().person.name == "owner"  # no retry budget: sent once, on a new one
    assert _idle_socket(api) is not first


def test_threads_that_come_and_go_share_one_kept_alive_connection(fleet):
    """A runner sends each flight's hand-back from the flight's own thread: the connection
    outlives the thread, so a flight opens no connection of its own."""
    api = Client(fleet.url, fleet.server.owner_token())
    assert api.health().ok
    first = _idle_socket(api)
    assert first is not None
    seen = []
    for _ in range(3):  # one thread after another, as flights are
        thread = threading.Thread(target=lambda: seen.append(api.whoami().person.name))
        thread.start()
        thread.join()
    assert seen == ["owner"] * 3
    assert _idle_socket(api) is first and len(api._http._idle) == 1
    assert first.fileno() != -1  # still open: no thread closed it when it ended


def test_threads_at_once_are_all_answered_and_few_idle_connections_are_kept(fleet):
    api = Client(fleet.url, fleet.server.owner_token())
    names = []
    threads = [threading.Thread(target=lambda: names.append(api.whoami().person.name))
               for _ in range(IDLE_KEPT + 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert names == ["owner"] * len(threads)
    assert 1 <= len(api._http._idle) <= IDLE_KEPT
    assert all(conn.sock is not None for conn in api._http._idle)


def test_a_request_s_head_and_body_leave_in_one_send_and_the_server_reads_them(
        fleet, monkeypatch):
    """http.client sends a request's head and its body with two calls (two segments under
    TCP_NODELAY, a server woken twice); the transport joins them, up to ONE_SEND_MOST bytes
    of body, and the real control plane answers the joined request."""
    sends: list[bytes] = []
    real_send = http.client.HTTPConnection.send
    here = threading.get_ident()

    def counted(conn, data):
        if threading.get_ident() == here:  # this test's requests, not another thread's
            sends.append(bytes(data))
        return real_send(conn, data)

    api = Client(fleet.url, fleet.server.owner_token())
    assert api.health().ok  # connected and kept alive before counting
    monkeypatch.setattr(http.client.HTTPConnection, "send", counted)

    opened = api.open_flight({"command": ["true"], "title": "one send"})
    assert opened.title == "one send"
    assert len(sends) == 1 and sends[0].startswith(b"POST /v1/flights ")
    head, _, body = sends[0].partition(b"\r\n\r\n")
    assert b"content-length: %d" % len(body) in head.lower()
    assert json.loads(body)["title"] == "one send"

    sends.clear()  # a request without a body: its head alone, in one send
    assert api.whoami().person.name == "owner"
    assert len(sends) == 1 and sends[0].endswith(b"\r\n\r\n")

    sends.clear()  # a body larger than the bound: the head, then the body, as http.client does
    big = "x" * (ONE_SEND_MOST + 1)
    with pytest.raises(ApiError) as refused:  # the whole body read: its title is too long
        api.request("POST", "/v1/flights", json={"command": ["true"], "title": big})
    assert "title" in str(refused.value)
    assert len(sends) == 2 and sends[0].endswith(b"\r\n\r\n") and len(sends[1]) > ONE_SEND_MOST


def test_a_held_head_whose_body_never_comes_still_leaves_before_the_answer_is_read(fleet):
    """http.client sends no empty body at all: a head held for it leaves when the answer is
    asked for, and the server answers (no wait until the timeout)."""
    from urllib.parse import urlsplit

    from gg.client import _Connection

    url = urlsplit(fleet.url)
    conn = _Connection(url.hostname, url.port, timeout=10)  # without it: a timeout
    try:
        conn.joining = True
        conn.request("POST", "/v1/flights", body=b"",
                     headers={"authorization": f"Bearer {fleet.server.owner_token()}",
                              "content-type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 400  # the request was read whole: an empty body is no flight
        assert b"error" in answer.read()
    finally:
        conn.close()
