"""Proving the key on the control plane, with a fake clock: nonces expire, are spent once,
cost nothing until spent, and who may supersede which runner."""

from __future__ import annotations

import pytest

from gg import keys
from gg.control import enrolment, key_proof, people, profiles, runners
from gg.errors import Unauthorized
from gg.settings import Settings

from fleet_support import UI
from support import new_key, proof

STORES = ("sqlite", "postgresql")  # storage semantics: a nonce is spent once in the store


@pytest.fixture
def settings():
    return Settings()


def register(core, person, key, name="r1"):
    return runners.register(core, person, name=name, **proof(core, "register", key), labels={},
                            workers=1, inventory={}, version=None)


def refused(call) -> None:
    """``call`` is refused with exactly the answer a bad person token gets."""
    with pytest.raises(Unauthorized) as caught:
        call()
    assert (caught.value.status, caught.value.code, caught.value.message) == \
        (401, "unauthorized", Unauthorized().message)


def test_an_expired_nonce_is_refused_and_a_fresh_one_works(core, owner, clock):
    key = new_key()
    signed = proof(core, "register", key)
    clock.advance(core.settings.key_nonce_ttl + 1)
    refused(lambda: runners.register(core, owner, name="r1", **signed, labels={}, workers=1,
                                     inventory={}, version=None))
    assert core.store.runner_by_key(signed["public_key"]) is None
    runner, _ = register(core, owner, key)
    assert runner.public_key == keys.public_text(key)


def test_a_nonce_is_spent_even_by_a_refused_attempt(core, owner):
    key = new_key()
    signed = proof(core, "register", key)
    refused(lambda: runners.register(core, owner, name="r1", **{**signed, "signature": "AAAA"},
                                     labels={}, workers=1, inventory={}, version=None))
    refused(lambda: runners.register(core, owner, name="r1", **signed, labels={}, workers=1,
                                     inventory={}, version=None))


def test_asking_for_nonces_stores_nothing_and_a_nonce_proves_only_its_purpose_and_key(core, owner):
    key = new_key()
    public = keys.public_text(key)
    for _ in range(50):  # a flood of asks: no row anywhere
        key_proof.issue(core, "register", public)
    assert core.store.db.one("SELECT COUNT(*) AS n FROM key_nonces")["n"] == 0
    signed = proof(core, "enrol", key)  # for enrolment, not registration
    refused(lambda: runners.register(core, owner, name="r1", **signed, labels={}, workers=1,
                                     inventory={}, version=None))
    other = proof(core, "register", new_key())  # another key's nonce, re-signed by this key
    forged = {**other, "public_key": public,
              "signature": keys.sign(key, keys.proof_message("register", public, other["nonce"]))}
    refused(lambda: runners.register(core, owner, name="r1", **forged, labels={}, workers=1,
                                     inventory={}, version=None))
    runner, _ = register(core, owner, key)  # a fresh one of its own works
    assert runner.public_key == public


def test_a_member_supersedes_only_her_own_runner_and_an_admin_any_registered_one(core, owner):
    alice, _ = people.add_person(core, owner, "alice", admin=False)
    bob, _ = people.add_person(core, owner, "bob", admin=False)
    key = new_key()
    first, credential = register(core, alice, key)
    again, _ = register(core, alice, key, name="r1b")  # her own: superseded in place
    assert again.id == first.id
    refused(lambda: register(core, bob, key, name="bobs"))
    assert core.store.runner(first.id).name == "r1b"
    by_admin, _ = register(core, owner, key, name="taken")
    assert by_admin.id == first.id and by_admin.registered_by == owner.id
    refused(lambda: register(core, alice, key))  # now the admin's


def test_a_pool_members_row_is_never_taken_by_a_registration_or_an_enrolment(core, owner):
    key = new_key()
    member, _ = register(core, owner, key)
    with core.store.atomic():
        core.store.update_runner(member.id, kind="member")
    refused(lambda: register(core, owner, key))
    profiles.apply_profile(core, owner, "ui", UI)
    row, token = enrolment.mint_token(core, owner, profile="ui")
    with pytest.raises(Unauthorized) as caught:
        enrolment.enrol(core, token, name="m1", **proof(core, "enrol", key), workers=1,
                        inventory={}, version=None)
    assert caught.value.message == enrolment.REFUSED
    assert core.store.runner(member.id).kind == "member"
    assert core.store.enrol_token(row.fingerprint).uses_left == 1
