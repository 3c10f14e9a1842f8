"""A refused token is refused opaquely: every kind of refusal looks exactly alike.

Each entry of ``PERSON_REFUSALS`` / ``RUNNER_REFUSALS`` builds, on a fresh control plane,
a token that must be refused (unknown, malformed, of the wrong kind, expired, superseded,
retired …) and the test compares its answer — status, JSON body, ``WWW-Authenticate`` —
with the answer to a random unknown token. A caller therefore learns nothing about whether
a token ever existed. Enrolment tokens (``gge_``) and pool member codes (``ggm_``) are held
to the same rule on the endpoints they are spent on (spent, expired and revoked ones are in
the fleet and pool API tests).

One refusal is deliberately not opaque: a retired runner presenting its own, genuine
credential is told 403 ``runner_retired``, so that the process stops for good with one
sentence instead of retrying a 401 forever. Only the holder of that credential learns it;
anything that is not exactly the credential still gets the identical 401.
"""

from __future__ import annotations

import base64
import secrets
from typing import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from gg import keys
from gg.settings import Settings

from fleet_support import UI
from support import Clock, auth, http_proof, new_key, refusal


class World:
    def __init__(self, client: TestClient, clock: Clock, owner: str):
        self.client, self.clock, self.owner = client, clock, owner

    def register(self, name: str = "r1", key: Ed25519PrivateKey | None = None):
        key = key or new_key()
        answer = self.client.post("/v1/runners", headers=auth(self.owner),
                                  json={"name": name, **http_proof(self.client, "register", key)})
        assert answer.status_code == 201, answer.text
        return key, answer.json()


@pytest.fixture
def world(client, clock):
    return World(client, clock, client.owner)


# -- tokens that must be refused ----------------------------------------------------------


def _runner_credential(w: World) -> str:
    return w.register()[1]["credential"]


def _expired_runner_credential(w: World) -> str:
    credential = _runner_credential(w)
    w.clock.advance(Settings().runner_credential_ttl + 1)
    return credential


def _renewed_away(w: World) -> str:
    key, reg = w.register()
    old = reg["credential"]
    nonce = w.client.post("/v1/runner/challenge", headers=auth(old)).json()["nonce"]
    signature = base64.b64encode(key.sign(f"gg-renew:{reg['runner']['id']}:{nonce}".encode())).decode()
    renewed = w.client.post("/v1/runner/credential", headers=auth(old),
                            json={"nonce": nonce, "signature": signature})
    assert renewed.status_code == 200
    return old


def _registered_again(w: World) -> str:
    key, first = w.register("first")
    w.register("again", key)
    return first["credential"]


def _retired_runner_credential(w: World) -> str:
    credential = _runner_credential(w)
    core = w.client.app.state.core
    runner = core.store.runners()[0]
    with core.store.atomic():
        core.store.update_runner(runner.id, admin_state="retired", retired_at=core.now())
    return credential


def _add_person(w: World, name: str, **body) -> str:
    answer = w.client.post("/v1/people", headers=auth(w.owner), json={"name": name, **body})
    assert answer.status_code == 201, answer.text
    token = answer.json()["token"]
    assert w.client.get("/v1/whoami", headers=auth(token)).status_code == 200
    return token


def _removed_person(w: World) -> str:
    token = _add_person(w, "leaver")
    assert w.client.delete("/v1/people/leaver", headers=auth(w.owner)).status_code == 200
    return token


def _expired_person_token(w: World) -> str:
    token = _add_person(w, "temp", ttl=3600)
    w.clock.advance(3600)
    return token


def _default_lifetime_over(w: World) -> str:
    token = _add_person(w, "ada")
    w.clock.advance(Settings().person_token_ttl)
    return token


def _person_token_rotated_away(w: World) -> str:
    token = _add_person(w, "rotor")
    assert w.client.post("/v1/people/rotor/token", headers=auth(w.owner), json={}).status_code == 200
    return token


PERSON_REFUSALS: dict[str, Callable[[World], str]] = {
    "unknown person token": lambda w: "ggp_" + secrets.token_urlsafe(24),
    "person token one character off": lambda w: w.owner[:-1] + ("A" if w.owner[-1] != "A" else "B"),
    "malformed": lambda w: "not-a-token",
    "prefix only": lambda w: "ggp_",
    "runner credential used as a person": _runner_credential,
    "enrolment-shaped token": lambda w: "gge_" + secrets.token_urlsafe(24),
    "removed person": _removed_person,
    "person token past its --ttl": _expired_person_token,
    "person token past PERSON_TOKEN_TTL": _default_lifetime_over,
    "person token rotated away": _person_token_rotated_away,
}

RUNNER_REFUSALS: dict[str, Callable[[World], str]] = {
    "unknown runner credential": lambda w: "ggr_" + secrets.token_urlsafe(24),
    "malformed": lambda w: "ggr_ !@#$%^&*()",
    "person token used as a runner": lambda w: w.owner,
    "expired credential": _expired_runner_credential,
    "credential renewed away": _renewed_away,
    "key registered again": _registered_again,
    "a retired runner's credential one character off": lambda w: _one_off(
        _retired_runner_credential(w)),
    "enrolment-shaped token": lambda w: "gge_" + secrets.token_urlsafe(24),
}

# Spent on POST /v1/enrol and POST /v1/members/join, compared with a random token of the kind.
ENROL_REFUSALS: dict[str, Callable[[World], str]] = {
    "malformed": lambda w: "gge_ !@#$%^&*()",
    "prefix only": lambda w: "gge_",
    "person token used to enrol": lambda w: w.owner,
    "runner credential used to enrol": _runner_credential,
    "member code used to enrol": lambda w: "ggm_" + secrets.token_urlsafe(24),
}

MEMBER_REFUSALS: dict[str, Callable[[World], str]] = {
    "malformed": lambda w: "ggm_ !@#$%^&*()",
    "prefix only": lambda w: "ggm_",
    "person token used to join": lambda w: w.owner,
    "runner credential used to join": _runner_credential,
    "enrolment token used to join": lambda w: "gge_" + secrets.token_urlsafe(24),
}


def _one_off(token: str) -> str:
    return token[:-1] + ("A" if token[-1] != "A" else "B")


# -- registrations that must be refused like a bad token (the key is not proved, or the
# -- key's runner is not the caller's to take) ---------------------------------------------


def _member(w: World, name: str = "mallory") -> str:
    answer = w.client.post("/v1/people", json={"name": name}, headers=auth(w.owner))
    assert answer.status_code == 201, answer.text
    return answer.json()["token"]


def _unproved(w: World) -> tuple[str, dict]:
    key, _ = w.register("victim")
    return w.owner, {"name": "victim", "public_key": keys.public_text(key)}


def _signed_by_another_key(w: World) -> tuple[str, dict]:
    key, _ = w.register("victim")
    public = keys.public_text(key)
    nonce = w.client.post("/v1/key-nonces", json={"purpose": "register",
                                                  "public_key": public}).json()["nonce"]
    forged = keys.prove(new_key(), "register", nonce)["signature"]
    return w.owner, {"name": "victim", "public_key": public, "nonce": nonce, "signature": forged}


def _replayed(w: World) -> tuple[str, dict]:
    body = {"name": "r1", **http_proof(w.client, "register")}
    assert w.client.post("/v1/runners", json=body, headers=auth(w.owner)).status_code == 201
    return w.owner, body


def _expired(w: World) -> tuple[str, dict]:
    body = {"name": "r1", **http_proof(w.client, "register")}
    w.clock.advance(Settings().key_nonce_ttl + 1)
    return w.owner, body


def _someone_elses(w: World) -> tuple[str, dict]:
    key, _ = w.register("victim")  # registered by the owner
    return _member(w), {"name": "victim", **http_proof(w.client, "register", key)}


def _enrolled(w: World) -> tuple[str, dict]:
    w.client.put("/v1/profiles/ui", json={"profile": UI}, headers=auth(w.owner))
    token = w.client.post("/v1/enrolment-tokens", json={"profile": "ui"},
                          headers=auth(w.owner)).json()["token"]
    key = new_key()
    enrolled = w.client.post("/v1/enrol", json={"name": "m1", **http_proof(w.client, "enrol", key)},
                             headers=auth(token))
    assert enrolled.status_code == 201, enrolled.text
    return w.owner, {"name": "m1", **http_proof(w.client, "register", key)}


REGISTRATION_REFUSALS: dict[str, Callable[[World], tuple[str, dict]]] = {
    "another runner's public key, unproved": _unproved,
    "signed by another key": _signed_by_another_key,
    "a replayed nonce": _replayed,
    "an expired nonce": _expired,
    "another person's runner, key proved": _someone_elses,
    "an enrolled runner's key, proved": _enrolled,
}


@pytest.mark.parametrize("make", REGISTRATION_REFUSALS.values(), ids=REGISTRATION_REFUSALS.keys())
def test_refused_registrations_are_identical_to_a_bad_token(world, make):
    token, body = make(world)
    reference = refusal(world.client.post(
        "/v1/runners", json=body, headers=auth("ggp_" + secrets.token_urlsafe(24))))
    assert reference[0] == 401
    assert refusal(world.client.post("/v1/runners", json=body, headers=auth(token))) == reference


@pytest.mark.parametrize("make", PERSON_REFUSALS.values(), ids=PERSON_REFUSALS.keys())
def test_person_token_refusals_are_identical(world, make):
    reference = refusal(world.client.get("/v1/whoami", headers=auth("ggp_" + secrets.token_urlsafe(24))))
    assert reference[0] == 401 and reference[2] == "Bearer"
    token = make(world)
    for path in ("/v1/whoami", "/v1/flights", "/v1/runners"):
        assert refusal(world.client.get(path, headers=auth(token))) == reference, path


@pytest.mark.parametrize("make", RUNNER_REFUSALS.values(), ids=RUNNER_REFUSALS.keys())
def test_runner_credential_refusals_are_identical(world, make):
    reference = refusal(world.client.post("/v1/runner/check-in", json={},
                                          headers=auth("ggr_" + secrets.token_urlsafe(24))))
    assert reference[0] == 401
    token = make(world)
    for path, body in (("/v1/runner/check-in", {}), ("/v1/runner/claim", {"wait": 0}),
                       ("/v1/runner/flights/f_x/renew", {"epoch": 1})):
        assert refusal(world.client.post(path, json=body, headers=auth(token))) == reference, path


@pytest.mark.parametrize("make", ENROL_REFUSALS.values(), ids=ENROL_REFUSALS.keys())
def test_enrolment_token_refusals_are_identical(world, make):
    def enrol(token: str):
        return refusal(world.client.post("/v1/enrol", headers=auth(token),
                                         json={"name": "m1", **http_proof(world.client, "enrol")}))
    reference = enrol("gge_" + secrets.token_urlsafe(24))
    assert reference[0] == 401 and reference[2] == "Bearer"
    assert enrol(make(world)) == reference


@pytest.mark.parametrize("make", MEMBER_REFUSALS.values(), ids=MEMBER_REFUSALS.keys())
def test_member_code_refusals_are_identical(world, make):
    def join(token: str):
        return refusal(world.client.post("/v1/members/join", headers=auth(token),
                                         json=http_proof(world.client, "join")))
    reference = join("ggm_" + secrets.token_urlsafe(24))
    assert reference[0] == 401 and reference[2] == "Bearer"
    assert join(make(world)) == reference


def test_a_retired_runners_own_credential_is_told_403_runner_retired(world):
    """Decided: the one refusal that is not opaque, so a retired runner stops for good."""
    credential = _retired_runner_credential(world)
    for path, body in (("/v1/runner/check-in", {}), ("/v1/runner/claim", {"wait": 0}),
                       ("/v1/runner/flights/f_x/renew", {"epoch": 1})):
        status, answer, challenge = refusal(world.client.post(path, json=body,
                                                              headers=auth(credential)))
        assert (status, answer["error"]["code"], challenge) == (403, "runner_retired", None), path
        assert answer["error"]["message"] == ("this runner was retired by an admin: its "
                                              "credential is dead")


def test_the_real_tokens_are_accepted(world):
    """The refusals above are refusals, not a broken server: the genuine ones work."""
    assert world.client.get("/v1/whoami", headers=auth(world.owner)).status_code == 200
    forever = _add_person(world, "ci", ttl="never")
    world.clock.advance(100 * Settings().person_token_ttl)
    for token in (world.owner, forever):  # the owner's first token and `never` do not expire
        assert world.client.get("/v1/whoami", headers=auth(token)).status_code == 200
    credential = _runner_credential(world)
    assert world.client.post("/v1/runner/check-in", json={}, headers=auth(credential)).status_code == 200
