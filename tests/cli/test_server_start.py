"""``gg server`` refuses, in one sentence and before it creates anything, to start where it
cannot serve: a port another program holds, a data dir another server uses (issue 24, 8)."""

from __future__ import annotations

import os
import socket
import subprocess

from gg.launch import LocalServer, free_port, gg_argv


def start(data_dir, port: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GG_")}
    return subprocess.run(gg_argv("server", "--data-dir", str(data_dir), "--listen",
                                  f"127.0.0.1:{port}", "--dev"),
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_port_in_use_is_one_sentence_and_creates_nothing(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        done = start(tmp_path / "data", port)
    finally:
        holder.close()
    assert done.returncode == 6
    assert done.stderr.strip() == (f"port {port} on 127.0.0.1 is in use: stop what listens "
                                   "there, or start gg server with another --listen HOST:PORT")
    assert not (tmp_path / "data" / "owner-token").exists()
    assert not any(p.name.startswith("gg.") for p in (tmp_path / "data").glob("*")) \
        if (tmp_path / "data").exists() else True


def test_a_second_server_on_the_same_data_dir_is_refused(tmp_path):
    first = LocalServer(tmp_path / "data", free_port(), log=tmp_path / "first.log")
    first.start()
    try:
        done = start(tmp_path / "data", free_port())
        assert done.returncode == 6, done.stderr
        assert done.stderr.strip() == (
            f"another gg server (pid {first.proc.pid}) is using the data dir "
            f"{tmp_path / 'data'}: stop it first, or give this one its own --data-dir")
        assert "control plane on" not in done.stderr
    finally:
        first.stop()
    # Once the first has stopped, the data dir is free again.
    again = LocalServer(tmp_path / "data", free_port(), log=tmp_path / "again.log")
    again.start()
    again.stop()


def test_pull_polls_too_seldom_for_the_leases_are_refused_in_one_sentence(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GG_")},
           "GG_LEASE_TTL": "3", "GG_LEASE_RENEW_AT": "2", "GG_PULL_BUSY_INTERVAL": "5"}
    done = subprocess.run(gg_argv("server", "--data-dir", str(tmp_path / "data"), "--listen",
                                  f"127.0.0.1:{free_port()}", "--dev"),
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "PULL_BUSY_INTERVAL (5s) must be shorter than the 2s a pull-mode runner's lease leaves "
        "for its renewal (LEASE_TTL 3s less the runner's stop margin 1s): poll more often or "
        "make the leases longer")
    assert not (tmp_path / "data").exists()
