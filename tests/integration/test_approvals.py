"""The action queue end to end: a real ``gg server``, a real runner, the real CLI signed in as
different people. Who may approve, reject and force; the flight lands only once approved."""

from __future__ import annotations

import html
import json

import httpx

from gg.client import ApiError

from console_support import form_token
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


# -- what is approved is what runs (docs/approvals.md, "One exact spec") -----------------------


def _service(fleet, ran, word: str, *args: str, token: str | None = None) -> str:
    """Open a service with ``--approval`` that writes ``word`` to ``ran`` and keeps running."""
    return _fly(fleet, "--service", *args, "--", _says(ran, word), token=token)


def _says(ran, word: str) -> str:
    return f"echo {word} >> {ran}; exec sleep 1000"


def _ran(ran) -> list[str]:
    return ran.read_text().split() if ran.exists() else []


def _renewed_twice(fleet, flight_id: str) -> None:
    """Two lease renewals after now: the runner has heard the spec the server gives it."""
    for _ in range(2):
        seen = fleet.api().flight(flight_id)["lease_expires_at"]
        wait_until(lambda: fleet.api().flight(flight_id)["lease_expires_at"] != seen,
                   what="a lease renewal")


def _console(fleet, token: str):
    """An HTTP client signed in to the real server's web console as a browser is."""
    web = httpx.Client(base_url=fleet.url, timeout=30)
    page = web.get("/ui/login")
    signed = web.post("/ui/login", data={"token": token, "form_token": form_token(page.text)},
                      headers={"origin": fleet.url})
    assert signed.status_code == 303, signed.text
    return web


def test_a_service_changed_while_it_waits_runs_only_as_changed_and_only_once_approved(
        fleet, tmp_path):
    ada = _person(fleet, "ada", admin=True)  # a second admin: the approver
    ran = tmp_path / "ran"
    fleet.runner("r1")
    fleet.wait_online("r1")
    flight = _service(fleet, ran, "harmless", "--approval")
    looked = fleet.api(ada).flight(flight)["approval"]["waiting"]["digest"]  # ada looks

    done = fleet.gg("service", "update", flight, "--", _says(ran, "pwned"))  # the opener
    assert done.returncode == 0, done.stderr
    assert "waits for an approval by someone else" in done.stdout

    shown = fleet.gg("show", flight, token=ada, check=True).stdout
    now = json.loads(fleet.gg("show", flight, "--json", token=ada, check=True).stdout)
    digest = now["approval"]["waiting"]["digest"]
    assert digest != looked and now["approval"]["digest"] == digest
    assert now["command"] == [_says(ran, "pwned")]
    change = (f"command: `'{_says(ran, 'harmless')}'` -> `'{_says(ran, 'pwned')}'`")
    assert f"approving runs {digest}: '{_says(ran, 'pwned')}'" in shown
    assert f"changed   by owner: {change}" in shown
    listed = fleet.gg("flights", "--pending", token=ada, check=True).stdout
    assert f"{flight}: approving runs {digest}: '{_says(ran, 'pwned')}'" in listed
    assert f"changed by owner: {change}" in listed
    web = _console(fleet, ada)
    page = html.unescape(web.get("/ui/pending?part=1").text)
    assert digest in page and _says(ran, "pwned") in page and f"changed by owner: {change}" in page
    assert f'name="digest" value="{digest}"' in page

    # an approval given for what ada saw first is refused, by every way of giving it
    refused = f"flight {flight} changed since you looked: approving it now runs " \
              f"{digest[:19]}, not {looked[:19]}; look again with gg show {flight}"
    _refused(fleet.gg("approve", flight, "--digest", looked, token=ada), refused)
    token = form_token(web.get("/ui/pending").text)
    stale = web.post(f"/ui/flights/{flight}/approve", headers={"origin": fleet.url},
                     data={"form_token": token, "back": "/ui/pending", "digest": looked})
    assert stale.status_code == 409 and refused in html.unescape(stale.text)
    assert _stage(fleet, flight) == "gated" and _ran(ran) == []

    done = fleet.gg("approve", flight, "--digest", digest, token=ada)
    assert done.returncode == 0, done.stderr
    assert f"approved {digest}: '{_says(ran, 'pwned')}'" in done.stdout
    wait_until(lambda: _ran(ran) == ["pwned"], what="the changed, approved command ran")
    assert [e["body"]["digest"] for e in _events(fleet, "info:flight:approved", flight)] == [digest]


def test_a_change_after_approval_waits_for_a_new_one_while_the_approved_spec_keeps_running(
        fleet, tmp_path):
    ada = _person(fleet, "ada", admin=True)
    carl = _person(fleet, "carl", admin=True)
    ran = tmp_path / "ran"
    fleet.runner("r1")
    fleet.wait_online("r1")
    flight = _service(fleet, ran, "approved", "--approval")
    first = fleet.api(ada).approve(flight)["approval"]["approved"]["digest"]
    wait_until(lambda: _ran(ran) == ["approved"], what="the approved service running")

    done = fleet.gg("service", "update", flight, "--", _says(ran, "changed"))
    assert done.returncode == 0 and "waits for an approval" in done.stdout, done.stderr
    shown = fleet.api(ada).flight(flight)
    waiting = shown["approval"]["waiting"]
    assert (shown["stage"], shown["approval"]["digest"], shown["command"]) == (
        "flying", first, [_says(ran, "approved")])  # it runs what was approved
    assert waiting["change"] and waiting["command"] == [_says(ran, "changed")]
    assert [p["id"] for p in fleet.api(ada).pending()] == [flight]
    _refused(fleet.gg("approve", flight),  # the opener, an admin
             f"you opened flight {flight}, so someone else must approve it (separation of duties)")
    _renewed_twice(fleet, flight)
    assert _ran(ran) == ["approved"]  # the runner heard no new spec
    assert fleet.api().services()[0]["wanted_generation"] == 1

    # ada changes it too (on top of the owner's change): now ada may not approve it either
    assert fleet.gg("service", "update", flight, "--set", "K=v", token=ada).returncode == 0
    assert _api_refusal(fleet, ada, "approve", flight) == (
        403, f"you changed flight {flight}, so someone else must approve the change "
             "(separation of duties)")
    waiting = fleet.api(carl).flight(flight)["approval"]["waiting"]
    assert waiting["changes"] == [
        f"command: `'{_says(ran, 'approved')}'` -> `'{_says(ran, 'changed')}'`",
        "env K: set to 'v'"]
    done = fleet.gg("approve", flight, token=carl)
    assert done.returncode == 0, done.stderr
    assert f"approved {waiting['digest']}: '{_says(ran, 'changed')}'" in done.stdout
    wait_until(lambda: _ran(ran) == ["approved", "changed"], what="the approved change ran")
    row = wait_until(lambda: (r := fleet.api().services()[0])["generation"] == 3 and r,
                     what="generation 3 serving")
    assert row["wanted_generation"] == 3
    assert fleet.api().pending() == []


def test_an_environment_requiring_approval_holds_back_changes_to_its_services(fleet, tmp_path):
    bob = _person(fleet, "bob")
    fleet.runner("r1", labels="environment=prod")
    fleet.runner("r2", labels="environment=ui")
    fleet.wait_online("r1", "r2")
    fleet.chart("prod")
    fleet.chart("ui")
    fleet.api().request("PUT", "/v1/airspace/root",
                        json={"environments": ["prod", "ui"], "approvals": ["prod"]})
    in_prod, in_ui = tmp_path / "prod", tmp_path / "ui"
    prod = _service(fleet, in_prod, "one", "--env", "prod", token=bob)
    ui = _service(fleet, in_ui, "one", "--env", "ui", token=bob)  # ui needs none yet
    assert _stage(fleet, prod) == "gated"
    fleet.api().approve(prod)
    wait_until(lambda: _ran(in_prod) == ["one"] and _ran(in_ui) == ["one"],
               what="both services running")
    fleet.gg("environment", "approval", "ui", "required", check=True)

    for flight, ran in ((prod, in_prod), (ui, in_ui)):
        done = fleet.gg("service", "update", flight, "--", _says(ran, "two"), token=bob)
        assert done.returncode == 0 and "waits for an approval" in done.stdout, done.stderr
        assert fleet.api().flight(flight)["approval"]["waiting"]["command"] == [_says(ran, "two")]
    assert sorted(p["id"] for p in fleet.api().pending()) == sorted([prod, ui])
    _renewed_twice(fleet, prod)
    _renewed_twice(fleet, ui)
    assert _ran(in_prod) == ["one"] and _ran(in_ui) == ["one"]
    fleet.api().approve(prod)
    fleet.api().approve(ui)
    wait_until(lambda: _ran(in_prod) == ["one", "two"] and _ran(in_ui) == ["one", "two"],
               what="both approved changes ran")
