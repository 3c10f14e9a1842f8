"""The one client's transport over a real control plane: a connection kept alive between
requests, and one the server closed while idle opened again for the next request."""

from __future__ import annotations

import select
import socket

from gg.client import Client
from support import wait_until


def _closed_by_peer(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""


def test_a_request_after_the_server_closed_the_idle_connection_is_sent_on_a_new_one(fleet):
    api = Client(fleet.url, fleet.server.owner_token())
    assert api.health().ok
    first = api._http._local.held.conn.sock
    assert first is not None  # kept alive for the next request
    assert api.whoami().person.name == "owner"
    assert api._http._local.held.conn.sock is first  # ...and used by it
    # the server closes a connection idle for its keep-alive timeout (5 s by default)
    wait_until(lambda: _closed_by_peer(first), timeout=60)
    assert api.whoami().person.name == "owner"  # no retry budget: sent once, on a new one
    assert api._http._local.held.conn.sock is not first
