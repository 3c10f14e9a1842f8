"""Identity tokens end to end (docs/jobs.md): a real ``gg server``, real runner processes, a
flight that runs the real ``gg id-token``, and a verifier that knows nothing of gg: it fetches
the discovery document and the JWKS over HTTP and checks the token with PyJWT.

The runner is root here (as on CI): a sandboxed flight runs as its own unprivileged uid, and
still reaches its runner's socket.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import httpx
import jwt
import pytest

from gg.client import ApiError, Client
from gg.runner.capabilities import probe
from gg.runner.state import StateDir

from support import FAST, Fleet, wait_until

AUDIENCE = "sts.example"
CAPS = probe()
SANDBOX = bool(CAPS["bwrap_usable"] and CAPS["netns"])

# Runs inside the flight: asks for tokens with the real CLI (the interpreter the runner
# uses), then waits for the test to rotate the signing key and asks again.
FLIGHT = r'''
import json, os, subprocess, sys, time
def gg(*args, **env):
    done = subprocess.run([sys.executable, "-m", "gg", "id-token", *args], capture_output=True,
                          text=True, env={**os.environ, **env})
    return {"rc": done.returncode, "out": done.stdout.strip(), "err": done.stderr.strip()}
st = os.stat(os.environ["GG_ID_TOKEN_SOCKET"])
print(json.dumps({"good": gg("--audience", "sts.example"),
                  "wrong": gg("--audience", "sts.example", GG_ID_TOKEN_REQUEST_TOKEN="wrong"),
                  "bad": gg("--audience", "two words"),
                  "env": dict(os.environ), "uid": os.getuid(),
                  "socket": [st.st_uid, st.st_mode & 0o777]}), flush=True)
while not os.path.exists("release"):
    time.sleep(0.05)
print(json.dumps({"after": gg("--audience", "sts.example")}), flush=True)
'''


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # leases long enough that a token (never valid past its lease) is still valid when the
    # test verifies it after the flight
    fleet = Fleet(tmp_path_factory.mktemp("id-tokens"),
                  {**FAST, "GG_LEASE_TTL": "60", "GG_LEASE_RENEW_AT": "30"}).start()
    try:
        fleet.runner("r1")
        fleet.wait_online("r1")
        if SANDBOX:  # a root runner's sandboxed flight runs as its own uid, without a network
            done = fleet.gg("runner", "policy", "r1", "--isolation", "sandbox", "--egress", "none")
            assert done.returncode == 0, done.stderr
            wait_until(lambda: fleet.runner_row("r1")["checks_verdict"] == "checks passed",
                       what="r1 to check in under its new policy")
        yield fleet
    finally:
        fleet.stop()


def _output_lines(fleet, flight_id: str) -> list[dict]:
    text = "".join(f["body"]["text"] for f in fleet.api().flight(flight_id)["facts"]
                   if f["kind"] == "output")
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _verifier(fleet) -> tuple[dict, jwt.PyJWKSet]:
    """What a cloud STS does: the discovery document, then the JWKS it names, over HTTP."""
    found = httpx.get(fleet.url + "/.well-known/openid-configuration", timeout=30)
    assert found.status_code == 200, found.text
    discovery = found.json()
    keys = httpx.get(discovery["jwks_uri"], timeout=30)
    assert keys.status_code == 200, keys.text
    return discovery, jwt.PyJWKSet.from_dict(keys.json())


def _verify(token: str, discovery: dict, keys: jwt.PyJWKSet) -> dict:
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    return jwt.decode(token, key.key, algorithms=discovery["id_token_signing_alg_values_supported"],
                      audience=AUDIENCE, issuer=discovery["issuer"],
                      options={"require": ["exp", "iat", "nbf", "iss", "sub", "aud", "jti"]})


def test_a_flight_prints_a_token_that_verifies_against_the_jwks_carries_its_claims_and_survives_rotation(
        fleet):
    api = fleet.api()
    ada = api.add_person("ada", True)["token"]  # the approver
    flight = api.open_flight({"command": [sys.executable, "-c", FLIGHT], "approval": True})["id"]
    fleet.api(ada).approve(flight)
    first = wait_until(lambda: (_output_lines(fleet, flight) or [None])[0], timeout=60,
                       what="the flight's first tokens")
    assert first["good"]["rc"] == 0, first["good"]["err"]
    before = first["good"]["out"]

    discovery, keys = _verifier(fleet)
    assert discovery["issuer"] == fleet.url
    assert discovery["id_token_signing_alg_values_supported"] == ["RS256"]
    assert {"sub", "aud", "epoch", "runner"} <= set(discovery["claims_supported"])
    claims = _verify(before, discovery, keys)
    shown = api.flight(flight)
    assert claims["sub"] == f"flight:{flight}"
    assert claims["aud"] == AUDIENCE and claims["iss"] == fleet.url
    assert (claims["attempt"], claims["epoch"]) == (shown["attempt"], shown["epoch"]) == (1, 1)
    assert claims["opener"] == "owner" and claims["approver"] == "ada"
    assert claims["runner"] == "r1" and claims["group"] == "default"
    assert claims["environment"] is None
    assert claims["iat"] == claims["nbf"]
    # never past the lease (60 s here), never past ten minutes
    assert claims["iat"] < claims["exp"] <= claims["iat"] + 60

    # a wrong request token and a bad audience: refused with one sentence, nothing minted
    assert first["wrong"]["rc"] == 3 and first["wrong"]["out"] == ""
    assert first["wrong"]["err"] == ("the request token is not this flight's (it is "
                                     "$GG_ID_TOKEN_REQUEST_TOKEN)")
    assert first["bad"]["rc"] == 2
    assert first["bad"]["err"] == "an audience has no spaces or control characters (got 'two words')"

    # the flight's environment holds no runner credential, and the socket is its own alone
    runner = StateDir(fleet.runners[0].state_dir).registration()
    env = first["env"]
    assert runner.credential not in json.dumps(env)
    assert {k for k in env if k.startswith("GG_")} <= {
        "GG_FLIGHT", "GG_ATTEMPT", "GG_WORKSPACE", "GG_ID_TOKEN_SOCKET",
        "GG_ID_TOKEN_REQUEST_TOKEN", "GG_ARTIFACTS", "GG_INPUTS"}
    assert first["socket"] == [first["uid"], 0o600]
    if SANDBOX:
        assert first["uid"] != 0  # a root runner's sandboxed flight runs as its own uid

    # rotation: a new key signs from now on; the old one stays in the JWKS
    rotated = fleet.gg("server", "rotate-signing-key", "--json")
    assert rotated.returncode == 0, rotated.stderr
    rotation = json.loads(rotated.stdout)
    assert rotation["retired"] == jwt.get_unverified_header(before)["kid"]
    with open(os.path.join(env["GG_WORKSPACE"], "release"), "w"):
        pass
    wait_until(lambda: api.flight(flight)["stage"] == "landed", timeout=60,
               what="the flight to land")
    after = _output_lines(fleet, flight)[1]["after"]
    assert after["rc"] == 0, after["err"]
    discovery, keys = _verifier(fleet)
    assert {k.key_id for k in keys.keys} == {rotation["kid"], rotation["retired"]}
    assert jwt.get_unverified_header(after["out"])["kid"] == rotation["kid"]
    assert _verify(before, discovery, keys)["jti"] == claims["jti"]  # signed before: verifies
    assert _verify(after["out"], discovery, keys)["sub"] == f"flight:{flight}"

    # every mint is an event, never the token
    minted = api.events(kind="info:flight:id_token", flight=flight)
    assert [e["body"]["audience"] for e in minted] == [AUDIENCE, AUDIENCE]
    assert minted[0]["body"]["jti"] == claims["jti"] and minted[0]["body"]["epoch"] == 1
    assert minted[0]["actor"] == "runner:r1"
    assert before not in json.dumps(api.events(limit=10000))
    assert [e["body"]["retired"] for e in api.events(kind="info:signing_key:rotated")] == [
        rotation["retired"]]
    # the flight's view names what was minted for it, oldest first, never a token
    shown = api.flight(flight)
    assert [(t["audience"], t["jti"]) for t in shown["id_tokens"]] == [
        (AUDIENCE, e["body"]["jti"]) for e in minted]
    listed = json.dumps(shown["id_tokens"])  # (the flight's own output printed its tokens)
    assert before not in listed and after["out"] not in listed
    said = fleet.gg("show", flight)
    assert said.returncode == 0 and f"id tokens 2 minted; the last for {AUDIENCE}" in said.stdout


def test_the_discovery_document_and_the_jwks_need_no_credentials_and_rotation_needs_an_admin(
        fleet):
    for path in ("/.well-known/openid-configuration", "/.well-known/jwks"):
        assert httpx.get(fleet.url + path, timeout=30).status_code == 200
    bob = fleet.api().add_person("bob", False)["token"]
    with pytest.raises(ApiError) as refused:
        fleet.api(bob).rotate_signing_key()
    assert (refused.value.status, refused.value.message) == (403, "only an admin may do that")


def _flying(api, flight_id: str, epoch: int):
    shown = api.flight(flight_id)
    return shown if shown["stage"] == "flying" and shown["epoch"] == epoch else None


def test_a_stale_epoch_cannot_mint_a_token_and_the_holder_at_its_epoch_can(fleet_env, tmp_path):
    stale = Fleet(tmp_path, fleet_env).start()  # short leases: one runs out in seconds
    try:
        runner = stale.runner("r1")
        stale.wait_online("r1")
        api = stale.api()
        flight = api.open_flight({"command": ["sleep", "600"]})["id"]
        wait_until(lambda: _flying(api, flight, 1), what="the flight to fly at epoch 1")
        as_runner = Client(stale.url, StateDir(runner.state_dir).registration().credential)

        with pytest.raises(ApiError) as refused:  # bad input: one sentence, nothing minted
            as_runner.id_token(flight, 1, "a" * 300)
        assert (refused.value.status, refused.value.message) == (
            400, "an audience is at most 255 characters (got 300)")

        runner.proc.send_signal(signal.SIGSTOP)  # its lease runs out; it is offered again
        try:
            wait_until(lambda: api.flight(flight)["stage"] == "ready",
                       what="the lease to run out")
            with pytest.raises(ApiError) as refused:
                as_runner.id_token(flight, 1, AUDIENCE)
            assert (refused.value.status, refused.value.code) == (409, "lease_superseded")
        finally:
            runner.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: _flying(api, flight, 2), what="the flight to fly again at epoch 2")
        with pytest.raises(ApiError) as refused:
            as_runner.id_token(flight, 1, AUDIENCE)
        assert (refused.value.status, refused.value.code) == (409, "lease_superseded")
        assert as_runner.id_token(flight, 2, AUDIENCE).token.count(".") == 2
        minted = api.events(kind="info:flight:id_token", flight=flight)
        assert [e["body"]["epoch"] for e in minted] == [2]
        api.cancel(flight)
    finally:
        stale.stop()
