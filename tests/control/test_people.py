"""People as use cases: expiry by the control plane's clock, removal as a tombstone, rotation,
and runners that outlive the person who registered them."""

from __future__ import annotations

import pytest

from gg.control import flights, leases, ownership, people, runners
from gg.domain.flight_spec import FlightSpec
from gg.errors import Conflict, Forbidden, Unauthorized

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores

DAY = 86400.0


def _add(core, owner, name, **kw):
    person, token = people.add_person(core, owner, name, admin=kw.pop("admin", False), **kw)
    return person, token


def test_a_persons_token_expires_after_ninety_days_by_default(core, owner, clock):
    _, token = _add(core, owner, "ada")
    clock.advance(90 * DAY - 1)
    assert people.authenticate_person(core, token).name == "ada"
    clock.advance(1)
    with pytest.raises(Unauthorized) as refused:
        people.authenticate_person(core, token)
    assert refused.value.message == "the token was not accepted"


def test_the_default_lifetime_is_a_setting(core, owner, clock):
    from dataclasses import replace

    core.settings = replace(core.settings, person_token_ttl=3600.0)
    person, token = _add(core, owner, "ada")
    assert person.token_expires_at == clock.now + 3600.0
    clock.advance(3600)
    with pytest.raises(Unauthorized):
        people.authenticate_person(core, token)


def test_ttl_never_and_the_owners_first_token_do_not_expire(core, owner, clock, tmp_path):
    _, forever = _add(core, owner, "ci", ttl="never")
    _, short = _add(core, owner, "tmp", ttl=60.0)
    owner_token = (tmp_path / "owner-token").read_text().strip()
    clock.advance(20 * 365 * DAY)
    assert people.authenticate_person(core, forever).name == "ci"
    assert people.authenticate_person(core, owner_token).name == "owner"
    with pytest.raises(Unauthorized):
        people.authenticate_person(core, short)


def test_a_removed_persons_token_stops_at_once_and_history_keeps_the_name(core, owner):
    ada, token = _add(core, owner, "ada")
    flight = flights.open_flight(core, people.authenticate_person(core, token), FlightSpec(command=["true"]))
    removed = people.remove_person(core, owner, "ada")
    assert removed["removed_by"] == "owner" and removed["removed_at"] is not None
    with pytest.raises(Unauthorized):
        people.authenticate_person(core, token)
    assert flights.show_flight(core, flight.id)["opened_by_name"] == "ada"
    assert [p["name"] for p in people.list_people(core, owner)] == ["owner"]
    assert [p["name"] for p in people.list_people(core, owner, removed=True)] == ["owner", "ada"]
    kinds = [e["kind"] for e in core.store.events(kind="info:person:")]
    assert kinds == ["info:person:added", "info:person:removed"]
    with pytest.raises(Conflict, match="names are not reused"):
        _add(core, owner, "ada")
    with pytest.raises(Conflict, match="ada was removed already"):
        people.remove_person(core, owner, "ada")


def test_the_owner_and_oneself_cannot_be_removed(core, owner):
    ada, token = _add(core, owner, "ada", admin=True)
    ada = people.authenticate_person(core, token)
    with pytest.raises(Forbidden, match="the owner cannot be removed"):
        people.remove_person(core, ada, "owner")
    with pytest.raises(Forbidden, match="you cannot remove yourself"):
        people.remove_person(core, ada, "ada")
    assert people.authenticate_person(core, token).name == "ada"


def test_rotation_kills_the_old_token_and_the_holder_may_rotate_their_own(core, owner, clock):
    _, old = _add(core, owner, "ada")
    ada = people.authenticate_person(core, old)
    rotated, new = people.rotate_token(core, ada, "ada", ttl=3600.0)
    with pytest.raises(Unauthorized):
        people.authenticate_person(core, old)
    assert people.authenticate_person(core, new).name == "ada"
    assert rotated.token_expires_at == clock.now + 3600.0
    with pytest.raises(Forbidden, match="never expires"):
        people.rotate_token(core, people.authenticate_person(core, new), "ada", ttl="never")
    with pytest.raises(Forbidden):
        people.rotate_token(core, people.authenticate_person(core, new), "owner")
    event = core.store.events(kind="info:person:token_rotated")[-1]
    assert event["actor"] == "ada" and event["body"]["token_fingerprint"] == rotated.token_fingerprint


def test_the_owners_rotated_token_does_not_expire_by_default(core, owner, clock):
    rotated, token = people.rotate_token(core, owner, "owner")
    assert rotated.token_expires_at is None
    clock.advance(10 * 365 * DAY)
    assert people.authenticate_person(core, token).is_owner is True


def test_a_runner_registered_by_a_removed_person_keeps_checking_in_and_flying(core, owner):
    ada, token = _add(core, owner, "ada", admin=True)
    ada = people.authenticate_person(core, token)
    runner = make_runner(core, ada, "adas")
    people.remove_person(core, owner, "ada")
    runner = core.store.runner(runner.id)
    assert runner.registered_by == ada.id
    runners.check_in(core, runner, readings={}, inventory=None, capabilities=None, version=None,
                     held=[], peer_address=None)
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    granted = leases.try_claim(core, runner.id)
    assert granted is not None and granted[0].id == flight.id


def test_removal_unclaims_the_runners_the_person_claimed(core, owner):
    _, token = _add(core, owner, "ada")
    ada = people.authenticate_person(core, token)
    runner = make_runner(core, owner, "shared")
    ownership.set_ownership(core, owner, "shared", "open")
    ownership.change(core, ada, "shared", "claim")
    ownership.change(core, ada, "shared", "reserve")
    people.remove_person(core, owner, "ada")
    after = core.store.runner(runner.id)
    assert (after.ownership, after.owner, after.reserved) == ("open", None, False)
    event = core.store.events(runner_id=runner.id, kind="info:runner:unclaimed")[-1]
    assert event["actor"] == "owner" and event["body"]["reason"] == "its owner was removed"
