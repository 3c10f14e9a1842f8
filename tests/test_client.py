"""The client finds a live replica among several URLs, with the same retry rules as one.

Real ``gg server`` processes on loopback: a URL nobody listens on is a replica that went
away; a server stopped with SIGSTOP accepts a connection and never answers, which is a
request whose outcome is unknown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from gg.client import Client, Unreachable, same_control_plane
from gg.launch import LocalRunner, LocalServer, free_port, gg_argv

from support import FAST, Fleet, wait_until


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_a_list_whose_first_url_is_dead_reaches_the_next_and_remembers_it(fleet):
    dead = _dead_url()
    api = Client(f"{dead},{fleet.url}", fleet.server.owner_token())
    assert api.whoami().person.name  # no retry budget: a refused connection carried nothing
    assert api.server == fleet.url
    # A second client of the same list starts where the first one got an answer.
    assert Client(f"{dead}, {fleet.url}/", None).server == fleet.url


def test_every_cli_command_takes_a_list_of_urls(fleet):
    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
           "GG_SERVER": f"{_dead_url()},{fleet.url}"}
    opened = subprocess.run(gg_argv("fly", "--json", "--", "true"), env=env,
                            capture_output=True, text=True, timeout=60)
    assert opened.returncode == 0, opened.stderr
    listed = subprocess.run(gg_argv("--server", f"{_dead_url()},{fleet.url}", "flights", "--json"),
                            env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == [json.loads(opened.stdout)["id"]]


def test_no_replica_answering_is_one_sentence_naming_them_all(tmp_path):
    a, b = _dead_url(), _dead_url()
    with pytest.raises(Unreachable) as caught:
        Client(f"{a},{b}").health()
    assert a in caught.value.message and b in caught.value.message


def test_a_request_whose_outcome_is_unknown_is_not_sent_to_another_replica(make_fleet):
    """A replica that took the connection and went silent may have opened the flight:
    without a retry budget the open is not sent again elsewhere (it could open twice)."""
    stalled, live = make_fleet(), make_fleet()
    token = live.server.owner_token()
    stalled.server.proc.send_signal(signal.SIGSTOP)
    try:
        api = Client(f"{stalled.url},{live.url}", token, timeout=1.0)
        with pytest.raises(Unreachable):
            api.open_flight({"command": ["true"]})
        assert Client(live.url, token).flights() == []
        # The next request goes to the next replica; a connection refused is failed over.
        assert api.server == live.url
        assert api.open_flight({"command": ["true"]}).id
    finally:
        stalled.server.proc.send_signal(signal.SIGCONT)
    assert len(Client(live.url, token).flights()) == 1


def test_a_runner_carries_on_through_another_replica_when_its_replica_goes_away(tmp_path):
    """The runner's list names a replica that is not there yet and one that serves; the one
    that serves goes away and a replacement serves the same store: the runner, registered
    once, lands a flight opened through the replacement."""
    fleet = Fleet(tmp_path, dict(FAST)).start()
    spare = LocalServer(fleet.server.data_dir, free_port(), env=fleet.env,
                        log=tmp_path / "spare.log")
    try:
        runner = LocalRunner("r1", f"{spare.url},{fleet.url}", tmp_path / "state-r1",
                             fleet.config_dir, env=fleet.env, log=tmp_path / "runner-r1.log")
        fleet.runners.append(runner.start())
        fleet.wait_online("r1")
        first = fleet.api().open_flight({"command": ["true"]})["id"]
        wait_until(lambda: fleet.api().flight(first)["stage"] == "landed", 60,
                   what="the first flight landed")
        fleet.server.stop()
        spare.start()
        api = Client(spare.url, fleet.server.owner_token())
        second = api.open_flight({"command": ["true"]}).id
        wait_until(lambda: api.flight(second).stage == "landed", 60,
                   what="the flight opened through the replacement landed")
        assert "this runner's key is new" in fleet.log("r1")
        assert runner.alive()
        assert len(api.events(kind="info:runner:registered")) == 1
    finally:
        spare.stop()
        fleet.stop()


def test_a_registration_is_kept_when_the_list_of_replicas_changes():
    assert same_control_plane("http://a:1", "http://b:2,http://a:1")
    assert same_control_plane("http://a:1,http://b:2", "http://b:2/")
    assert not same_control_plane("http://a:1", "http://b:2")


def test_a_hand_back_refused_for_its_claim_next_is_sent_again_without_it(fleet):
    """A replica of the version before hand-backs could carry the next flight refuses the
    field (400, nothing stored); the client sends the hand-back again without it, so the
    flight lands once instead of flying again when its lease runs out. A ``claim_next`` out
    of range is refused the same way by this version, which is what plays the old replica."""
    import httpx

    from support import http_proof

    owner = fleet.server.owner_token()
    with httpx.Client(base_url=fleet.url, timeout=30) as http:
        registered = http.post("/v1/runners", json={"name": "r1", **http_proof(http, "register")},
                               headers={"authorization": f"Bearer {owner}"})
        assert registered.status_code == 201, registered.text
    credential = registered.json()["credential"]
    runner = Client(fleet.url, credential)
    runner.check_in({"capabilities": {"isolation": ["none"]}})
    opened = fleet.api().open_flight({"command": ["true"]})["id"]
    claimed = runner.claim(free_slots=1, wait=0)
    assert claimed.flight.id == opened
    body = {"epoch": claimed.lease.epoch, "outcome": "landed", "exit_code": 0,
            "key": "1:hand-back", "claim_next": 100_000}
    handed = runner.hand_back(opened, body)
    assert handed.repeat is False and handed.next is None
    flight = fleet.api().flight(opened)
    assert flight["stage"] == "landed" and len(flight["attempts"]) == 1
