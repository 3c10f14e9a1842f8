"""Retention across real processes: a server with a one-second window for ended flights
prunes a landed flight (it is gone from ``gg flights`` and ``gg show`` answers 404) while a
waiting flight of the same age stays; ``/metrics`` and ``gg whoami --server`` carry the
windows and the store's size; ``gg server vacuum`` refuses while the server runs and compacts
once it is stopped."""

from __future__ import annotations

import json

import httpx

from gg.launch import gg_argv

from support import wait_until


def test_an_ended_flight_is_pruned_after_its_window_and_a_waiting_one_stays(make_fleet):
    fleet = make_fleet({"GG_RETAIN_FLIGHTS": "3s", "GG_RETAIN_EVENTS": "1h",
                        "GG_RETENTION_PERIOD": "0.2"})
    waiting = fleet.gg("fly", "--json", "--labels", "gpu=none-here", "--", "true")
    assert waiting.returncode == 0, waiting.stderr
    waiting_id = json.loads(waiting.stdout)["id"]
    fleet.runner("r1")
    fleet.wait_online("r1")
    # Not ``--wait``: a waiter slower than the window (a busy machine) finds the landed flight
    # pruned already, and its events with it. Only an ended flight is ever pruned (the
    # waiting one below stays), so one gone was flown and ended.
    flown = fleet.gg("fly", "--json", "--", "echo", "done")
    assert flown.returncode == 0, flown.stderr
    landed_id = json.loads(flown.stdout)["id"]

    def pruned():
        shown = fleet.gg("show", landed_id)
        return shown if shown.returncode != 0 else None

    gone = wait_until(pruned, timeout=60, what="the landed flight to be pruned")
    assert gone.returncode == 5 and gone.stderr.count("\n") == 1, gone.stderr
    listed = json.loads(fleet.gg("flights", "--json", check=True).stdout)
    assert [f["id"] for f in listed] == [waiting_id]
    shown = json.loads(fleet.gg("show", waiting_id, "--json", check=True).stdout)
    assert shown["stage"] == "ready"

    metrics = httpx.get(fleet.url + "/metrics").text
    values = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
              if line and not line.startswith("#")}
    assert values["gg_retain_flights_seconds"] == 3.0
    assert values["gg_retain_events_seconds"] == 3600.0
    assert values["gg_database_bytes"] > 0

    who = fleet.gg("whoami", "--server", check=True).stdout
    assert "ended flights kept: 3s" in who and "events kept: 1h" in who
    assert json.loads(fleet.gg("whoami", "--json", check=True).stdout)["server"][
        "database_bytes"] > 0


def test_vacuum_refuses_while_the_server_runs_and_compacts_once_it_is_stopped(make_fleet):
    fleet = make_fleet({"GG_RETAIN_FLIGHTS": "1s", "GG_RETENTION_PERIOD": "0.2",
                        "GG_DATABASE_URL": ""})  # vacuum is SQLite's
    api = fleet.api()
    for i in range(40):
        flight = api.open_flight({"command": ["echo", "x" * 2000, str(i)]})
        api.cancel(flight["id"])
    wait_until(lambda: api.flights() == [], timeout=30, what="the cancelled flights to be pruned")
    data_dir = str(fleet.server.data_dir)

    refused = fleet.gg("server", "vacuum", "--data-dir", data_dir)
    assert refused.returncode == 6
    assert refused.stderr.strip().endswith("stop it, then vacuum")
    assert refused.stderr.count("\n") == 1

    fleet.server.stop()
    store = fleet.server.data_dir / "gg.sqlite3"
    done = fleet.gg("server", "vacuum", "--data-dir", data_dir)
    assert done.returncode == 0, done.stderr
    before, after = [int(w) for w in done.stdout.split() if w.isdigit()]
    assert after <= before and after == store.stat().st_size
    assert not (fleet.server.data_dir / "gg.sqlite3-wal").exists() or \
        (fleet.server.data_dir / "gg.sqlite3-wal").stat().st_size == 0
    fleet.server.start()  # the store opens as before
    assert api.flights() == []


def test_a_window_that_is_not_a_duration_is_one_sentence_and_exit_2(tmp_path):
    import subprocess

    done = subprocess.run(gg_argv("server", "--data-dir", str(tmp_path / "data"),
                                  "--retain-flights", "soon"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--retain-flights" in done.stderr
    assert not (tmp_path / "data").exists()
