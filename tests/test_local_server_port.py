"""gg.launch.LocalServer: a server counts as started only when it is the one answering on its
port. A port from free_port() can be taken by another process (a test beside this one, under
xdist) before the server binds it; that process's health answer once passed for the new
server's, whose own process had exited having migrated nothing."""

from __future__ import annotations

import os
import socket

import pytest

from gg.launch import LocalServer, PortTaken, free_port, listens


@pytest.fixture
def first(tmp_path):
    server = LocalServer(tmp_path / "first", free_port()).start()
    yield server
    server.stop()


def test_a_port_another_server_answers_on_is_not_taken_for_this_ones(first, tmp_path):
    second = LocalServer(tmp_path / "second", first.port)
    try:
        second.start()
        assert second.proc is not None and second.proc.poll() is None
        assert second.port != first.port
        assert listens(second.proc.pid, second.port)
        assert (tmp_path / "second" / "owner-token").exists()
    finally:
        second.stop()


def test_a_server_started_again_keeps_its_port_and_says_when_it_is_taken(tmp_path):
    server = LocalServer(tmp_path / "again", free_port()).start()
    port = server.port
    server.stop()
    with socket.socket() as taker:
        taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taker.bind(("127.0.0.1", port))
        taker.listen()
        with pytest.raises(PortTaken):
            server.start()
    assert server.port == port
    server.start()
    try:
        assert listens(server.proc.pid, port)
    finally:
        server.stop()


def test_a_data_folder_another_server_holds_is_said_not_tried_on_other_ports(first):
    # exit 6 is also a held data folder: another port would not help, and it is not PortTaken
    second = LocalServer(first.data_dir, free_port())
    port = second.port
    with pytest.raises(RuntimeError, match="exited with code 6") as refused:
        second.start()
    assert not isinstance(refused.value, PortTaken)
    assert second.port == port


def test_listens_names_only_the_process_holding_the_port():
    with socket.socket() as held, socket.socket() as other:
        held.bind(("127.0.0.1", 0))
        held.listen()
        other.bind(("127.0.0.1", 0))  # bound, not listening
        assert listens(os.getpid(), held.getsockname()[1])
        assert not listens(os.getpid(), other.getsockname()[1])
        assert not listens(1, held.getsockname()[1])
        assert listens(None, held.getsockname()[1])  # any process of this machine
        assert not listens(None, other.getsockname()[1])
