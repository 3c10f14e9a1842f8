"""Secrets across real processes (docs/jobs.md): a real control plane, real runners over
loopback (as root: each flight sandboxed under its own uid), the real CLI.

A value goes in through ``gg secret set`` (stdin) and reaches only the flights allowed to use
it, in their environment; it is found nowhere on disk (the data dir with its SQLite file, the
runners' state dirs, every log), in no API answer, and output that echoes it reads ``***``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sqlite3
from pathlib import Path

from support import wait_until

# The flight prints its secret (split across two writes, so across output chunks), its base64
# form, a digest that proves which value it had, and who it ran as.
ECHO = ('half=${#KEY}; half=$((half / 2)); printf "key=%s" "$(printf %s "$KEY" | cut -c1-$half)";'
        ' sleep 0.3; printf "%s\\n" "$(printf %s "$KEY" | cut -c$((half + 1))-)";'
        ' printf "b64=%s\\n" "$(printf %s "$KEY" | base64 -w0)";'
        ' printf "sha=%s\\n" "$(printf %s "$KEY" | sha256sum | cut -c1-64)";'
        ' printf "token=%s uid=%s\\n" "$DEPLOY_TOKEN" "$(id -u)"')


def _value(tag: str) -> str:
    return f"{tag}-{secrets.token_hex(12)}"


def _landed(fleet, flight_id: str) -> dict:
    def ended():
        f = fleet.api().flight(flight_id)
        return f if f["stage"] in ("landed", "failed", "cancelled") else None
    f = wait_until(ended, 60, what=f"{flight_id} to end")
    assert f["stage"] == "landed", (f["stage"], f.get("ended_reason"))
    return f


def _output(flight: dict) -> str:
    return "".join(f["body"].get("text", "") for f in flight["facts"] if f["kind"] == "output")


def _fly(fleet, *args: str) -> str:
    opened = fleet.gg("fly", *args)
    assert opened.returncode == 0, opened.stderr
    return opened.stdout.strip()


def _refused(result, says: str) -> None:
    assert result.returncode != 0, result.stdout
    line = result.stderr.strip()
    assert says in line and "\n" not in line and "Traceback" not in line, line


def _found_on_disk(roots: list[Path], needles: list[bytes]) -> list[str]:
    """Every file under ``roots`` holding any of ``needles`` (bytes, whole files)."""
    hits = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                hits += [f"{path}: {n[:6]!r}..." for n in needles if n in data]
    return hits


def _sealed_rows(data_dir: Path) -> dict:
    with sqlite3.connect(data_dir / "gg.sqlite3") as db:
        return {(n, e): (k, bytes(s)) for n, e, k, s in
                db.execute("SELECT name, env, key_id, sealed FROM secrets")}


def test_a_secret_reaches_only_flights_allowed_it_masked_and_nowhere_on_disk(make_fleet):
    fleet = make_fleet()
    fleet.chart("prod", "true")
    fleet.chart("staging", "true")
    fleet.runner("rp", labels="environment=prod")
    fleet.runner("rs", labels="environment=staging")
    fleet.wait_online("rp", "rs")
    api = fleet.api()
    api.set_policy("rp", isolation="sandbox")  # as root: each flight under its own uid
    wait_until(lambda: "policy is now" in fleet.log("rp") and "sandbox" in fleet.log("rp"),
               timeout=30, what="the sandbox policy at rp")
    prod_key, token = _value("prodkey"), _value("deploytoken")

    said = fleet.gg("secret", "set", "PROD_KEY", "--env", "prod", input=prod_key + "\n")
    assert said.returncode == 0, said.stderr
    assert "only flights of environment prod receive it" in said.stdout
    said = fleet.gg("secret", "set", "DEPLOY_TOKEN", input=token)
    assert said.returncode == 0, said.stderr
    assert "every environment's flights may receive it" in said.stdout

    listed = json.loads(fleet.gg("secrets", "--json", check=True).stdout)
    assert {(s["name"], s["environment"]) for s in listed} == {("PROD_KEY", "prod"),
                                                               ("DEPLOY_TOKEN", None)}
    assert all(s["set_by"] for s in listed)

    # refused at open, one sentence each, and nothing opened
    before = len(api.flights())
    _refused(fleet.gg("fly", "--env", "staging", "--secret", "PROD_KEY", "--", "true"),
             "secret PROD_KEY is only for flights of environment prod")
    _refused(fleet.gg("fly", "--secret", "PROD_KEY", "--", "true"),
             "secret PROD_KEY is only for flights of environment prod")
    _refused(fleet.gg("fly", "--secret", "NO_SUCH", "--", "true"), "there is no secret NO_SUCH")
    _refused(fleet.gg("fly", "--secret", "1BAD", "--", "true"), "is not a secret's name")
    _refused(fleet.gg("fly", "--secret", "PROD_KEY=GG_FLIGHT", "--", "true"),
             "may not start with GG_")
    assert len(api.flights()) == before

    # delivered, as root each flight sandboxed under its own uid; echoed output reads ***
    fid = _fly(fleet, "--env", "prod", "--secret", "PROD_KEY=KEY", "--secret", "DEPLOY_TOKEN",
               "--", "sh", "-c", ECHO)
    flight = _landed(fleet, fid)
    out = _output(flight)
    assert "key=***\n" in out and "b64=***\n" in out and "token=*** uid=" in out, out
    assert f"sha={hashlib.sha256(prod_key.encode()).hexdigest()}" in out
    uid = out.split("uid=")[1].split()[0]
    assert uid != "0", out  # the flight ran as its own identity, not as the root runner
    assert prod_key not in out and token not in out

    # names only: gg show, --json, the events, the console's page
    shown = fleet.gg("show", fid, check=True).stdout
    assert "secrets   PROD_KEY as $KEY, DEPLOY_TOKEN" in shown
    assert flight["secrets"] == [{"name": "PROD_KEY", "envvar": "KEY"},
                                 {"name": "DEPLOY_TOKEN", "envvar": "DEPLOY_TOKEN"}]
    delivered = [e for e in api.events(kind="info:secret:delivered") if e["flight_id"] == fid]
    assert len(delivered) == 1
    body = delivered[0]["body"]
    assert body["names"] == ["PROD_KEY", "DEPLOY_TOKEN"] and body["epoch"] == flight["epoch"]
    assert delivered[0]["runner_id"] == flight["lease_runner"]
    answers = json.dumps([fleet.gg("show", fid, "--json", check=True).stdout, listed,
                          api.events(limit=10000), api.flights(), _output(flight)])
    for value in (prod_key, token):
        assert value not in answers
        assert base64.b64encode(value.encode()).decode().rstrip("=") not in answers

    # the value is on no disk: the data dir (the SQLite file), state dirs, every log
    needles = [v.encode() for v in (prod_key, token)]
    needles += [base64.b64encode(n) for n in needles]
    assert _found_on_disk([fleet.root], needles) == []

    # a new value is used by flights granted after it is set
    newer = _value("prodkey2")
    assert fleet.gg("secret", "set", "PROD_KEY", "--env", "prod", input=newer).returncode == 0
    fid = _fly(fleet, "--env", "prod", "--secret", "PROD_KEY=KEY", "--secret", "DEPLOY_TOKEN",
               "--", "sh", "-c", ECHO)
    assert f"sha={hashlib.sha256(newer.encode()).hexdigest()}" in _output(_landed(fleet, fid))

    if "GG_DATABASE_URL" in fleet.env:
        return  # the rest reads the SQLite file
    # rotate-key: a new key, every value re-sealed (other ciphertext), still readable
    data_dir = fleet.server.data_dir
    sealed = _sealed_rows(data_dir)
    key_before = (data_dir / "secrets.key").read_bytes()
    rotated = fleet.gg("server", "rotate-key", "--data-dir", str(data_dir))
    assert rotated.returncode == 0, rotated.stderr
    assert "2 secrets re-sealed" in rotated.stdout
    after = _sealed_rows(data_dir)
    assert after.keys() == sealed.keys()
    assert all(after[k][0] != sealed[k][0] and after[k][1] != sealed[k][1] for k in after)
    assert (data_dir / "secrets.key.old").read_bytes() == key_before
    assert (data_dir / "secrets.key").stat().st_mode & 0o077 == 0
    fid = _fly(fleet, "--env", "prod", "--secret", "PROD_KEY=KEY", "--secret", "DEPLOY_TOKEN",
               "--", "sh", "-c", ECHO)
    out = _output(_landed(fleet, fid))
    assert f"sha={hashlib.sha256(newer.encode()).hexdigest()}" in out and "token=***" in out
    needles.append(newer.encode())
    assert _found_on_disk([fleet.root], needles) == []


def test_bad_secret_input_gets_one_sentence_and_changes_nothing(make_fleet, tmp_path):
    fleet = make_fleet()
    value = _value("argv")
    _refused(fleet.gg("secret", "set", "ON_ARGV", value),
             "never taken from the command line")
    on_argv = fleet.gg("secret", "set", "ON_ARGV", value)
    assert value not in on_argv.stderr + on_argv.stdout  # not even echoed back
    _refused(fleet.gg("secret", "set", "EMPTY", input=""), "a secret's value is empty")
    _refused(fleet.gg("secret", "set", "EMPTY", input="\n"), "a secret's value is empty")
    _refused(fleet.gg("secret", "set", "bad-name", input="v"), "is not a secret's name")
    _refused(fleet.gg("secret", "set", "X", "--env", "nowhere", input="v"),
             "there is no environment nowhere")
    _refused(fleet.gg("secret", "remove", "NOT_SET"), "there is no secret NOT_SET")
    missing = tmp_path / "missing"
    _refused(fleet.gg("secret", "set", "X", "--from-file", str(missing)), "cannot read")
    assert fleet.api().secrets() == []
    assert fleet.api().events(kind="info:secret:") == []

    # a member may list names and use a secret for every environment, but not set one
    member = fleet.api().add_person("mia", False)["token"]
    _refused(fleet.gg("secret", "set", "X", input="v", token=member), "only an admin")
    from_file = tmp_path / "value"
    from_file.write_text("file-value\n")
    assert fleet.gg("secret", "set", "X", "--from-file", str(from_file)).returncode == 0
    assert [s["name"] for s in json.loads(
        fleet.gg("secrets", "--json", token=member, check=True).stdout)] == ["X"]
    # a secret removed between the open and the grant: the runner fails the flight unstarted
    waiting = _fly(fleet, "--secret", "X", "--", "sh", "-c", "echo started")
    removed = fleet.gg("secret", "remove", "X")
    assert removed.returncode == 0 and "secret X for every environment removed" in removed.stdout
    assert fleet.api().secrets() == []
    fleet.runner("r1")
    ended = wait_until(lambda: (lambda f: f if f["stage"] == "failed" else None)(
        fleet.api().flight(waiting)), 60, what="the flight to fail")
    assert ended["ended_reason"].startswith("secret X cannot be delivered: there is no secret X")
    assert "started" not in _output(ended)
