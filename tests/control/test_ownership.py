"""Whose a machine is: claim, unclaim, reserve, release, ownership (SPEC 11)."""

from __future__ import annotations

import pytest

from gg.control import flights, leases, ownership
from gg.domain.flight_spec import FlightSpec
from gg.errors import Conflict, Forbidden

from placement_support import runner


def test_an_organisation_runner_cannot_be_claimed(core, owner, ada):
    runner(core, owner, "org")
    with pytest.raises(Forbidden) as err:
        ownership.change(core, ada, "org", "claim")
    assert err.value.message == ("runner org belongs to the organisation, so nobody may claim "
                                 "it (an admin can open it: gg runner ownership org open)")


def test_only_an_admin_changes_ownership(core, owner, ada):
    runner(core, owner, "r1")
    with pytest.raises(Forbidden):
        ownership.set_ownership(core, ada, "r1", "open")
    assert ownership.set_ownership(core, owner, "r1", "open")["ownership"] == "open"


def test_an_open_runner_is_claimed_by_one_person(core, owner, ada, bob):
    r = runner(core, owner, "r1")
    ownership.set_ownership(core, owner, "r1", "open")
    view = ownership.change(core, ada, "r1", "claim")
    assert (view["ownership"], view["owner"], view["owner_name"]) == ("claimed", ada.id, "ada")
    with pytest.raises(Conflict) as err:
        ownership.change(core, bob, "r1", "claim")
    assert err.value.message == "runner r1 is claimed by ada already"
    assert ownership.change(core, ada, "r1", "claim")["changed"] is False
    kinds = [e["kind"] for e in core.store.events(runner_id=r.id, kind="info:runner")]
    assert kinds[-2:] == ["info:runner:ownership_changed", "info:runner:claimed"]


def test_only_the_owner_or_an_admin_reserves_releases_or_unclaims(core, owner, ada, bob):
    runner(core, owner, "r1")
    ownership.set_ownership(core, owner, "r1", "open")
    ownership.change(core, ada, "r1", "claim")
    for action in ("reserve", "release", "unclaim"):
        with pytest.raises(Forbidden) as err:
            ownership.change(core, bob, "r1", action)
        assert err.value.message == f"only runner r1's owner (ada) or an admin may {action} it"
    assert ownership.change(core, ada, "r1", "reserve")["reserved"] is True
    assert ownership.change(core, owner, "r1", "release")["reserved"] is False
    view = ownership.change(core, ada, "r1", "unclaim")
    assert (view["ownership"], view["owner"], view["reserved"]) == ("open", None, False)
    with pytest.raises(Conflict):
        ownership.change(core, ada, "r1", "reserve")


def test_a_reserved_runner_takes_only_its_owners_flights(core, owner, ada, bob):
    r = runner(core, owner, "adas")
    ownership.set_ownership(core, owner, "adas", "open")
    ownership.change(core, ada, "adas", "claim")
    ownership.change(core, ada, "adas", "reserve")
    bobs = flights.open_flight(core, bob, FlightSpec(command=["true"]))
    adas = flights.open_flight(core, ada, FlightSpec(command=["true"]))
    got = leases.try_claim(core, r.id)
    assert got[0].id == adas.id  # bob's older flight is passed over
    assert core.store.flight(bobs.id).stage == "ready"


def test_setting_ownership_ends_a_claim_and_a_reservation(core, owner, ada):
    runner(core, owner, "r1")
    ownership.set_ownership(core, owner, "r1", "open")
    ownership.change(core, ada, "r1", "claim")
    ownership.change(core, ada, "r1", "reserve")
    view = ownership.set_ownership(core, owner, "r1", "organisation")
    assert (view["ownership"], view["owner"], view["reserved"]) == ("organisation", None, False)
