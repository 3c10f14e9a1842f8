"""Start estimates across real processes: a real ``gg server`` and one real ``gg runner up``
with one worker slot; history made by flights that really landed."""

from __future__ import annotations

import json
import os
import re
import subprocess

from gg.launch import gg_argv

from support import wait_until

ESTIMATE = re.compile(r"expected to start (in a few seconds|in ~\d+ (s|min)) "
                      r"\(\d+ flights? ahead on 1 runner\)")


def landed(api, flight_id: str) -> bool:
    return api.flight(flight_id)["stage"] == "landed"


def test_an_estimate_is_shown_in_show_flights_json_and_fly_wait_and_checked_afterwards(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    for _ in range(2):  # the history: two naps that really landed
        nap = api.open_flight({"command": ["sleep 0.5"], "title": "nap"})["id"]
        wait_until(lambda: landed(api, nap), what="a nap to land")
    unknown = api.open_flight({"command": ["true"], "labels": {"gpu": "yes"}})["id"]
    # the blocker flies until it is cancelled: the queue behind it waits as long as we look
    blocker = api.open_flight({"command": ["sleep 300"], "title": "nap"})["id"]
    wait_until(lambda: api.flight(blocker)["stage"] == "flying", what="the blocker to fly")
    first = api.open_flight({"command": ["sleep 0.5"], "title": "nap"})["id"]
    second = api.open_flight({"command": ["sleep 0.5"], "title": "nap"})["id"]

    shown = fleet.gg("show", second, check=True).stdout
    assert "  waiting: " in shown and ESTIMATE.search(shown), shown
    listing = fleet.gg("flights", check=True).stdout
    assert ESTIMATE.search(" ".join(listing.split())), listing
    rows = {r["id"]: r for r in json.loads(fleet.gg("flights", "--json", check=True).stdout)}
    row = rows[second]
    assert row["expected_start_low"] <= row["expected_start_at"] <= row["expected_start_high"]
    assert row["expected_start_basis"].endswith("ahead on 1 runner")
    assert rows[first]["expected_start_at"] <= row["expected_start_at"]
    nobody = rows[unknown]
    assert (nobody["expected_start_at"], nobody["expected_start_low"],
            nobody["expected_start_high"]) == (None, None, None)
    assert nobody["expected_start_basis"].startswith("no estimate")
    assert rows[blocker]["expected_start_basis"] is None  # flying: not waiting
    detail = json.loads(fleet.gg("show", second, "--json", check=True).stdout)
    assert detail["expected_start_at"] is not None

    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
           "GG_SERVER": fleet.url}
    flying = subprocess.Popen(gg_argv("fly", "--wait", "--title", "nap", "--", "sleep 0.5"),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(api.flights(stage="ready")) >= 4, timeout=60,
                   what="gg fly --wait's flight to be waiting")
        api.cancel(blocker)  # the runner stops it; the queue moves
        out, err = flying.communicate(timeout=120)
    finally:
        flying.kill()
    assert flying.returncode == 0, err
    assert "opened\nwaiting: " in err and ESTIMATE.search(err), err

    wait_until(lambda: landed(api, second), timeout=60, what="the queue to land")
    report = json.loads(fleet.gg("estimate", "accuracy", "--json", check=True).stdout)
    assert report["starts"] >= 2 and report["median_error"] is not None
    assert 0 <= report["inside"] <= report["starts"]
    text = fleet.gg("estimate", "accuracy", "--since", "1h", check=True).stdout
    assert re.match(r"\d+ starts with an estimate: median error [\d.]+ (s|min), p90 error", text), text
    bad = fleet.gg("estimate", "accuracy", "--since", "soon")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("--since: 'soon' is not a duration")
    api.cancel(unknown)


def test_fly_wait_prints_the_estimate_again_when_the_queue_ahead_moves(fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    nap = api.open_flight({"command": ["sleep 0.5"], "title": "nap"})["id"]
    wait_until(lambda: landed(api, nap), what="a nap to land")
    blocker = api.open_flight({"command": ["sleep 300"], "title": "nap"})["id"]
    wait_until(lambda: api.flight(blocker)["stage"] == "flying", what="the blocker to fly")
    ahead = [api.open_flight({"command": ["sleep 0.5"], "title": "nap"})["id"] for _ in range(2)]

    said = tmp_path / "fly.err"
    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
           "GG_SERVER": fleet.url}
    with open(said, "w") as err:
        flying = subprocess.Popen(gg_argv("fly", "--wait", "--title", "nap", "--", "sleep 0.5"),
                                  env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        wait_until(lambda: "(2 flights ahead on 1 runner)" in said.read_text(), timeout=60,
                   what="gg fly --wait to print its estimate behind two flights")
        api.cancel(ahead[0])  # one fewer ahead: the estimate moves, and is printed again
        wait_until(lambda: "(1 flight ahead on 1 runner)" in said.read_text(), timeout=60,
                   what="gg fly --wait to print the estimate again behind one flight")
        api.cancel(blocker)
        flying.wait(timeout=120)
    finally:
        flying.kill()
    text = said.read_text()
    assert flying.returncode == 0, text
    estimates_said = [line for line in text.splitlines() if ESTIMATE.fullmatch(line)]
    assert len(estimates_said) >= 2 and len(set(estimates_said)) == len(estimates_said), text
    assert text.index("waiting: ") < text.index("expected to start"), text  # why, then when
