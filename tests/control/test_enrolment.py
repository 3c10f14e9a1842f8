"""Enrolment tokens: minted by an admin, spent by machines, refused opaquely."""

from __future__ import annotations

import pytest

from gg.control import enrolment, gates, people, profiles
from gg.domain import tokens
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest, Forbidden, NotFound, Unauthorized
from gg.settings import Settings

from fleet_support import SANDBOX_CAPABILITIES, UI
from support import new_key, proof

STORES = ("sqlite", "postgresql")  # storage semantics: what is kept of a token


@pytest.fixture
def settings():
    return Settings()


@pytest.fixture
def owner(owner, core):
    """The owner, with profile ui applied (its gate still open)."""
    profiles.apply_profile(core, owner, "ui", UI)
    return owner


def spend(core, token, name="m1"):
    return enrolment.enrol(core, token, name=name, **proof(core, "enrol"), workers=1,
                           inventory={}, version=None)


def test_a_token_is_shown_once_and_only_its_hash_is_kept(core, owner, tmp_path):
    row, token = enrolment.mint_token(core, owner, profile="ui")
    assert token.startswith("gge_") and row.fingerprint == tokens.fingerprint(token)
    assert row.expires_at == core.now() + Settings().enrol_token_ttl  # ENROL_TOKEN_TTL
    stored = tmp_path / "gg.sqlite3"
    if stored.exists():  # SQLite: not in the file, nor in its write-ahead log
        raw = stored.read_bytes()
        wal = tmp_path / "gg.sqlite3-wal"
        raw += wal.read_bytes() if wal.exists() else b""
    else:  # PostgreSQL: not in any column of the row kept for it
        raw = repr([tuple(r) for r in core.store.db.all("SELECT * FROM enrol_tokens")]).encode()
        assert row.fingerprint.encode() in raw  # the row is there; the token is not
    assert token.encode() not in raw


def test_an_enrolled_runner_takes_profile_and_ownership_from_its_token(core, owner):
    people.add_person(core, owner, "ada", admin=False)
    _, token = enrolment.mint_token(core, owner, profile="ui", owner="ada")
    runner, credential = spend(core, token)
    assert credential.startswith("ggr_")
    assert (runner.kind, runner.profile, runner.ownership) == ("enrolled", "ui", "claimed")
    assert runner.owner == core.store.person_by_name("ada").id
    assert runner.labels == {}  # the profile's gate is still open
    [event] = core.store.events(kind="info:runner:enrolled")
    assert event["runner_id"] == runner.id and event["body"]["profile"] == "ui"


def test_a_one_use_token_used_twice_gives_one_runner(core, owner):
    _, token = enrolment.mint_token(core, owner, profile="ui", uses=1)
    spend(core, token, "first")
    with pytest.raises(Unauthorized):
        spend(core, token, "second")
    assert [r.name for r in core.store.runners()] == ["first"]


def test_unknown_expired_exhausted_and_revoked_tokens_are_refused_alike(core, owner, clock):
    _, exhausted = enrolment.mint_token(core, owner, profile="ui", uses=1)
    spend(core, exhausted)
    _, expired = enrolment.mint_token(core, owner, profile="ui", ttl=60)
    row, revoked = enrolment.mint_token(core, owner, profile="ui", ttl=7200)
    enrolment.revoke_token(core, owner, row.fingerprint)
    clock.advance(61)
    refusals = []
    for token in ("gge_" + "x" * 32, expired, exhausted, revoked, "ggp_not-even-enrolment", ""):
        with pytest.raises(Unauthorized) as refused:
            spend(core, token, "intruder")
        refusals.append((refused.value.status, refused.value.code, refused.value.message))
    assert len(set(refusals)) == 1
    assert len(core.store.runners()) == 1


def test_the_listing_says_why_expired_wins(core, owner, clock):
    _, spent = enrolment.mint_token(core, owner, profile="ui", uses=1, ttl=60)
    spend(core, spent)
    enrolment.mint_token(core, owner, profile="ui", ttl=7200)
    statuses = [r["status"] for r in enrolment.list_tokens(core, owner)]
    assert sorted(statuses) == ["active", "exhausted"]
    clock.advance(61)
    statuses = {r["uses_left"]: r["status"] for r in enrolment.list_tokens(core, owner)}
    assert statuses == {0: "expired", 1: "active"}


def test_a_tombstoned_key_is_refused_and_the_use_is_not_spent(core, owner):
    row, token = enrolment.mint_token(core, owner, profile="ui", uses=1)
    signed = proof(core, "enrol")
    core.store.tombstone(signed["public_key"], "r_gone", core.now())
    with pytest.raises(Forbidden):
        enrolment.enrol(core, token, name="m", **signed, workers=1, inventory={},
                        version=None)
    assert core.store.enrol_token(row.fingerprint).uses_left == 1


def test_minting_needs_an_applied_profile_an_admin_and_a_known_owner(core, owner):
    with pytest.raises(NotFound):
        enrolment.mint_token(core, owner, profile="nope")
    member, _ = people.add_person(core, owner, "bob", admin=False)
    with pytest.raises(Forbidden):
        enrolment.mint_token(core, member, profile="ui")
    with pytest.raises(NotFound):
        enrolment.mint_token(core, owner, profile="ui", owner="nobody")
    with pytest.raises(BadRequest):
        enrolment.mint_token(core, owner, profile="ui", ownership="claimed")
    with pytest.raises(BadRequest):
        enrolment.mint_token(core, owner, profile="ui", uses=-1)
    with pytest.raises(BadRequest):
        enrolment.mint_token(core, owner, profile="ui", uses=10_001)


def test_an_enrolled_machine_takes_no_work_until_its_profile_is_in_force(core, owner):
    from gg.control import flights, leases, runners

    _, token = enrolment.mint_token(core, owner, profile="ui")
    machine, _ = spend(core, token)
    runners.check_in(core, machine, readings={}, inventory=None,
                     capabilities=SANDBOX_CAPABILITIES, version=None, held=[], peer_address=None)
    plain = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    assert leases.try_claim(core, machine.id) is None
    shown = flights.show_flight(core, plain.id)
    assert shown["waiting"] == ("waiting: no runner can take it: m1 cannot because its fleet "
                                "profile ui is not in force")
    gates.clear_gate(core, core.store.profile_record("ui").gate_id, person=owner)
    granted = leases.try_claim(core, machine.id)
    assert granted is not None and granted[0].id == plain.id


def test_a_person_never_turns_an_enrolled_runner_into_a_registered_one(core, owner):
    """Not even an admin holding the machine's key: the refusal is the opaque 401 and the
    runner stays enrolled, its profile and credential untouched."""
    from gg.control import runners

    _, token = enrolment.mint_token(core, owner, profile="ui")
    key = new_key()
    machine, credential = enrolment.enrol(core, token, name="m1", **proof(core, "enrol", key),
                                          workers=1, inventory={}, version=None)
    with pytest.raises(Unauthorized) as refused:
        runners.register(core, owner, name="m1", **proof(core, "register", key),
                         labels={"gpu": "a100"}, workers=1, inventory={}, version=None)
    assert refused.value.message == Unauthorized().message
    kept = core.store.runner(machine.id)
    assert (kept.kind, kept.profile, kept.labels) == ("enrolled", "ui", machine.labels)
    assert runners.authenticate(core, credential).id == machine.id


def test_enrolling_needs_the_keys_signature_over_a_fresh_nonce_and_a_refusal_spends_no_use(
        core, owner):
    row, token = enrolment.mint_token(core, owner, profile="ui", uses=1)
    key, other = new_key(), new_key()
    signed = proof(core, "enrol", key)
    forged = {**proof(core, "enrol", other), "public_key": signed["public_key"]}
    for attempt in ({**signed, "signature": None}, {**signed, "nonce": None}, forged,
                    {**proof(core, "register", key)}):  # a nonce for another purpose
        with pytest.raises(Unauthorized) as refused:
            enrolment.enrol(core, token, name="m1", **attempt, workers=1, inventory={},
                            version=None)
        assert refused.value.message == enrolment.REFUSED
    assert core.store.enrol_token(row.fingerprint).uses_left == 1
    enrolment.enrol(core, token, name="m1", **signed, workers=1, inventory={}, version=None)
    assert core.store.enrol_token(row.fingerprint).uses_left == 0


def test_a_token_of_uses_0_enrols_any_number_of_machines_until_it_expires(core, owner, clock):
    row, token = enrolment.mint_token(core, owner, profile="ui", uses=0, ttl=60)
    for n in range(12):
        spend(core, token, name=f"m{n}")
    [listed] = enrolment.list_tokens(core, owner)
    assert (listed["status"], listed["uses"], listed["uses_left"]) == ("active", 0, None)
    clock.advance(61)
    with pytest.raises(Unauthorized):
        spend(core, token, name="late")
    assert enrolment.list_tokens(core, owner)[0]["status"] == "expired"


def test_an_ephemeral_token_enrols_ephemeral_runners(core, owner):
    row, token = enrolment.mint_token(core, owner, profile="ui", ephemeral=True)
    machine, _ = spend(core, token)
    assert row.ephemeral and core.store.runner(machine.id).ephemeral
    assert enrolment.list_tokens(core, owner)[0]["ephemeral"] is True
