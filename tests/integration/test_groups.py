"""Runner groups and the fleet-wide stop with a real control plane and real runner
processes (SPEC 17): placement by group, exclusive groups, bindings, group drain with a
parked claim, demand, the delete blockers and ``gg fleet quiesce``."""

from __future__ import annotations

import json
import time

from fleet_support import apply_and_clear, mint, profile_yaml
from support import cli, wait_until


def _stage(api, flight_id, *stages):
    shown = api.flight(flight_id)
    return shown if shown["stage"] in stages else None


def _gg(fleet, *args):
    code, out, err = cli(fleet, *args)
    assert code == 0, err
    return out


def _events(fleet, kind):
    return json.loads(_gg(fleet, "events", "--json", "--kind", kind))


def _checked_in_since(fleet, name, since, times=2):
    row = fleet.runner_row(name)
    return row is not None and row["last_seen_at"] >= since + times * 0.5


def test_an_exclusive_group_takes_only_its_own_work_and_starved_work_reads_as_waiting(fleet):
    fleet.runner("lab1")
    fleet.wait_online("lab1")
    _gg(fleet, "attribute", "set", "gpu", "--values", "a100,h100")
    out = _gg(fleet, "group", "set", "gpu-lab", "--attr", "gpu=a100", "--exclusive")
    assert out == "group gpu-lab: attributes gpu=a100; unbound; exclusive\n"
    assert _gg(fleet, "runner", "group", "lab1", "gpu-lab") == (
        "runner lab1 moved from group default to gpu-lab\n")
    row = fleet.runner_row("lab1")
    assert (row["group"], row["group_exclusive"], row["group_attributes"],
            row["group_draining"]) == ("gpu-lab", True, {"gpu": "a100"}, False)
    api = fleet.api()
    moved_at = time.time()
    plain = api.open_flight({"command": ["echo overflow"]})  # accepted: not an error
    wait_until(lambda: _checked_in_since(fleet, "lab1", moved_at), what="two more check-ins")
    code, out, err = cli(fleet, "show", plain["id"])
    assert code == 0, err
    assert ("waiting: only runners of exclusive group gpu-lab could take it, and it does not "
            "name that group") in out
    assert api.flight(plain["id"])["stage"] == "ready"
    named = api.open_flight({"command": ["echo named"], "group": "gpu-lab"})
    selected = api.open_flight({"command": ["echo selected"], "where": {"gpu": "a100"}})
    for f in (named, selected):
        wait_until(lambda: _stage(api, f["id"], "landed"), what="its own work to land")
    assert api.flight(plain["id"])["stage"] == "ready"
    moved = _events(fleet, "info:runner:moved")
    assert [(e["actor"], e["body"]["from"], e["body"]["to"]) for e in moved] == [
        ("owner", "default", "gpu-lab")]
    assert [e["body"]["group"] for e in _events(fleet, "info:group:set")] == ["gpu-lab"]


def test_unregistered_attributes_and_unknown_groups_are_refused_with_a_sentence(fleet):
    code, _, err = cli(fleet, "group", "set", "dc1", "--attr", "site=dc1")
    assert code != 0 and "attribute key site is not registered" in err
    assert "gg attribute set site" in err
    code, _, err = cli(fleet, "attribute", "set", "environment")
    assert code != 0 and "attribute key environment is reserved" in err
    code, _, err = cli(fleet, "fly", "--group", "nowhere", "--", "true")
    assert code != 0 and err.strip() == "no group nowhere (gg groups lists them)"
    code, _, err = cli(fleet, "fly", "--where", "site=dc1", "--", "true")
    assert code != 0 and "attribute key site is not registered" in err


def test_a_bound_environment_goes_only_to_runners_of_bound_groups(fleet):
    fleet.chart("prod")
    fleet.runner("outside", labels="environment=prod")
    fleet.runner("inside", labels="environment=prod")
    fleet.wait_online("outside", "inside")
    _gg(fleet, "group", "set", "dc2", "--bind", "prod")
    _gg(fleet, "group", "set", "dc1")
    _gg(fleet, "runner", "group", "inside", "dc2")
    code, _, err = cli(fleet, "fly", "--env", "prod", "--group", "dc1", "--", "true")
    assert code != 0
    assert err.strip() == ("environment prod is bound to group dc2; a flight there cannot name "
                           "group dc1: open it with --group dc2 or without --group")
    api = fleet.api()
    flights = [api.open_flight({"command": ["echo prod"], "environment": "prod"})
               for _ in range(3)]
    for f in flights:
        wait_until(lambda: _stage(api, f["id"], "landed"), what="the bound flights to land")
    assert {api.flight(f["id"])["runner_name"] for f in flights} == {"inside"}
    _gg(fleet, "group", "drain", "dc2")
    waiting = api.open_flight({"command": ["true"], "environment": "prod"})
    shown = api.flight(waiting["id"])
    assert shown["waiting"] == ("waiting: every runner that advertises environment=prod is in a "
                                "draining group (dc2)")
    assert shown["remedy"] == "an admin resumes the group: gg group resume dc2"
    _gg(fleet, "runner", "group", "inside", "default")
    shown = api.flight(waiting["id"])
    assert shown["waiting"] == ("waiting: environment prod is bound to group dc2, and no runner "
                                "of it advertises environment=prod")
    plan = api.request("GET", f"/v1/flights/{waiting['id']}/plan")
    assert plan["waiting"] == shown["waiting"] and not plan["startable"]


def test_a_group_drain_holds_back_a_parked_claim_until_resumed(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    _gg(fleet, "group", "set", "edge")
    _gg(fleet, "runner", "group", "r1", "edge")
    out = _gg(fleet, "group", "drain", "edge")
    assert out == "group edge is draining\n"
    row = fleet.runner_row("r1")
    assert (row["group_draining"], row["state"], row["admin_state"]) == (True, "draining", "active")
    api = fleet.api()
    drained_at = time.time()
    flight = api.open_flight({"command": ["echo later"]})  # wakes the parked claim of r1
    wait_until(lambda: _checked_in_since(fleet, "r1", drained_at), what="two more check-ins")
    shown = api.flight(flight["id"])
    assert shown["stage"] == "ready"
    assert shown["waiting"] == "waiting: every runner is in a draining group (edge)"
    assert _gg(fleet, "group", "resume", "edge") == "group edge is not draining\n"
    wait_until(lambda: _stage(api, flight["id"], "landed"), what="the flight to land")
    changes = _events(fleet, "info:runner:group_drain_changed")
    assert [(e["actor"], e["body"]["group"], e["body"]["draining"]) for e in changes] == [
        ("owner", "edge", True), ("owner", "edge", False)]


def test_demand_counts_a_waiting_flight_toward_every_group_that_could_take_it(fleet, tmp_path):
    _gg(fleet, "attribute", "set", "site")
    _gg(fleet, "group", "set", "dc1", "--attr", "site=dc1")
    _gg(fleet, "group", "set", "lab", "--exclusive")
    api = fleet.api()
    api.open_flight({"command": ["true"]})  # default and dc1 (lab is exclusive)
    api.open_flight({"command": ["true"], "group": "dc1"})  # dc1 only
    api.open_flight({"command": ["true"], "where": {"site": "dc1"}})  # dc1 only
    api.open_flight({"command": ["true"], "group": "lab"})  # lab only
    assert json.loads(_gg(fleet, "group", "demand", "dc1", "--json")) == {
        "group": "dc1", "queued": 3, "running": 0}
    assert api.request("GET", "/v1/groups/default/demand") == {
        "group": "default", "queued": 1, "running": 0}
    assert api.request("GET", "/v1/groups/lab/demand")["queued"] == 1
    release = tmp_path / "release"
    fleet.runner("l1")
    fleet.wait_online("l1")
    _gg(fleet, "runner", "group", "l1", "lab")
    wait_until(lambda: api.request("GET", "/v1/groups/lab/demand") == {
        "group": "lab", "queued": 0, "running": 0} or None, what="lab's flight to land")
    held = api.open_flight({"command": [f"while [ ! -e {release} ]; do sleep 0.1; done"],
                            "group": "lab"})
    wait_until(lambda: _stage(api, held["id"], "flying"), what="the lab flight to fly")
    assert _gg(fleet, "group", "demand", "lab") == "group lab: 0 queued, 1 running\n"
    release.touch()
    wait_until(lambda: _stage(api, held["id"], "landed"), what="it to land")


def test_group_delete_is_refused_naming_each_runner_and_token_until_they_are_gone(fleet, tmp_path):
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml())
    token = mint(fleet, "ui", "--group", "dc9")  # the group row is made
    groups = {g["name"]: g for g in json.loads(_gg(fleet, "groups", "--json"))}
    assert set(groups) == {"default", "dc9"}
    machine = fleet.runner("m1", extra=["--enrol", token])
    wait_until(lambda: (fleet.runner_row("m1") or {}).get("group") == "dc9",
               what="the enrolled machine in group dc9")
    second = mint(fleet, "ui", "--group", "dc9")
    code, _, err = cli(fleet, "group", "delete", "dc9")
    assert code != 0
    assert err.strip() == (
        "group dc9 cannot be deleted: 1 runner is in group dc9 (m1): move each (gg runner group "
        "RUNNER default) or retire it (gg runner retire RUNNER); 1 enrolment token that can "
        "still be redeemed names group dc9: revoke it (gg fleet tokens; gg fleet revoke "
        "FINGERPRINT) or let them expire")
    tokens = json.loads(_gg(fleet, "fleet", "tokens", "--json"))
    for t in tokens:
        if t["status"] == "active":
            _gg(fleet, "fleet", "revoke", t["fingerprint"])
    assert second  # minted and revoked: not redeemable any more
    _gg(fleet, "runner", "group", "m1", "default")
    assert _gg(fleet, "group", "delete", "dc9") == "group dc9 deleted\n"
    assert [e["body"]["group"] for e in _events(fleet, "info:group:deleted")] == ["dc9"]
    code, _, err = cli(fleet, "group", "delete", "default")
    assert code != 0 and "cannot be deleted" in err
    machine.stop()


def test_quiesce_stops_every_new_offer_running_work_continues_and_drained_is_recorded(
        fleet, tmp_path):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    release = tmp_path / "release"
    busy = api.open_flight({"command": [f"while [ ! -e {release} ]; do sleep 0.1; done"]})
    wait_until(lambda: _stage(api, busy["id"], "flying"), what="the first flight to fly")
    out = _gg(fleet, "fleet", "quiesce")
    assert out == ("the fleet is quiesced (by owner): nothing new starts; 1 flight still "
                   "running\n")
    second = api.open_flight({"command": ["echo after"]})
    shown = api.flight(second["id"])
    assert shown["waiting"] == ("waiting: the fleet is quiesced (by owner); nothing new starts "
                                "anywhere until it is resumed")
    assert shown["remedy"] == "an admin resumes it: gg fleet resume"
    assert _events(fleet, "warn:fleet:drained") == []
    release.touch()
    wait_until(lambda: _stage(api, busy["id"], "landed"), what="running work to continue")
    wait_until(lambda: _events(fleet, "warn:fleet:drained"), what="the drained warning")
    quiet_at = time.time()
    wait_until(lambda: _checked_in_since(fleet, "r1", quiet_at), what="two more check-ins")
    assert api.flight(second["id"])["stage"] == "ready"
    assert _gg(fleet, "fleet", "resume") == "the fleet is not quiesced: offers go out again\n"
    wait_until(lambda: _stage(api, second["id"], "landed"), what="the held flight to land")
    assert len(_events(fleet, "warn:fleet:drained")) == 1  # once per quiesce
    quiesced = _events(fleet, "info:fleet:quiesced")
    assert [e["actor"] for e in quiesced] == ["owner"]
    assert [e["actor"] for e in _events(fleet, "info:fleet:resumed")] == ["owner"]
