"""The real ``gg`` CLI against a real control plane: list, remove, rotate, --ttl, logout."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess

from gg.client import ApiError
from gg.launch import gg_argv


def _refusal(fleet, token: str) -> tuple:
    try:
        fleet.api(token).whoami()
    except ApiError as exc:
        return exc.status, exc.code, exc.message
    return None


def _gg_as(fleet, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GG_CONFIG_DIR": str(fleet.config_dir), "GG_SERVER": fleet.url,
           "GG_TOKEN": token}
    return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True, timeout=60)


def _one_sentence(done, code: int, sentence: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stderr == sentence + "\n", done.stderr
    assert "Traceback" not in done.stderr


def test_person_list_json_remove_and_rotate(fleet):
    ada = json.loads(fleet.gg("person", "add", "ada", "--admin", "--ttl", "never", "--json",
                              check=True).stdout)
    bob = json.loads(fleet.gg("person", "add", "bob", "--ttl", "12h", "--json", check=True).stdout)
    assert ada["person"]["token_expires_at"] is None
    assert bob["person"]["token_expires_at"] > bob["person"]["created_at"] + 11 * 3600

    rows = json.loads(fleet.gg("person", "list", "--json", check=True).stdout)
    assert [(r["name"], r["role"], r["is_owner"]) for r in rows] == [
        ("owner", "admin", True), ("ada", "admin", False), ("bob", "member", False)]
    assert rows[2]["token_fingerprint"] == bob["person"]["token_fingerprint"]
    assert {"created_at", "token_expires_at"} <= set(rows[0])
    table = fleet.gg("person", "list", check=True).stdout
    assert "TOKEN" in table and "EXPIRES" in table and "never" in table

    bogus = _refusal(fleet, "ggp_" + secrets.token_urlsafe(24))
    assert bogus[0] == 401
    removed = fleet.gg("person", "remove", "bob")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith("removed bob: token sha256:")
    assert _refusal(fleet, bob["token"]) == bogus  # at once, and opaque
    _one_sentence(_gg_as(fleet, bob["token"], "whoami"), 3,
                  "the token in GG_TOKEN was not accepted (it may have expired or been rotated, "
                  "or its person removed): set GG_TOKEN to a live token, or unset it to use the "
                  "sign-in gg login keeps")  # gg login would not help while GG_TOKEN is set
    assert [r["name"] for r in json.loads(fleet.gg("person", "list", "--json").stdout)] == ["owner", "ada"]
    assert "bob" in fleet.gg("person", "list", "--all").stdout

    rotated = fleet.gg("person", "token", "ada", "--rotate", "--json")
    assert rotated.returncode == 0, rotated.stderr
    new = json.loads(rotated.stdout)["token"]
    assert _refusal(fleet, ada["token"]) == bogus
    assert fleet.api(new).whoami()["person"]["name"] == "ada"


def test_refusals_are_one_sentence(fleet):
    fleet.gg("person", "add", "ada", "--admin", check=True)
    _one_sentence(fleet.gg("person", "remove", "owner"), 4, "the owner cannot be removed")
    _one_sentence(fleet.gg("person", "remove", "zed"), 5, "there is no person named zed")
    _one_sentence(fleet.gg("person", "add", "x", "--ttl", "soon"), 2,
                  "--ttl: 'soon' is not a duration (try 30, 500ms, 10m, 12h or 30d), or never")
    _one_sentence(fleet.gg("person", "add", "x", "--ttl", "0"), 2,
                  "--ttl must be above 0 and at most 3650d, or never (got 0)")
    _one_sentence(fleet.gg("person", "token", "ada"), 2,
                  "say --rotate to mint a new token (the old one stops working at once)")
    assert [r["name"] for r in json.loads(fleet.gg("person", "list", "--json").stdout)] == ["owner", "ada"]


def test_removing_yourself_is_refused_with_a_sentence(fleet):
    token = json.loads(fleet.gg("person", "add", "ada", "--admin", "--json", check=True).stdout)["token"]
    done = _gg_as(fleet, token, "person", "remove", "ada")
    _one_sentence(done, 4, "you cannot remove yourself; ask another admin to do it")


def test_rotating_your_own_token_keeps_this_machine_signed_in(fleet):
    before = json.loads((fleet.config_dir / "config.json").read_text())["token"]
    done = fleet.gg("person", "token", "owner", "--rotate")
    assert done.returncode == 0, done.stderr
    after = json.loads((fleet.config_dir / "config.json").read_text())["token"]
    assert after != before and after in done.stdout
    assert fleet.gg("whoami").returncode == 0
    assert _refusal(fleet, before)[0] == 401


def test_logout_then_whoami_says_you_are_not_signed_in(fleet):
    assert fleet.gg("whoami").returncode == 0
    done = fleet.gg("logout")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("signed out owner; the token is gone from ")
    path = fleet.config_dir / "config.json"
    assert not path.exists() or (stat.S_IMODE(path.stat().st_mode) == 0o600
                                 and json.loads(path.read_text())["token"] is None)
    _one_sentence(fleet.gg("whoami"), 3, "not signed in: gg login --server URL --token-file FILE")
    assert fleet.gg("logout").stdout == "not signed in on this machine; nothing to forget\n"
