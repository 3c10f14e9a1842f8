"""A flight's whole life across real processes: open, claim, fly, report, land."""

from __future__ import annotations

import json

from support import wait_until


def test_a_flight_lands_with_its_output_visible_in_show_json(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    opened = fleet.gg("fly", "--json", "--", "echo hello from a flight; echo second line")
    assert opened.returncode == 0, opened.stderr
    flight_id = json.loads(opened.stdout)["id"]

    def landed():
        shown = fleet.gg("show", flight_id, "--json")
        data = json.loads(shown.stdout)
        return data if data["stage"] == "landed" else None

    data = wait_until(landed, what="the flight to land")
    output = "".join(f["body"]["text"] for f in data["facts"] if f["kind"] == "output")
    assert output == "hello from a flight\nsecond line\n"
    assert data["exit_code"] == 0 and data["outcome"] == "landed"
    assert [a["attempt"] for a in data["attempts"]] == [1]
    assert data["attempts"][0]["runner_name"] == "r1"
    kinds = [f["kind"] for f in data["facts"]]
    assert kinds[0] == "started" and kinds[-1] == "exit"


def test_fly_wait_exits_with_the_commands_exit_code(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    ok = fleet.gg("fly", "--wait", "--", "echo fine")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "fine\n"
    bad = fleet.gg("fly", "--wait", "--", "sh", "-c", "echo failing; exit 7")
    assert bad.returncode == 7
    assert "failing" in bad.stdout
    assert "remedy: read its output: gg show f_" in bad.stderr  # the output scrolled by
    flight = fleet.gg("flights", "--json", check=True)
    import json

    failed = next(f["id"] for f in json.loads(flight.stdout) if f["exit_code"] == 7)
    shown = fleet.gg("show", failed, check=True).stdout
    assert "the command exited with 7" in shown and "failing" in shown
    assert f"gg show {failed}" not in shown  # gg show never tells you to run gg show


def test_fifty_flights_over_three_runners_each_land_exactly_once(fleet):
    for name in ("a", "b", "c"):
        fleet.runner(name, workers=2)
    fleet.wait_online("a", "b", "c")
    api = fleet.api()
    ids = [api.open_flight({"command": ["echo", str(i)]})["id"] for i in range(50)]

    def all_landed():
        rows = {f["id"]: f for f in api.flights(limit=100)}
        return rows if all(rows[i]["stage"] == "landed" for i in ids) else None

    rows = wait_until(all_landed, timeout=60, what="50 flights to land")
    used = set()
    for i, flight_id in enumerate(ids):
        shown = api.flight(flight_id)
        assert len(shown["attempts"]) == 1, shown["attempts"]
        exits = [f for f in shown["facts"] if f["kind"] == "exit"]
        assert len(exits) == 1
        output = "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output")
        assert output == f"{i}\n"
        used.add(rows[flight_id]["runner_name"])
    assert used == {"a", "b", "c"}
    landed = api.events(kind="info:flight:landed", limit=1000)
    assert sorted(e["flight_id"] for e in landed) == sorted(ids)


def test_cancel_stops_a_flying_flight_and_its_process(fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    marker = tmp_path / "still-running"
    api = fleet.api()
    flight = api.open_flight({"command": [f"sleep 30; touch {marker}"]})
    wait_until(lambda: api.flight(flight["id"])["stage"] == "flying", what="flying")
    done = fleet.gg("cancel", flight["id"])
    assert done.returncode == 0 and "cancelled" in done.stdout
    # the runner hears of the cancel by whichever call reaches the control plane first (a
    # check-in, a renewal, the `started` fact or output refused): each ends its run "ended"
    wait_until(lambda: f"{flight['id']}: ended" in fleet.log("r1"), timeout=15,
               what="the runner to stop it")
    # The slot is free again: the next flight lands on the same single-worker runner.
    again = api.open_flight({"command": ["true"]})
    wait_until(lambda: api.flight(again["id"])["stage"] == "landed", timeout=15, what="next flight")
    assert api.flight(flight["id"])["stage"] == "cancelled"
    assert not marker.exists()
