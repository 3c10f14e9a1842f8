"""A runner's credential is its own: removing the person who registered it changes nothing
for the runner, across real processes."""

from __future__ import annotations

from gg.client import ApiError
from gg.launch import LocalRunner, sign_in

from support import wait_until


def _land(api, command: list[str]) -> dict:
    flight_id = api.open_flight({"command": command})["id"]

    def landed():
        flight = api.flight(flight_id)
        return flight if flight["stage"] == "landed" else None

    return wait_until(landed, timeout=30, what=f"flight {flight_id} to land")


def test_a_runner_registered_by_a_removed_person_keeps_checking_in_and_landing_flights(fleet):
    api = fleet.api()
    ada_token = api.add_person("ada", admin=False)["token"]
    ada_config = fleet.root / "config-ada"
    sign_in(ada_config, fleet.url, ada_token)
    runner = LocalRunner("adas", fleet.url, fleet.root / "state-adas", ada_config,
                         env=fleet.env, log=fleet.root / "runner-adas.log")
    fleet.runners.append(runner.start())
    fleet.wait_online("adas")

    removed = api.remove_person("ada")
    assert removed["removed_at"] is not None
    try:
        fleet.api(ada_token).whoami()
        raise AssertionError("a removed person's token still works")
    except ApiError as exc:
        assert exc.status == 401

    seen = api.runner("adas")["last_seen_at"]
    wait_until(lambda: api.runner("adas")["last_seen_at"] > seen, what="a check-in after removal")
    landed = _land(api, ["echo", "after removal"])
    assert landed["attempts"][-1]["runner_name"] == "adas" and landed["exit_code"] == 0

    # a restart comes back on the runner's own credential: nobody needs to sign in again
    assert runner.stop() == 0
    stopped = api.runner("adas")["last_seen_at"]
    runner.start()
    wait_until(lambda: runner.alive() and api.runner("adas")["last_seen_at"] > stopped,
               what="the restarted runner to check in")
    again = _land(api, ["echo", "after restart"])
    assert again["attempts"][-1]["runner_name"] == "adas"
    assert "registration refused" not in fleet.log("adas")
