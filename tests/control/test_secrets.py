"""Secrets' use cases on both stores: who may set them, what a flight may ask for, what the
grant delivers, a key file that does not open them, rotation and retention."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gg.control import flights, secrets
from gg.control.retention import prune_batch
from gg.domain.flight_spec import FlightSpec
from gg.domain.secrets import Use
from gg.errors import BadRequest, Forbidden, Unavailable

STORES = ("sqlite", "postgresql")  # sealed bytes and the scope key on both stores


@pytest.fixture
def settings(settings, tmp_path):
    return replace(settings, secrets_key_file=str(tmp_path / "secrets.key"))


def _open(core, person, *uses: Use, environment=None):
    return flights.open_flight(core, person, FlightSpec(command=("true",), secrets=uses,
                                                        environment=environment))


def test_only_an_admin_sets_a_secret_and_nothing_is_stored_when_a_member_tries(core, owner, ada):
    with pytest.raises(Forbidden):
        secrets.set_secret(core, ada, "TOKEN", environment=None, value=b"v")
    assert core.store.secrets() == []
    said = secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"v")
    assert "anyone who may open flights" in said["scope"] and "value" not in said
    assert [s["name"] for s in secrets.list_secrets(core, ada)] == ["TOKEN"]


def test_the_grant_delivers_the_value_a_member_asked_for_by_name(core, owner, ada):
    secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"s3cret")
    flight = _open(core, ada, Use("TOKEN", "API"))
    assert secrets.names_of(core, flight.id) == [{"name": "TOKEN", "envvar": "API"}]
    assert secrets.for_grant(core, flight) == ([{"name": "TOKEN", "envvar": "API",
                                                 "value": "s3cret"}], None)
    secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"newer")  # granted later: the new value
    assert secrets.for_grant(core, flight)[0][0]["value"] == "newer"


def test_a_secret_removed_before_the_grant_is_refused_to_the_runner_in_one_sentence(core, owner):
    secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"v")
    flight = _open(core, owner, Use("TOKEN", "TOKEN"))
    secrets.remove_secret(core, owner, "TOKEN", None)
    delivered, refused = secrets.for_grant(core, flight)
    assert delivered == [] and refused.startswith("secret TOKEN cannot be delivered")


def test_an_unknown_secret_or_two_in_one_variable_opens_no_flight(core, owner):
    secrets.set_secret(core, owner, "ANY", environment=None, value=b"v")
    for uses, says in (([Use("NOPE", "NOPE")], "there is no secret NOPE"),
                       ([Use("ANY", "X"), Use("ANY2", "X")], "both go in $X")):
        with pytest.raises(BadRequest, match=says.replace("$", r"\$")):
            _open(core, owner, *uses)
    assert core.store.flights() == []


def test_a_key_file_that_does_not_open_the_secrets_is_said_in_one_sentence(core, owner, tmp_path):
    secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"v")
    other = tmp_path / "other.key"
    said = secrets.unopened(core.store, other)
    assert said is not None and "does not open" in said and "\n" not in said
    assert secrets.unopened(core.store, tmp_path / "secrets.key") is None
    core.settings = replace(core.settings, secrets_key_file=str(other))
    with pytest.raises(Unavailable, match="GG_SECRETS_KEY_FILE"):
        _open(core, owner, Use("TOKEN", "TOKEN"))


def test_rotation_reseals_every_value_in_one_transaction_and_they_still_open(core, owner, tmp_path):
    secrets.set_secret(core, owner, "A", environment=None, value=b"one")
    secrets.set_secret(core, owner, "B", environment=None, value=b"two")
    before = {n: s for n, _, s in core.store.sealed_secrets()}
    key_id, count = secrets.rotate_key(core.store, tmp_path / "secrets.key")
    after = {n: s for n, _, s in core.store.sealed_secrets()}
    assert count == 2 and all(after[n].key_id == key_id != before[n].key_id for n in after)
    assert all(after[n].sealed != before[n].sealed for n in after)
    flight = _open(core, owner, Use("A", "A"), Use("B", "B"))
    assert [s["value"] for s in secrets.for_grant(core, flight)[0]] == ["one", "two"]


def test_a_rotation_whose_key_does_not_open_a_value_changes_nothing(core, owner, tmp_path):
    secrets.set_secret(core, owner, "A", environment=None, value=b"one")
    before = core.store.sealed_secrets()
    with pytest.raises(secrets.sealing.SealingError):
        secrets.rotate_key(core.store, tmp_path / "elsewhere.key")
    assert core.store.sealed_secrets() == before
    assert not (tmp_path / "elsewhere.key.new").exists()


def test_retention_prunes_a_flights_secret_names_with_it(core, owner, clock):
    core.settings = replace(core.settings, retain_flights=10)
    secrets.set_secret(core, owner, "A", environment=None, value=b"one")
    flight = _open(core, owner, Use("A", "A"))
    flights.cancel(core, owner, flight.id)
    clock.advance(60)
    while prune_batch(core).full:
        pass
    assert core.store.flight_secrets(flight.id) == []
    assert core.store.secrets()  # the secret itself stays


def test_a_rerun_asks_for_the_same_secrets_by_name_and_keeps_the_note(core, owner):
    from gg.control import reruns

    secrets.set_secret(core, owner, "TOKEN", environment=None, value=b"s3cret")
    old = flights.open_flight(core, owner, FlightSpec(command=("true",), note="release 4.2",
                                                      secrets=(Use("TOKEN", "API"),)))
    new = reruns.rerun(core, owner, old.id, {})
    assert secrets.names_of(core, new.id) == [{"name": "TOKEN", "envvar": "API"}]
    assert core.store.flight_note(new.id) == "release 4.2"
    assert secrets.for_grant(core, new)[0][0]["value"] == "s3cret"
