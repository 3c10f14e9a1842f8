"""Run-time limits across real processes: a real control plane, real runners, the real CLI.

A flight past its limit is stopped with its whole process tree by its runner and ends
``failed``, "timed out after DUR"; the server refuses a limit beyond its maximum; an
environment's default from the root envelope applies when the flight names none.
"""

from __future__ import annotations

import json

from support import gone, lay_out, wait_until

# Leaves a child in the flight's process group and writes its pid to the host.
TREE = "sleep 300 & echo $! > {pid}; sleep 300"


def _ended(fleet, flight_id: str) -> dict | None:
    shown = fleet.gg("show", flight_id, "--json")
    data = json.loads(shown.stdout)
    return data if data["stage"] in ("landed", "failed", "cancelled") else None


def _pid(path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


def test_a_flight_past_its_timeout_is_stopped_with_its_children_and_fails_saying_why(fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    pid_file = tmp_path / "child.pid"
    opened = fleet.gg("fly", "--timeout", "2s", "--json", "--",
                      "sh", "-c", TREE.format(pid=pid_file))
    assert opened.returncode == 0, opened.stderr
    flight = json.loads(opened.stdout)
    assert flight["timeout"] == 2.0
    child = wait_until(lambda: _pid(pid_file), what="the flight's child to start")
    assert not gone(child)

    data = wait_until(lambda: _ended(fleet, flight["id"]), timeout=60, what="the flight to end")
    assert (data["stage"], data["outcome"]) == ("failed", "failed")
    assert data["ended_reason"] == "timed out after 2s"
    exits = [f["body"] for f in data["facts"] if f["kind"] == "exit"]
    assert [e["reason"] for e in exits] == ["timed out after 2s"]
    wait_until(lambda: gone(child), timeout=15, what="the flight's child to be gone")
    shown = fleet.gg("show", flight["id"])
    assert "stage     failed (timed out after 2s)" in shown.stdout, shown.stdout


def test_a_flight_that_ignores_sigterm_is_killed_with_its_children_after_the_grace(
        fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    pid_file = tmp_path / "child.pid"
    # An ignored SIGTERM is inherited by the children: only the SIGKILL after the grace ends them.
    opened = fleet.gg("fly", "--timeout", "1s", "--json", "--",
                      "sh", "-c", "trap '' TERM; " + TREE.format(pid=pid_file))
    flight = json.loads(opened.stdout)
    child = wait_until(lambda: _pid(pid_file), what="the flight's child to start")
    data = wait_until(lambda: _ended(fleet, flight["id"]), timeout=60, what="the flight to end")
    assert (data["stage"], data["ended_reason"]) == ("failed", "timed out after 1s")
    wait_until(lambda: gone(child), timeout=15, what="the flight's child to be gone")


def test_a_timeout_beyond_the_servers_maximum_is_refused_and_the_maximum_is_the_default(
        make_fleet):
    fleet = make_fleet({"GG_FLIGHT_TIMEOUT_MAX": "10m"})
    refused = fleet.gg("fly", "--timeout", "2h", "--", "true")
    assert refused.returncode == 2
    assert refused.stderr == "--timeout 2h is longer than this server allows (at most 10m)\n"
    malformed = fleet.gg("fly", "--timeout", "soon", "--", "true")
    assert (malformed.returncode, malformed.stderr) == (
        2, "--timeout: 'soon' is not a duration (try 30, 500ms, 10m, 12h or 30d)\n")
    assert fleet.api().flights() == []  # nothing was opened

    fleet.runner("r1")
    fleet.wait_online("r1")
    opened = fleet.gg("fly", "--json", "--", "sleep 300")
    flight = json.loads(opened.stdout)
    assert flight["timeout"] == 600.0
    wait_until(lambda: fleet.api().flight(flight["id"])["stage"] == "flying", what="flying")
    shown = fleet.gg("show", flight["id"])
    assert "  timeout   10m (may run " in shown.stdout, shown.stdout
    data = fleet.api().flight(flight["id"])
    assert 0 < data["time_left"] <= 600.0
    assert data["time_left_sentence"].startswith("may run ")
    fleet.gg("cancel", flight["id"], check=True)


def test_an_environments_default_from_the_root_envelope_applies_when_the_flight_names_none(
        fleet, tmp_path):
    fleet.chart("ui")
    fleet.runner("ui-1", labels="environment=ui")
    fleet.wait_online("ui-1")
    airspace = lay_out(tmp_path / "airspace",
                       {"root.yaml": "environments: [ui]\ntimeout:\n  ui: 2s\n"})
    applied = fleet.gg("airspace", "apply", "--airspace", str(airspace), "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["timeouts"] == {"ui": 2.0}
    assert "timeout: ui 2s" in fleet.gg("airspace", "show").stdout

    pid_file = tmp_path / "child.pid"
    opened = fleet.gg("fly", "--env", "ui", "--json", "--", "sh", "-c", TREE.format(pid=pid_file))
    assert opened.returncode == 0, opened.stderr
    flight = json.loads(opened.stdout)
    assert flight["timeout"] == 2.0
    child = wait_until(lambda: _pid(pid_file), what="the flight's child to start")
    data = wait_until(lambda: _ended(fleet, flight["id"]), timeout=60, what="the flight to end")
    assert (data["stage"], data["ended_reason"]) == ("failed", "timed out after 2s")
    wait_until(lambda: gone(child), timeout=15, what="the flight's child to be gone")
    # What the flight asks for wins over the environment's default.
    longer = json.loads(fleet.gg("fly", "--env", "ui", "--timeout", "5m", "--json", "--",
                                 "true").stdout)
    assert longer["timeout"] == 300.0
