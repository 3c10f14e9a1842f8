"""The pure rules of people: when a token works, when a new one expires, who may remove or
rotate whom."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.domain import people
from gg.domain.people import Person
from gg.errors import BadRequest, Conflict, Forbidden, NotFound

OWNER = Person(id="p_o", name="owner", role="admin", is_owner=True)
ADMIN = Person(id="p_a", name="ada", role="admin")
MEMBER = Person(id="p_m", name="bob", role="member")
DAY = 86400.0


def test_a_token_works_until_its_expiry_and_never_after_removal():
    assert people.token_works(MEMBER, 1e12)
    assert people.token_works(replace(MEMBER, token_expires_at=100.0), 99.9)
    assert not people.token_works(replace(MEMBER, token_expires_at=100.0), 100.0)
    assert not people.token_works(replace(MEMBER, removed_at=5.0), 6.0)


def test_a_new_token_expires_after_the_default_unless_it_is_the_owners():
    assert people.token_expiry(ADMIN, None, None, 90 * DAY, 1000.0) == 1000.0 + 90 * DAY
    assert people.token_expiry(ADMIN, MEMBER, None, 90 * DAY, 1000.0) == 1000.0 + 90 * DAY
    assert people.token_expiry(OWNER, OWNER, None, 90 * DAY, 1000.0) is None
    assert people.token_expiry(OWNER, OWNER, 3600.0, 90 * DAY, 1000.0) == 4600.0


def test_only_an_admin_mints_a_token_that_never_expires():
    assert people.token_expiry(ADMIN, MEMBER, "never", 90 * DAY, 0.0) is None
    with pytest.raises(Forbidden, match="only an admin may mint a token that never expires"):
        people.token_expiry(MEMBER, MEMBER, "never", 90 * DAY, 0.0)


@pytest.mark.parametrize("ttl", [0, -1.0, 3651 * DAY, "forever", True])
def test_a_ttl_out_of_bounds_is_refused(ttl):
    with pytest.raises(BadRequest, match="--ttl must be a duration above 0"):
        people.token_expiry(ADMIN, None, ttl, 90 * DAY, 0.0)


def test_who_may_remove_whom():
    people.check_remove(ADMIN, MEMBER, "bob")
    people.check_remove(OWNER, ADMIN, "ada")
    cases = [
        (MEMBER, ADMIN, "ada", Forbidden, "only an admin may remove a person"),
        (ADMIN, None, "zed", NotFound, "there is no person named zed"),
        (ADMIN, replace(MEMBER, removed_at=1.0), "bob", Conflict, "bob was removed already"),
        (ADMIN, OWNER, "owner", Forbidden, "the owner cannot be removed"),
        (OWNER, OWNER, "owner", Forbidden, "the owner cannot be removed"),
        (ADMIN, ADMIN, "ada", Forbidden, "you cannot remove yourself; ask another admin to do it"),
    ]
    for actor, target, name, error, sentence in cases:
        with pytest.raises(error) as caught:
            people.check_remove(actor, target, name)
        assert caught.value.message == sentence


def test_a_token_is_rotated_by_an_admin_or_its_holder():
    people.check_rotate(ADMIN, MEMBER, "bob")
    people.check_rotate(MEMBER, MEMBER, "bob")
    with pytest.raises(Forbidden):
        people.check_rotate(MEMBER, ADMIN, "ada")
    with pytest.raises(NotFound):
        people.check_rotate(ADMIN, replace(MEMBER, removed_at=1.0), "bob")
    with pytest.raises(NotFound):
        people.check_rotate(ADMIN, None, "zed")
