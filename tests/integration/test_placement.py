"""Placement with real processes: a real control plane, real runners and the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time

from gg.api import placement as paths
from gg.client import Client
from gg.launch import gg_argv

from support import WireJson, wait_until


def gg_as(fleet, token: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI signed in as someone else (GG_TOKEN wins over the signed-in config)."""
    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
           "GG_SERVER": fleet.url, "GG_TOKEN": token}
    return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True, timeout=60)


def flight_row(fleet, flight_id: str) -> dict:
    return fleet.api().flight(flight_id)


def stage_is(fleet, flight_id: str, stage: str):
    row = flight_row(fleet, flight_id)
    return row if row["stage"] == stage else None


def as_person(fleet, token: str) -> WireJson:
    return WireJson(Client(fleet.url, token))


def chart(fleet, name: str, means: str) -> str:
    """Chart through the API (the CLI is what other tests exercise); returns the gate."""
    return fleet.api().request("POST", paths.ENVIRONMENTS, json={"name": name, "means": means})["gate"]


def chart_and_clear(fleet, name: str, means: str) -> str:
    gate = chart(fleet, name, means)
    fleet.api().clear_gate(gate)
    return gate


def test_a_gated_flight_becomes_ready_when_its_gate_clears_and_then_lands(fleet):
    fleet.runner("ui-1", labels="environment=ui")
    fleet.wait_online("ui-1")
    first = fleet.gg("environment", "chart", "ui", "--means", 'os == "linux"', "--json")
    assert first.returncode == 0, first.stderr
    gate = json.loads(first.stdout)["gate"]
    refused = fleet.gg("fly", "--env", "ui", "--", "true")
    assert refused.returncode == 2
    assert refused.stderr == (f"environment ui is charted but waits for gate {gate}; an admin "
                              f"clears it with gg gate clear {gate}\n")
    fleet.api().clear_gate(gate)

    new_gate = chart(fleet, "ui", 'os == "linux" && cpu_count >= 1')
    opened = fleet.gg("fly", "--env", "ui", "--json", "--", "echo flew under the new meaning")
    assert opened.returncode == 0, opened.stderr
    flight = json.loads(opened.stdout)
    assert flight["stage"] == "gated" and flight["gates"] == [new_gate]
    listed = json.loads(fleet.gg("flights", "--json").stdout)
    assert listed[0]["waiting"] == f"waiting: gate {new_gate} is open (re-charting environment ui)"
    time.sleep(1.0)  # a gated flight is never offered, even to an idle matching runner
    assert flight_row(fleet, flight["id"])["stage"] == "gated"

    cleared = fleet.gg("gate", "clear", new_gate)
    assert cleared.stdout == f"gate {new_gate} cleared: re-charting environment ui\n"
    shown = wait_until(lambda: stage_is(fleet, flight["id"], "landed"), what="the flight to land")
    assert shown["attempts"][0]["runner_name"] == "ui-1"
    envs = json.loads(fleet.gg("environments", "--json").stdout)
    assert [(e["name"], e["meaning"], e["gate_status"], e["runners"], e["measured"])
            for e in envs] == [("ui", 'os == "linux" && cpu_count >= 1', "cleared", ["ui-1"], 1)]


def test_a_reserved_runner_keeps_another_persons_flight_back_and_takes_its_owners(fleet):
    api = fleet.api()
    ada = api.add_person("ada", False)["token"]
    bob = api.add_person("bob", False)["token"]
    fleet.runner("adas", labels="pool=x")
    fleet.wait_online("adas")
    owned = fleet.gg("runner", "ownership", "adas", "open")
    assert owned.stdout == "runner adas is open\n", owned.stderr
    claimed = gg_as(fleet, ada, "runner", "claim", "adas")
    assert claimed.stdout == "runner adas is yours now\n", claimed.stderr
    refused = gg_as(fleet, bob, "runner", "reserve", "adas")
    assert refused.returncode == 4
    assert refused.stderr == "only runner adas's owner (ada) or an admin may reserve it\n"
    as_person(fleet, ada).request("POST", paths.RUNNER_RESERVE.format(ref="adas"))

    bobs = as_person(fleet, bob).open_flight({"command": ["echo bob"], "labels": {"pool": "x"}})
    wait_until(lambda: flight_row(fleet, bobs["id"])["waiting"]
               == "waiting: a runner that could take it is reserved for another person",
               what="bob's flight to be kept back")
    shown = fleet.gg("show", bobs["id"])
    assert ("  waiting: a runner that could take it is reserved for another person\n"
            "  remedy: ask its owner to release it, or bring up another runner\n") in shown.stdout

    adas = as_person(fleet, ada).open_flight({"command": ["echo ada"], "labels": {"pool": "x"}})
    wait_until(lambda: stage_is(fleet, adas["id"], "landed"), what="ada's flight to land")
    assert flight_row(fleet, bobs["id"])["stage"] == "ready"

    released = gg_as(fleet, ada, "runner", "release", "adas")
    assert released.stdout == "runner adas is released: it takes anyone's flights\n"
    landed = wait_until(lambda: stage_is(fleet, bobs["id"], "landed"), what="bob's flight to land")
    assert landed["attempts"][0]["runner_name"] == "adas"
    kinds = [e["kind"] for e in api.events(kind="info:runner")]
    for kind in ("info:runner:ownership_changed", "info:runner:claimed", "info:runner:reserved",
                 "info:runner:released"):
        assert kind in kinds


def test_a_refuted_label_never_matches_and_a_measured_one_does(fleet):
    chart_and_clear(fleet, "ui", '"tier" in labels && labels["tier"] == "gold"')
    fleet.runner("tin", labels="environment=ui,tier=tin")
    fleet.wait_online("tin")
    flight = fleet.api().open_flight({"command": ["echo gold only"], "environment": "ui"})
    labels = wait_until(lambda: [r for r in json.loads(fleet.gg("runner", "labels", "--json").stdout)
                                 if r["labels"]], what="tin's labels")
    assert [(d["pair"], d["disposition"]) for d in labels[0]["labels"]] == [
        ("environment=ui", "refuted"), ("tier=tin", "stated")]
    assert flight_row(fleet, flight["id"])["waiting"] == "waiting: no runner advertises environment=ui"
    time.sleep(1.5)  # tin holds claims open all along; it is never offered the flight
    assert flight_row(fleet, flight["id"])["stage"] == "ready"
    fleet.runner("gold", labels="environment=ui,tier=gold")
    shown = wait_until(lambda: stage_is(fleet, flight["id"], "landed"), what="gold to take it")
    assert [a["runner_name"] for a in shown["attempts"]] == ["gold"]


def test_a_malformed_meaning_is_refused_with_its_position_and_nothing_is_charted(fleet):
    done = fleet.gg("environment", "chart", "ui", "--means", 'os == "linux" &&')
    assert done.returncode == 2
    assert done.stderr == ("the meaning does not parse at line 1, column 17: expected an "
                           "operand\n")
    assert json.loads(fleet.gg("environments", "--json").stdout) == []
    assert json.loads(fleet.gg("gates", "--json").stdout) == []


def test_a_root_listing_an_environment_no_live_runner_advertises_is_refused(make_fleet, tmp_path):
    fleet = make_fleet({"GG_OFFLINE_AFTER": "30"})  # ui-1 must read live even under load
    airspace = tmp_path / "airspace"
    airspace.mkdir()
    (airspace / "root.yaml").write_text("environments: [ui, nightly]\n")
    fleet.runner("ui-1", labels="environment=ui")
    fleet.wait_online("ui-1")
    refused = fleet.gg("airspace", "apply", "--airspace", str(airspace))
    assert refused.returncode == 6
    assert refused.stderr == ("the root envelope lists environment nightly, which no live runner "
                              "advertises; bring one up first (gg runner up --labels "
                              "environment=nightly)\n")
    assert fleet.gg("airspace", "show").returncode == 5  # nothing was applied

    (airspace / "root.yaml").write_text("environments: [ui]\nenvironment: [x]\n")
    bad = fleet.gg("airspace", "apply", "--airspace", str(airspace))
    assert bad.returncode == 2 and bad.stderr.startswith(f"{airspace}/root.yaml:2: environment: ")

    (airspace / "root.yaml").write_text("environments: [ui]\n")
    applied = fleet.gg("airspace", "apply", "--airspace", str(airspace))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.startswith("applied the root envelope: ui\nnote: environment ui has "
                                     "no meaning in force yet")
    chart_and_clear(fleet, "nightly", "true")
    outside = fleet.gg("fly", "--env", "nightly", "--", "true")
    assert outside.returncode == 2
    assert outside.stderr == ("environment nightly is not in the root envelope (it lists ui); "
                              "add it to airspace/root.yaml and run gg airspace apply\n")


def test_plan_lists_every_missing_thing_with_who_and_the_command(fleet):
    api = fleet.api()
    ada = api.add_person("ada", False)["token"]
    chart_and_clear(fleet, "ui", "true")
    fleet.runner("adas", labels="environment=ui")
    fleet.wait_online("adas")
    api.request("POST", paths.RUNNER_OWNERSHIP.format(ref="adas"), json={"ownership": "open"})
    for action in (paths.RUNNER_CLAIM, paths.RUNNER_RESERVE):
        as_person(fleet, ada).request("POST", action.format(ref="adas"))
    gate = chart(fleet, "ui", "cpu_count >= 1")
    flight = api.open_flight({"command": ["true"], "environment": "ui", "title": "train",
                              "labels": {"gpu": "a100"}})
    planned = fleet.gg("plan", flight["id"])
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout == f"""flight {flight['id']}: train (gated)
  waiting: gate {gate} is open (re-charting environment ui)

  ✗ gate {gate} is cleared (re-charting environment ui)
      an admin: gg gate clear {gate}
  ✓ environment ui is charted and in force (meaning: true)
  ✓ a runner advertises environment=ui (runner adas)
  ✗ a runner advertises gpu=a100
      anyone who can start a runner: gg runner up --labels gpu=a100
  ✗ a runner that advertises environment=ui,gpu=a100 can take it now (no runner advertises everything it requires)
      anyone who can start a runner: gg runner up --labels environment=ui,gpu=a100

  it starts when every ✗ above is ✓
"""
    as_json = json.loads(fleet.gg("plan", flight["id"], "--json").stdout)
    assert [i["held"] for i in as_json["items"]] == [False, True, True, False, False]
    assert as_json["startable"] is False


def test_an_attended_flight_is_refused_while_its_runner_flies_and_fails_if_not_taken(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    busy = api.open_flight({"command": ["sleep 3"], "runner": "r1"})
    wait_until(lambda: stage_is(fleet, busy["id"], "flying"), what="r1 flying")
    refused = fleet.gg("fly", "--attended", "--runner", "r1", "--", "true")
    assert refused.returncode == 6
    assert refused.stderr == (f"runner r1 is already flying {busy['id']}; an attended flight "
                              "needs it free now\n")
    wait_until(lambda: stage_is(fleet, busy["id"], "landed"), what="r1 free again")
    fleet.runners[0].stop()
    started = time.monotonic()
    followed = fleet.gg("fly", "--attended", "--runner", "r1", "--wait", "--", "true")
    assert followed.returncode == 1
    assert ("-- not taken promptly: runner r1 did not take this attended flight within 5s\n"
            in followed.stderr)
    assert time.monotonic() - started < 20  # the wake-up at the deadline, not a 25 s poll
    failed = api.flights(stage="failed")
    assert failed[0]["ended_reason"] == "not taken promptly"
