"""Names are unique among live runners: registration and enrolment refuse a name a live
runner holds (409, naming it and the way out), and an offline, forgotten or retired holder
does not block."""

from __future__ import annotations

import pytest

from gg.control import admin, enrolment, profiles, runners
from gg.errors import Conflict, Unauthorized

from fleet_support import UI
from support import check_in, new_key, proof


def register(core, person, name, key=None):
    runner, _ = runners.register(core, person, name=name, **proof(core, "register", key),
                                 labels={}, workers=1, inventory={}, version=None)
    return runner


def test_a_second_machine_is_refused_a_live_runners_name(core, owner):
    web = register(core, owner, "web")
    check_in(core, web)
    with pytest.raises(Conflict) as refused:
        register(core, owner, "web")
    assert refused.value.code == "runner_name_taken"
    assert str(refused.value) == (
        f"the runner name web is taken by live runner {web.id}: pick another --name, or free "
        f"it with gg runner forget {web.id} once that runner is offline")
    assert [r.id for r in core.store.runners_named("web")] == [web.id]


def test_a_runner_registered_a_moment_ago_holds_its_name_before_it_checks_in(core, owner):
    register(core, owner, "web")
    with pytest.raises(Conflict):
        register(core, owner, "web")


def test_re_registering_its_own_key_under_its_own_name_is_no_collision(core, owner):
    key = new_key()
    web = register(core, owner, "web", key)
    check_in(core, web)
    assert register(core, owner, "web", key).id == web.id


def test_an_offline_forgotten_or_retired_holder_does_not_block(core, owner, clock):
    old = register(core, owner, "web")
    check_in(core, old)
    clock.advance(core.settings.offline_after + 1)
    offline_taker = register(core, owner, "web")  # the holder is offline: the name is free
    check_in(core, offline_taker)
    admin.retire(core, owner, offline_taker.id)
    assert register(core, owner, "web").id not in (old.id, offline_taker.id)
    admin.forget(core, owner, old.id)


def test_enrolment_is_refused_a_live_runners_name_and_spends_no_use(core, owner):
    profiles.apply_profile(core, owner, "ui", UI)
    web = register(core, owner, "web")
    check_in(core, web)
    row, token = enrolment.mint_token(core, owner, profile="ui", uses=1)
    with pytest.raises(Conflict):
        enrolment.enrol(core, token, name="web", **proof(core, "enrol"), workers=1,
                        inventory={}, version=None)
    assert core.store.enrol_token(row.fingerprint).uses_left == 1
    enrolment.enrol(core, token, name="web-2", **proof(core, "enrol"), workers=1, inventory={},
                    version=None)
    with pytest.raises(Unauthorized):
        enrolment.enrol(core, token, name="web-3", **proof(core, "enrol"), workers=1,
                        inventory={}, version=None)


def test_a_member_is_refused_the_name_of_an_offline_runner_that_is_not_retired(core, owner,
                                                                             clock):
    from gg.control import people

    ada = people.add_person(core, owner, "ada", admin=False)[0]
    web = register(core, owner, "web")
    check_in(core, web)
    clock.advance(core.settings.offline_after + 1)
    with pytest.raises(Conflict) as refused:
        register(core, ada, "web")
    assert refused.value.code == "runner_name_taken"
    assert "offline but not retired" in str(refused.value)
    admin.retire(core, owner, web.id)
    assert register(core, ada, "web").id != web.id  # retired: the name is free


def test_a_member_may_take_the_name_of_its_own_offline_runner(core, owner, clock):
    from gg.control import people

    ada = people.add_person(core, owner, "ada", admin=False)[0]
    old = register(core, ada, "adas")
    check_in(core, old)
    clock.advance(core.settings.offline_after + 1)
    assert register(core, ada, "adas").id != old.id
