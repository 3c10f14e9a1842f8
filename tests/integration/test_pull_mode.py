"""Pull-mode runners across real processes: attached, polled, flying, fenced."""

from __future__ import annotations

import json

import pytest

from pull_support import PullRunner, netns_available
from support import wait_until


@pytest.fixture
def pulled(fleet, tmp_path):
    made = []

    def make(name: str, **kw) -> PullRunner:
        runner = PullRunner(tmp_path, name, fleet.env, **kw)
        made.append(runner)
        wait_until(runner.fingerprint, what=f"{name} to listen")
        return runner

    yield make
    for runner in made:
        runner.stop()


def _attach(fleet, runner: PullRunner, *extra: str):
    return fleet.gg("runner", "attach", runner.url, "--name", runner.name, *extra)


def _landed(fleet, flight_id):
    def landed():
        data = fleet.api().flight(flight_id)
        return data if data["stage"] == "landed" else None
    return landed


def test_an_attached_pull_runner_lands_a_flight(fleet, pulled):
    runner = pulled("p1")
    attached = _attach(fleet, runner, "--fingerprint", runner.fingerprint())
    assert attached.returncode == 0, attached.stderr
    assert runner.fingerprint() in attached.stdout
    row = fleet.wait_online("p1")["p1"]
    assert row["mode"] == "pull" and row["url"] == runner.url
    flight_id = fleet.api().open_flight({"command": ["echo", "pulled"]})["id"]
    data = wait_until(_landed(fleet, flight_id), what="the flight to land")
    output = "".join(f["body"]["text"] for f in data["facts"] if f["kind"] == "output")
    assert output == "pulled\n"
    assert data["attempts"][0]["runner_name"] == "p1"
