"""The public-key takeover, played against a real ``gg server`` and real ``gg runner up``.

A runner's public key is public (it is in its sent log). Naming it must never be enough to
register, enrol or join as that runner: every such request proves the private key by signing
a single-use nonce from the control plane, a person supersedes only a runner that person
registered (an admin, any registered one), and an enrolled runner is never turned into a
registered one. Every refusal is byte for byte the answer to a bad token.
"""

from __future__ import annotations

import json
import secrets

import httpx
import pytest

from gg import keys

from fleet_support import apply_and_clear, mint, profile_yaml
from support import auth, http_proof, new_key, refusal, wait_until


def _bad_token_answer(fleet, path: str, body: dict) -> tuple:
    """What a request with a made-up token of the right kind is told: the reference refusal."""
    prefix = {"/v1/runners": "ggp_", "/v1/enrol": "gge_", "/v1/members/join": "ggm_"}[path]
    reference = refusal(httpx.post(fleet.url + path, json=body,
                                   headers=auth(prefix + secrets.token_urlsafe(24))))
    assert reference[0] == 401 and reference[2] == "Bearer"
    return reference


def _sent_public_key(fleet, name: str) -> str:
    """The runner's public key as anyone reading its sent log finds it."""
    for line in (fleet.root / f"state-{name}" / "sent.jsonl").read_text().splitlines():
        body = json.loads(line).get("body") or {}
        if "public_key" in body:
            return body["public_key"]
    raise AssertionError(f"{name} never sent its public key")


def _stolen_key(fleet, name: str):
    """The runner's private key file, copied off its machine."""
    return keys.load_or_create(fleet.root / f"state-{name}" / "key.pem")


def _row(fleet, name: str) -> dict:
    return fleet.api().runner(name)


def _person(fleet, name: str, admin: bool = False) -> str:
    return fleet.api().add_person(name, admin)["token"]


def _lands_on(fleet, name: str) -> dict:
    """A flight pinned to ``name`` lands there, with the output its command printed."""
    api = fleet.api()
    flight = api.open_flight({"command": ["echo", "flown by the real one"], "runner": name})

    def landed():
        shown = json.loads(fleet.gg("show", flight["id"], "--json").stdout)
        return shown if shown["stage"] == "landed" else None

    shown = wait_until(landed, what=f"the flight pinned to {name} to land")
    output = "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output")
    assert output == "flown by the real one\n"
    assert [a["runner_name"] for a in shown["attempts"]] == [name]
    return shown


def test_a_public_key_without_its_private_key_takes_over_nothing(fleet):
    """(a) A person's token and another runner's public key, with no signature, a forged one,
    or one by another key, is refused exactly like a bad token, for a member and an admin
    alike; the real runner keeps its row and credential and lands its pinned flight."""
    victim = fleet.runner("victim")
    fleet.wait_online("victim")
    before = _row(fleet, "victim")
    public = _sent_public_key(fleet, "victim")
    mallory = _person(fleet, "mallory")
    body = {"name": "victim", "public_key": public}
    reference = _bad_token_answer(fleet, "/v1/runners", body)

    impostor = new_key()
    nonce = httpx.post(fleet.url + "/v1/key-nonces",
                       json={"purpose": "register", "public_key": public}).json()["nonce"]
    own_signature = keys.prove(impostor, "register", nonce)["signature"]
    attempts = [
        body,                                                      # no proof at all
        {**body, "nonce": nonce, "signature": own_signature},      # signed by another key
        {**body, **http_proof(httpx, "register", impostor, base=fleet.url),
         "public_key": public},                                    # the impostor's own nonce
        {**body, "nonce": "made-up", "signature": own_signature},  # a nonce never issued
    ]
    for token in (mallory, fleet.server.owner_token()):
        for attempt in attempts:
            refused = httpx.post(fleet.url + "/v1/runners", json=attempt, headers=auth(token))
            assert refusal(refused) == reference

    assert victim.alive()
    _lands_on(fleet, "victim")
    after = _row(fleet, "victim")
    assert (after["id"], after["kind"]) == (before["id"], "registered")
    registered = fleet.api().events(kind="info:runner:registered")
    assert [e["runner_id"] for e in registered] == [before["id"]]  # never superseded


def test_a_nonce_is_spent_by_its_first_use_and_bound_to_its_purpose_and_key(fleet):
    """(b) A replayed registration (same nonce, same valid signature) is refused like a bad
    token, and so is a nonce issued for another purpose or another key."""
    mallory = _person(fleet, "mallory")
    key = new_key()
    signed = {"name": "mine", **http_proof(httpx, "register", key, base=fleet.url)}
    first = httpx.post(fleet.url + "/v1/runners", json=signed, headers=auth(mallory))
    assert first.status_code == 201, first.text
    reference = _bad_token_answer(fleet, "/v1/runners", signed)
    replayed = httpx.post(fleet.url + "/v1/runners", json=signed, headers=auth(mallory))
    assert refusal(replayed) == reference

    for_enrolment = {"name": "mine", **http_proof(httpx, "enrol", key, base=fleet.url)}
    other = new_key()
    for_other_key = {"name": "mine", **http_proof(httpx, "register", other, base=fleet.url)}
    nonce, public = for_other_key["nonce"], keys.public_text(key)
    for_other_key.update(public_key=public, signature=keys.sign(
        key, keys.proof_message("register", public, nonce)))
    for attempt in (for_enrolment, for_other_key):
        refused = httpx.post(fleet.url + "/v1/runners", json=attempt, headers=auth(mallory))
        assert refusal(refused) == reference
    # Her own runner she may register again, with a fresh proof.
    again = httpx.post(fleet.url + "/v1/runners", headers=auth(mallory), json={
        "name": "mine", **http_proof(httpx, "register", key, base=fleet.url)})
    assert again.status_code == 201 and again.json()["runner"]["id"] == first.json()["runner"]["id"]


def test_a_copied_key_file_lets_a_member_supersede_nobody_elses_runner_but_an_admin_may(fleet):
    """(c) Even holding the key, a member person cannot supersede a runner another person
    registered (the opaque 401; the runner goes on working); an admin can."""
    victim = fleet.runner("victim")
    fleet.wait_online("victim")
    before = _row(fleet, "victim")
    stolen = _stolen_key(fleet, "victim")
    mallory = _person(fleet, "mallory")
    reference = _bad_token_answer(fleet, "/v1/runners", {"name": "victim",
                                                         "public_key": keys.public_text(stolen)})
    refused = httpx.post(fleet.url + "/v1/runners", headers=auth(mallory), json={
        "name": "victim", **http_proof(httpx, "register", stolen, base=fleet.url)})
    assert refusal(refused) == reference
    assert victim.alive()
    _lands_on(fleet, "victim")

    admin = _person(fleet, "root", admin=True)
    taken = httpx.post(fleet.url + "/v1/runners", headers=auth(admin), json={
        "name": "victim", **http_proof(httpx, "register", stolen, base=fleet.url)})
    assert taken.status_code == 201, taken.text
    assert taken.json()["runner"]["id"] == before["id"]


def test_an_enrolled_runner_is_never_turned_into_a_registered_one(fleet, tmp_path):
    """(d) An admin holding an enrolled machine's key file is refused registering it, like a
    bad token; the runner stays enrolled with its profile and keeps checking in."""
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml())
    machine = fleet.runner("m1", extra=["--enrol", mint(fleet, "ui")])
    fleet.wait_online("m1")
    before = _row(fleet, "m1")
    assert (before["kind"], before["profile"]) == ("enrolled", "ui")
    stolen = _stolen_key(fleet, "m1")
    reference = _bad_token_answer(fleet, "/v1/runners", {"name": "m1",
                                                         "public_key": keys.public_text(stolen)})
    refused = httpx.post(fleet.url + "/v1/runners", headers=auth(fleet.server.owner_token()),
                         json={"name": "m1", **http_proof(httpx, "register", stolen,
                                                          base=fleet.url)})
    assert refusal(refused) == reference
    after = _row(fleet, "m1")
    assert (after["id"], after["kind"], after["profile"]) == (before["id"], "enrolled", "ui")
    seen = after["last_seen_at"]
    wait_until(lambda: machine.alive() and _row(fleet, "m1")["last_seen_at"] != seen,
               what="the enrolled runner to check in again with its own credential")

    # Enrolling needs the proof too: a fresh token with the key named but not proved.
    token = mint(fleet, "ui")
    body = {"name": "m2", "public_key": keys.public_text(new_key())}
    assert refusal(httpx.post(fleet.url + "/v1/enrol", json=body, headers=auth(token))) \
        == _bad_token_answer(fleet, "/v1/enrol", body)


STRATEGY = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 2, "warm": 1},
            "image": {"ref": "ui-image", "digest": "sha256:" + "ab" * 32}}


def test_a_pool_member_joins_only_with_its_keys_signature(fleet):
    """(e) A member code with a public key but no valid signature is refused like a bad
    code, and does not spend the code; the proved join then succeeds."""
    api = fleet.api()
    fleet.chart("ui")
    applied = api.apply_strategy("ui", STRATEGY)
    api.clear_gate(applied["gate"]["id"])
    keeper = api.register({"name": "keeper"}, new_key())["credential"]
    httpx.post(fleet.url + "/v1/runner/check-in", json={}, headers=auth(keeper))
    api.allow_maintainer("ui-pool", "keeper")
    started = httpx.post(fleet.url + "/v1/pools/ui-pool/actions", json={"action": "start"},
                         headers=auth(keeper))
    assert started.status_code == 200, started.text
    code = started.json()["code"]

    key = new_key()
    body = {"public_key": keys.public_text(key)}
    reference = _bad_token_answer(fleet, "/v1/members/join", body)
    nonce = httpx.post(fleet.url + "/v1/key-nonces",
                       json={"purpose": "join", "public_key": body["public_key"]}).json()["nonce"]
    forged = keys.prove(new_key(), "join", nonce)["signature"]
    for attempt in (body, {**body, "nonce": nonce, "signature": forged},
                    {**body, **http_proof(httpx, "register", key, base=fleet.url)}):
        refused = httpx.post(fleet.url + "/v1/members/join", json=attempt, headers=auth(code))
        assert refusal(refused) == reference
    joined = httpx.post(fleet.url + "/v1/members/join", headers=auth(code),
                        json=http_proof(httpx, "join", key, base=fleet.url))
    assert joined.status_code == 201, joined.text


@pytest.mark.parametrize("purpose", ["register", "enrol", "join"])
def test_a_nonce_is_asked_for_a_known_purpose_and_a_real_key(fleet, purpose):
    ok = httpx.post(fleet.url + "/v1/key-nonces",
                    json={"purpose": purpose, "public_key": keys.public_text(new_key())})
    assert ok.status_code == 201 and ok.json()["expires_in"] > 0
    for bad in ({"purpose": "renew", "public_key": keys.public_text(new_key())},
                {"purpose": purpose, "public_key": "not a key"}):
        assert httpx.post(fleet.url + "/v1/key-nonces", json=bad).status_code == 400
