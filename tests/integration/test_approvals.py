"""The action queue end to end: a real ``gg server``, a real runner, the real CLI signed in as
different people. Who may approve, reject and force; the flight lands only once approved."""

from __future__ import annotations

import json

from gg.client import ApiError
from support import wait_until


def _person(fleet, name: str, admin: bool = False) -> str:
    return fleet.api().add_person(name, admin)["token"]


def _api_refusal(fleet, token: str | None, call: str, *args) -> tuple:
    """The same refusal over the API (fewer CLI processes on a loaded machine)."""
    try:
        getattr(fleet.api(token), call)(*args)
    except ApiError as exc:
        return exc.status, exc.message
    return None


def _fly(fleet, *args: str, token: str | None = None) -> str:
    done = fleet.gg("fly", *args, token=token)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _refused(done, sentence: str) -> None:
    assert done.returncode != 0, done.stdout
    assert done.stderr == sentence + "\n", done.stderr


def _stage(fleet, flight_id: str) -> str:
    return fleet.api().flight(flight_id)["stage"]


def _events(fleet, kind: str, flight_id: str) -> list[dict]:
    return fleet.api().events(kind=kind, flight=flight_id)


def test_approve_who_may_and_the_opener_admin_never(fleet):
    ada = _person(fleet, "ada", admin=True)
    bob = _person(fleet, "bob")
    fleet.runner("r1")
    fleet.wait_online("r1")

    flight = _fly(fleet, "--approval", "--", "echo approved-run")  # opened by the owner, an admin
    assert _stage(fleet, flight) == "gated"
    shown = fleet.gg("show", flight, check=True).stdout
    assert f"waiting: needs approval by an admin: gg approve {flight}" in shown
    _refused(fleet.gg("approve", flight),
             f"you opened flight {flight}, so someone else must approve it (separation of duties)")
    assert _api_refusal(fleet, None, "force", flight) == (
        403, f"you opened flight {flight}, so someone else must approve it (separation of duties)")
    assert _api_refusal(fleet, bob, "approve", flight) == (
        403, f"only an admin may approve flight {flight}")
    pending = json.loads(fleet.gg("flights", "--pending", "--json", token=ada, check=True).stdout)
    assert [(p["id"], p["pending"][0]["you_may_clear"]) for p in pending] == [(flight, True)]
    assert _stage(fleet, flight) == "gated"  # nothing ran while it waited

    done = fleet.gg("approve", flight, token=ada)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: _stage(fleet, flight) == "landed", what="the approved flight landed")
    assert [e["actor"] for e in _events(fleet, "info:flight:approved", flight)] == ["ada"]
    assert fleet.api().pending() == []


def test_the_named_approver_a_member_approves_and_rejects(fleet):
    bob = _person(fleet, "bob")
    carl = _person(fleet, "carl")
    fleet.runner("r1")
    fleet.wait_online("r1")

    first = _fly(fleet, "--approver", "carl", "--", "true", token=bob)
    assert _api_refusal(fleet, bob, "approve", first) == (
        403, f"you opened flight {first}, so someone else must approve it (separation of duties)")
    assert fleet.gg("approve", first, token=carl).returncode == 0
    wait_until(lambda: _stage(fleet, first) == "landed", what="carl's approval let it land")

    second = _fly(fleet, "--approver", "carl", "--", "true", token=bob)
    _refused(fleet.gg("reject", second, token=bob),
             f"only an admin or carl may reject flight {second}; its opener may cancel it: "
             f"gg cancel {second}")
    done = fleet.gg("reject", second, "--reason", "not on a friday", token=carl)
    assert done.returncode == 0, done.stderr
    shown = fleet.api().flight(second)
    assert (shown["stage"], shown["ended_reason"]) == ("cancelled",
                                                       "rejected by carl: not on a friday")
    assert [(e["actor"], e["body"]["reason"])
            for e in _events(fleet, "info:flight:rejected", second)] == [("carl", "not on a friday")]
    assert _api_refusal(fleet, bob, "open_flight", {"command": ["true"], "approver": "bob"}) == (
        400, "--approver: you cannot approve a flight you open (separation of duties); "
             "name someone else")


def test_force_clears_every_gate_a_person_may_clear_and_records_who(fleet):
    bob = _person(fleet, "bob")
    fleet.runner("r1")
    fleet.wait_online("r1")
    flight = _fly(fleet, "--approval", "--", "true", token=bob)
    _refused(fleet.gg("force", flight, token=bob), "only an admin may do that")
    done = fleet.gg("force", flight, "--json")
    assert done.returncode == 0, done.stderr
    forced = json.loads(done.stdout)
    assert len(forced["cleared"]) == 1
    wait_until(lambda: _stage(fleet, flight) == "landed", what="the forced flight landed")
    assert [(e["actor"], e["body"]["gates"])
            for e in _events(fleet, "info:flight:forced", flight)] == [("owner", forced["cleared"])]


def test_an_environment_and_the_root_envelope_require_approvals(fleet):
    bob = _person(fleet, "bob")
    fleet.runner("r1", labels="environment=prod")
    fleet.runner("r2", labels="environment=ui")
    fleet.wait_online("r1", "r2")
    fleet.chart("prod")
    fleet.chart("ui")
    assert _api_refusal(fleet, bob, "set_environment_approval", "prod", True) == (
        403, "only an admin may do that")
    assert fleet.gg("environment", "approval", "prod", "required", check=True).returncode == 0
    envs = {e["name"]: e for e in fleet.api().environments()}
    assert (envs["prod"]["approval"], envs["ui"]["approval"]) == ("required", "none")
    shown = fleet.gg("environment", "show", "prod", check=True).stdout  # what the docs say
    assert "  approval   required" in shown.splitlines()
    listed = fleet.gg("environments", check=True).stdout
    assert "APPROVAL" in listed and "required" in listed
    in_prod = _fly(fleet, "--env", "prod", "--", "true", token=bob)
    in_ui = _fly(fleet, "--env", "ui", "--", "true", token=bob)
    assert _stage(fleet, in_prod) == "gated"
    wait_until(lambda: _stage(fleet, in_ui) == "landed", what="ui needs no approval yet")

    fleet.api().request("PUT", "/v1/airspace/root",
                        json={"environments": ["prod", "ui"], "approvals": ["ui"]})
    gated = _fly(fleet, "--env", "ui", "--", "true", token=bob)
    assert _stage(fleet, gated) == "gated"
    fleet.api().approve(gated)  # the owner: an admin who opened neither
    fleet.api().approve(in_prod)
    wait_until(lambda: {_stage(fleet, gated), _stage(fleet, in_prod)} == {"landed"},
               what="both approved flights landed")
