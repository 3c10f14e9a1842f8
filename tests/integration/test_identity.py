"""Identity you can check, with a real control plane and real runner processes: key
fingerprints as ssh-keygen prints them, names unique among live runners, richer rows,
ephemeral runners and enrolment tokens without a use limit."""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import pytest
from cryptography.hazmat.primitives import serialization

from gg import keys
from gg.domain.identity import key_fingerprint
from gg.launch import LocalRunner

from fleet_support import apply_and_clear, mint, profile_yaml
from support import auth, http_proof, new_key, wait_until


def ssh_keygen_fingerprint(state_dir, tmp_path) -> str:
    """``ssh-keygen -lf`` of the runner's own public key, written in OpenSSH format."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is absent (Debian package openssh-client; .ci/run installs it)")
    private = serialization.load_pem_private_key((state_dir / "key.pem").read_bytes(), None)
    path = tmp_path / "runner.pub"
    path.write_bytes(private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                       serialization.PublicFormat.OpenSSH))
    done = subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True,
                          check=True, timeout=30)
    return done.stdout.split()[1]


def second(fleet, name: str, tag: str, extra: list[str] | None = None) -> LocalRunner:
    """Another machine (its own state directory, so its own key) under ``name``."""
    runner = LocalRunner(name, fleet.url, fleet.root / f"state-{tag}", fleet.config_dir,
                         extra=extra or [], env=fleet.env, log=fleet.root / f"runner-{tag}.log")
    fleet.runners.append(runner.start())
    return runner


def log(fleet, tag: str) -> str:
    path = fleet.root / f"runner-{tag}.log"
    return path.read_text() if path.exists() else ""


def test_the_key_fingerprint_is_what_ssh_keygen_prints_and_finds_the_runner(fleet, tmp_path):
    web = fleet.runner("web")
    fleet.wait_online("web")
    expected = ssh_keygen_fingerprint(web.state_dir, tmp_path)
    assert f"its fingerprint is {expected}" in fleet.log("web")  # told on first start

    row = fleet.runner_row("web")
    assert row["public_key_fingerprint"] == expected
    shown = json.loads(fleet.gg("runner", "show", "web", "--json", check=True).stdout)
    assert shown["public_key_fingerprint"] == expected
    assert (row["os"], row["arch"]) == (shown["inventory"]["os"], shown["inventory"]["arch"])
    assert row["ephemeral"] is False and row["current_flights"] == []

    found = fleet.gg("runner", "show", "--fingerprint", expected)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith(f"runner web ({row['id']})")
    assert f"key        {expected}" in found.stdout
    by_json = json.loads(fleet.gg("runner", "show", "--fingerprint", expected.removeprefix(
        "SHA256:"), "--json", check=True).stdout)
    assert by_json["id"] == row["id"]
    answer = httpx.get(fleet.url + "/v1/runners-by-fingerprint", params={"fingerprint": expected},
                       headers=auth(fleet.server.owner_token()))
    assert answer.status_code == 200 and answer.json()["id"] == row["id"]

    other = "SHA256:" + "A" * 43
    missing = fleet.gg("runner", "show", "--fingerprint", other)
    assert missing.returncode != 0
    assert missing.stderr.strip() == f"no runner has the key fingerprint {other}"
    assert fleet.gg("runner", "show").returncode != 0  # neither a runner nor a fingerprint

    web.stop()  # a restart with the same key does not tell it again
    fleet.runners.remove(web)
    again = LocalRunner("web", fleet.url, web.state_dir, fleet.config_dir, env=fleet.env,
                        log=fleet.root / "runner-web-again.log").start()
    fleet.runners.append(again)
    fleet.wait_online("web")
    assert "fingerprint" not in (fleet.root / "runner-web-again.log").read_text()


def test_a_live_runners_name_is_refused_to_another_machine_until_it_is_forgotten(fleet):
    first = fleet.runner("web")
    fleet.wait_online("web")
    holder = fleet.runner_row("web")["id"]

    # Over HTTP: 409 with the one JSON error shape, naming the holder and the way out.
    owner = fleet.server.owner_token()
    with httpx.Client(base_url=fleet.url, headers=auth(owner)) as http:
        answer = http.post("/v1/runners", json={"name": "web", **http_proof(http, "register")})
    assert answer.status_code == 409
    sentence = (f"the runner name web is taken by live runner {holder}: pick another --name, "
                f"or free it with gg runner forget {holder} once that runner is offline")
    assert answer.json() == {"error": {"code": "runner_name_taken", "message": sentence}}

    # A second runner process under the same name: refused, and it says so in one sentence.
    clash = second(fleet, "web", "clash")
    assert clash.proc.wait(timeout=60) != 0
    assert f"registration refused: {sentence}" in log(fleet, "clash")
    assert [r["id"] for r in fleet.api().runners() if r["name"] == "web"] == [holder]

    # The holder re-registering with its own key under its own name is no collision.
    key = new_key()
    with httpx.Client(base_url=fleet.url, headers=auth(owner)) as http:
        mine = http.post("/v1/runners", json={"name": "solo", **http_proof(http, "register", key)})
        assert mine.status_code == 201, mine.text
        http.post("/v1/runner/check-in", json={},
                  headers=auth(mine.json()["credential"])).raise_for_status()
        again = http.post("/v1/runners", json={"name": "solo",
                                               **http_proof(http, "register", key)})
    assert again.status_code == 201, again.text
    assert again.json()["runner"]["id"] == mine.json()["runner"]["id"]

    # Offline, the holder no longer blocks; forgotten, the name is free for good.
    first.stop()
    wait_until(lambda: not fleet.runner_row("web")["online"], what="web offline")
    forgot = fleet.gg("runner", "forget", holder, "--yes")
    assert forgot.returncode == 0, forgot.stderr
    taken = second(fleet, "web", "taker")
    fleet.wait_online("web")
    rows = [r for r in fleet.api().runners() if r["name"] == "web"]
    assert len(rows) == 1 and rows[0]["id"] != holder and taken.alive()


def test_a_member_cannot_take_the_name_of_an_offline_runner_that_is_not_retired(fleet):
    """While the owner's runner ``web`` is switched off, a member registering another
    machine as ``web`` is refused (two rows would answer to the name); the owner's runner
    coming back registers as itself, and a member may re-register a machine of its own."""
    web = fleet.runner("web")
    fleet.wait_online("web")
    holder = fleet.runner_row("web")["id"]
    web.stop()
    wait_until(lambda: not fleet.runner_row("web")["online"], what="web offline")

    member = fleet.api().add_person("ada", False)["token"]
    with httpx.Client(base_url=fleet.url, headers=auth(member)) as http:
        taken = http.post("/v1/runners", json={"name": "web", **http_proof(http, "register")})
        assert taken.status_code == 409
        assert taken.json()["error"] == {
            "code": "runner_name_taken",
            "message": f"the runner name web belongs to runner {holder}, which is offline but "
                       f"not retired: pick another --name, or ask an admin to retire or "
                       f"forget {holder}"}
        assert [r["id"] for r in fleet.api().runners() if r["name"] == "web"] == [holder]

        # a member's own machine, switched off and set up again with a new key: its own name
        mine = http.post("/v1/runners", json={"name": "adas", **http_proof(http, "register")})
        assert mine.status_code == 201, mine.text
        again = http.post("/v1/runners", json={"name": "adas", **http_proof(http, "register")})
        assert again.status_code == 409  # not yet: the first is live (just registered)

    # the owner's own runner comes back under its name, as the same row
    fleet.runners.remove(web)
    back = LocalRunner("web", fleet.url, web.state_dir, fleet.config_dir, env=fleet.env,
                       log=fleet.root / "runner-web-back.log").start()
    fleet.runners.append(back)
    fleet.wait_online("web")
    assert [r["id"] for r in fleet.api().runners() if r["name"] == "web"] == [holder]


def test_an_ephemeral_runner_lands_one_flight_then_is_retired_and_exits(fleet, tmp_path):
    fleet.chart("ui")
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml())
    token = mint(fleet, "ui", "--ephemeral")
    listed = json.loads(fleet.gg("fleet", "tokens", "--json", check=True).stdout)
    assert listed[0]["ephemeral"] is True
    api = fleet.api()
    first = api.open_flight({"command": ["echo one"], "environment": "ui", "title": "first"})
    other = api.open_flight({"command": ["echo two"], "environment": "ui", "title": "second"})
    once = fleet.runner("once", extra=["--enrol", token])

    code = once.proc.wait(timeout=120)  # lands one flight, is retired, exits by itself
    assert code == 0, fleet.log("once")
    assert "this ephemeral runner took its one flight and was retired; it exits" in fleet.log("once")
    stages = {f: api.flight(f)["stage"] for f in (first["id"], other["id"])}
    assert sorted(stages.values()) == ["landed", "ready"], stages
    landed = next(f for f, stage in stages.items() if stage == "landed")
    assert [a["runner_name"] for a in api.flight(landed)["attempts"]] == ["once"]
    assert fleet.runner_row("once") is None  # retired: out of the list
    retired = api.events(kind="info:runner:retired")
    assert [(e["actor"], e["body"]["reason"]) for e in retired] == [
        ("control-plane", "ephemeral: its one flight ended")]
    private = serialization.load_pem_private_key((once.state_dir / "key.pem").read_bytes(), None)
    fingerprint = key_fingerprint(keys.public_text(private))  # a retired runner is found by it
    shown = json.loads(fleet.gg("runner", "show", "--fingerprint", fingerprint, "--json",
                                check=True).stdout)
    assert shown["id"] == retired[0]["runner_id"]
    assert shown["ephemeral"] is True and shown["state"] == "retired"


def test_a_token_of_uses_0_enrols_machine_after_machine(fleet, tmp_path):
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml())
    done = fleet.gg("fleet", "enroll", "ui", "--uses", "0")
    assert done.returncode == 0, done.stderr
    assert "any number of uses" in done.stdout
    token = done.stdout.splitlines()[1].strip()
    with httpx.Client(base_url=fleet.url) as http:
        for n in range(5):
            answer = http.post("/v1/enrol", headers=auth(token),
                               json={"name": f"m{n}", **http_proof(http, "enrol")})
            assert answer.status_code == 201, answer.text
    [listed] = json.loads(fleet.gg("fleet", "tokens", "--json", check=True).stdout)
    assert (listed["status"], listed["uses"], listed["uses_left"]) == ("active", 0, None)
    table = fleet.gg("fleet", "tokens", check=True).stdout
    assert "no limit" in table
    assert fleet.gg("fleet", "enroll", "ui", "--uses", "-1").returncode != 0


def test_a_runners_row_lists_the_flights_it_holds(fleet):
    fleet.runner("busy")
    fleet.wait_online("busy")
    api = fleet.api()
    flight = api.open_flight({"command": ["sleep 30"], "title": "long one"})
    row = wait_until(lambda: (lambda r: r if r["current_flights"] else None)(
        fleet.runner_row("busy")), what="the flight in the row")
    [held] = row["current_flights"]
    live = api.flight(flight["id"])
    assert held == {"id": flight["id"], "attempt": 1, "epoch": live["epoch"],
                    "started_at": held["started_at"], "title": "long one"}
    assert held["started_at"] is not None
    shown = fleet.gg("runner", "show", "busy", check=True).stdout
    assert f"    {flight['id']} attempt 1, epoch {live['epoch']}, taken" in shown
    api.cancel(flight["id"])

