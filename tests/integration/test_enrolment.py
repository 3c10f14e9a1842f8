"""Enrolment end to end with real processes: profiles, tokens, enrolled runners, credentials
over a real HTTP git server, pushes to bare repositories, and maintenance flights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from gg.launch import LocalRunner, gg_argv

from fleet_support import apply_and_clear, mint, profile_yaml, write_profile
from support import FAST, Fleet, http_proof, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "runner"))
from git_http_server import IDENTITY, GitHttpServer  # noqa: E402


def on_machine(fleet, state_dir: Path, *args: str, input: str | None = None):
    """Run ``gg`` as on the runner's machine: its state directory, nobody signed in."""
    env = {**os.environ, **fleet.env, "GG_STATE_DIR": str(state_dir),
           "GG_CONFIG_DIR": str(fleet.root / "machine-config")}
    return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True,
                          input=input, timeout=60)


def runner_row(fleet, name: str) -> dict:
    return {r["name"]: r for r in fleet.api().runners()}.get(name) or {}


def flight_when(api, flight_id: str, stage: str, timeout: float = 40.0) -> dict:
    return wait_until(lambda: (lambda f: f if f["stage"] == stage else None)(api.flight(flight_id)),
                      timeout=timeout, what=f"flight {flight_id} to be {stage}")


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={**os.environ, **IDENTITY}, check=True)
    return done.stdout


def bare_repo(path: Path) -> Path:
    """A bare repository with one commit on main."""
    git("init", "--quiet", "--bare", "--initial-branch=main", str(path))
    seed = path.with_name(path.name + ".seed")
    git("init", "--quiet", "--initial-branch=main", str(seed))
    (seed / "README.md").write_text("seed\n")
    git("add", "README.md", cwd=seed)
    git("commit", "--quiet", "-m", "seed", cwd=seed)
    git("push", "--quiet", str(path), "main", cwd=seed)
    return path


# -- profiles from the command line ------------------------------------------------------------


def test_a_profile_with_an_unknown_key_is_refused_with_file_line_and_key(fleet, tmp_path):
    airspace = tmp_path / "airspace"
    path = write_profile(airspace, "ui", profile_yaml() + "colour: blue\n")
    done = fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace))
    assert done.returncode != 0
    assert done.stderr.startswith(f"{path}:12: colour: is not a known key"), done.stderr
    listed = fleet.gg("fleet", "profiles", "--json")
    assert json.loads(listed.stdout) == []
    checked = fleet.gg("airspace", "check", "--airspace", str(airspace))
    assert checked.returncode != 0 and "colour: is not a known key" in checked.stderr


def test_apply_prints_what_applies_now_and_what_waits_behind_which_gate(fleet, tmp_path):
    airspace = tmp_path / "airspace"
    apply_and_clear(fleet, airspace, "ui", profile_yaml(hosts=["old.example.com"]))
    write_profile(airspace, "ui", profile_yaml(hosts=["new.example.com"]))
    done = fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace))
    assert done.returncode == 0, done.stderr
    gate = json.loads(fleet.gg("gates", "--json").stdout)[0]["id"]
    assert done.stdout.splitlines() == [
        "profile ui: version 2 applied",
        "  applies now:",
        "    removes repository host old.example.com (applies now)",
        f"  waits behind gate {gate} (an admin clears it: gg gate clear {gate}):",
        "    adds repository host new.example.com (opens a gate)",
    ]
    [row] = json.loads(fleet.gg("fleet", "profiles", "--json").stdout)
    assert (row["applied_version"], row["in_force_version"], row["narrowed_by"]) == (2, 1, 2)
    assert row["in_force"]["repository_hosts"] == []
    assert "v1 + narrowings of v2" in fleet.gg("fleet", "profiles").stdout


# -- tokens -----------------------------------------------------------------------------------


def test_fifty_machines_racing_for_a_one_use_token_give_exactly_one_runner(fleet, tmp_path):
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml())
    token = mint(fleet, "ui", "--uses", "1")
    barrier = threading.Barrier(50)
    answers: list = [None] * 50

    def use(i: int) -> None:
        with httpx.Client(base_url=fleet.url, timeout=60) as http:
            body = {"name": f"racer-{i}", **http_proof(http, "enrol")}
            barrier.wait()
            answers[i] = http.post("/v1/enrol", json=body,
                                   headers={"authorization": f"Bearer {token}"})

    threads = [threading.Thread(target=use, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    codes = sorted(a.status_code for a in answers)
    assert codes == [201] + [401] * 49
    assert len({a.text for a in answers if a.status_code == 401}) == 1
    assert len(fleet.api().runners()) == 1
    [listed] = json.loads(fleet.gg("fleet", "tokens", "--json").stdout)
    assert listed["status"] == "exhausted" and listed["uses_left"] == 0


# -- enrolled runners --------------------------------------------------------------------------


def test_an_enrolled_runner_advertises_its_environment_only_once_its_gate_clears(fleet, tmp_path):
    fleet.chart("ui")  # flights may use environment ui
    airspace = tmp_path / "airspace"
    write_profile(airspace, "ui", profile_yaml())
    applied = json.loads(fleet.gg("fleet", "apply", "ui", "--airspace", str(airspace),
                                  "--json").stdout)
    token = mint(fleet, "ui")
    machine = fleet.runner("m1", extra=["--enrol", token])
    fleet.wait_online("m1")
    row = runner_row(fleet, "m1")
    assert row["kind"] == "enrolled" and row["profile"] == "ui" and row["labels"] == {}
    api = fleet.api()
    flight = api.open_flight({"command": ["echo on $GG_FLIGHT"], "environment": "ui"})
    assert api.flight(flight["id"])["waiting"] == "waiting: no runner advertises environment=ui"

    cleared = fleet.gg("gate", "clear", applied["gate"]["id"])
    assert cleared.returncode == 0, cleared.stderr
    wait_until(lambda: runner_row(fleet, "m1")["labels"] == {"environment": "ui"},
               what="the label to appear")
    landed = flight_when(api, flight["id"], "landed")
    assert landed["attempts"][0]["runner_name"] == "m1"
    enrolled = api.events(kind="info:runner:enrolled")
    assert [e["runner_id"] for e in enrolled] == [row["id"]]

    # The token was spent once; the machine never needs it again, and nobody signed in.
    machine.stop()
    fleet.runners.remove(machine)
    restarted = LocalRunner("m1", fleet.url, machine.state_dir, fleet.root / "nobody",
                            env=fleet.env, log=fleet.root / "runner-m1.log").start()
    fleet.runners.append(restarted)
    wait_until(lambda: runner_row(fleet, "m1").get("online"), what="m1 back without a token")
    assert runner_row(fleet, "m1")["id"] == row["id"]
    assert len(api.events(kind="info:runner:enrolled")) == 1


def test_a_registered_runner_runs_an_agent_from_its_own_configuration(fleet, tmp_path):
    state = tmp_path / "state-agents"
    state.mkdir(mode=0o700)
    (state / "agents.toml").write_text(
        '[agents.echoer]\ncommand = ["/bin/echo", "agent says", "{command}"]\n')
    fleet.runner("agents", extra=[], env={"GG_STATE_DIR": str(state)})
    fleet.wait_online("agents")
    api = fleet.api()
    flight = api.open_flight({"command": ["hello", "world"], "agent": "echoer"})
    landed = flight_when(api, flight["id"], "landed")
    output = "".join(f["body"]["text"] for f in landed["facts"] if f["kind"] == "output")
    assert output == "agent says hello world\n"
    unknown = api.open_flight({"command": ["x"], "agent": "nope"})
    waiting = api.flight(unknown["id"])["waiting"]
    assert waiting == "waiting: no runner can take it: agents cannot because it does not have agent nope"


# -- credentials and repositories ---------------------------------------------------------------


def test_a_credential_reaches_git_clone_over_http_and_never_the_control_plane(fleet, tmp_path):
    fleet.chart("ui")  # flights may use environment ui
    secret = "s3cret-" + os.urandom(8).hex()
    airspace = tmp_path / "airspace"
    with GitHttpServer(tmp_path / "git", user="robot", password=secret) as server:
        server.create_repo("acme/widgets.git", with_commit=True)
        url = server.url("acme/widgets.git")
        host = f"127.0.0.1:{server.port}"
        slug = f"{host}/acme/widgets"
        apply_and_clear(fleet, airspace, "ui", profile_yaml(hosts=[host]))
        api = fleet.api()
        flight = api.open_flight({"command": ["cat README.md; git log --format=%s"],
                                  "repo": url, "environment": "ui"})
        assert api.flight(flight["id"])["waiting"] == (
            f"waiting: no credential is registered for repository {slug}")
        machine = fleet.runner("m1", extra=["--enrol", mint(fleet, "ui")])
        fleet.wait_online("m1")
        secret_file = tmp_path / "secret.txt"
        secret_file.write_text(f"robot:{secret}\n")
        added = on_machine(fleet, machine.state_dir, "credential", "add", "--repo", url,
                           "--from-file", str(secret_file))
        assert added.returncode == 0, added.stderr
        secret_file.unlink()
        landed = flight_when(api, flight["id"], "landed")
        output = "".join(f["body"]["text"] for f in landed["facts"] if f["kind"] == "output")
        assert output == "widgets\nfirst commit\n"
        assert "robot" in server.seen_users
        listed = json.loads(fleet.gg("credentials", "--json").stdout)
        assert [(r["runner_name"], r["kind"], r["ref"]) for r in listed] == [("m1", "repo", slug)]
    data = fleet.root / "data"
    files = [data / "gg.sqlite3", data / "gg.sqlite3-wal", fleet.root / "server.log",
             fleet.root / "runner-m1.log"]
    assert (data / "gg.sqlite3-wal").exists()  # looked at while the server runs...
    for path in files:
        if path.exists():
            assert secret.encode() not in path.read_bytes(), path
    fleet.server.stop()  # ...and once everything was checkpointed into the database
    for path in files:
        if path.exists():
            assert secret.encode() not in path.read_bytes(), path
    fleet.server.start()


def test_commits_are_pushed_to_an_allowed_destination_and_refused_for_another(fleet, tmp_path):
    fleet.chart("ui")  # flights may use environment ui
    allowed = bare_repo(tmp_path / "allowed.git")
    other = bare_repo(tmp_path / "other.git")
    apply_and_clear(fleet, tmp_path / "airspace", "ui",
                    profile_yaml(destinations=[str(allowed)]))
    fleet.runner("m1", extra=["--enrol", mint(fleet, "ui")])
    fleet.wait_online("m1")
    api = fleet.api()
    work = "echo change >> README.md && git -c user.name=Agent -c user.email=agent@example.test " \
           "commit --quiet -am 'agent work'"
    pushed = api.open_flight({"command": [work], "repo": str(allowed),
                              "environment": "ui"})
    refused = api.open_flight({"command": [work], "repo": f"file://{other}",
                               "environment": "ui"})
    pushed = flight_when(api, pushed["id"], "landed")
    refused = flight_when(api, refused["id"], "landed")

    commits = [f["body"] for f in pushed["facts"] if f["kind"] == "commit"]
    assert [c["subject"] for c in commits] == ["agent work"]
    [fact] = [f["body"] for f in pushed["facts"] if f["kind"] == "pushed"]
    assert fact["destination"] == str(allowed)[: -len(".git")]
    assert fact["branch"] == f"gg/{pushed['id']}"
    assert git("--git-dir", str(allowed), "rev-parse", f"refs/heads/gg/{pushed['id']}").strip() \
        == commits[0]["sha"] == fact["head"]

    assert [f["body"]["subject"] for f in refused["facts"] if f["kind"] == "commit"] == ["agent work"]
    assert not [f for f in refused["facts"] if f["kind"] == "pushed"]
    notes = [f["body"] for f in refused["facts"] if f["kind"] == "note" and f["body"].get("refused")]
    assert notes and "is not among fleet profile ui's destinations" in notes[0]["text"]
    assert "gg/" not in git("--git-dir", str(other), "for-each-ref")


# -- maintenance ---------------------------------------------------------------------------------


@pytest.fixture
def quick_maintenance(tmp_path):
    root = tmp_path / "quick"
    root.mkdir()
    fleet = Fleet(root, {**FAST, "GG_MAINTENANCE_CHECK_INTERVAL": "1"}).start()
    try:
        yield fleet
    finally:
        fleet.stop()


def test_a_maintenance_flight_lands_when_gg_credential_add_confirms_the_item(quick_maintenance,
                                                                            tmp_path):
    fleet = quick_maintenance
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml(credentials=["deploy-token"]))
    machine = fleet.runner("m1", extra=["--enrol", mint(fleet, "ui")])
    fleet.wait_online("m1")

    def maintenance_flight():
        rows = json.loads(fleet.gg("flights", "--json").stdout)
        return next((f for f in rows if f["kind"] == "maintenance"), None)

    flight = wait_until(maintenance_flight, timeout=30, what="a maintenance flight")
    assert flight["stage"] == "gated" and flight["runner_target"] == runner_row(fleet, "m1")["id"]
    [gate] = json.loads(fleet.gg("gates", "--json").stdout)
    assert gate["kind"] == "maintenance" and gate["clearer"] == "machine"
    assert gate["guards"] == "credential deploy-token held by runner m1"
    refused = fleet.gg("gate", "clear", gate["id"])
    assert refused.returncode == 4 and "only be cleared by the machine" in refused.stderr

    added = on_machine(fleet, machine.state_dir, "credential", "add", "--name", "deploy-token",
                       input="t0ken-value\n")
    assert added.returncode == 0, added.stderr
    landed = flight_when(fleet.api(), flight["id"], "landed", timeout=30)
    assert landed["outcome"] == "landed"
    assert json.loads(fleet.gg("gates", "--json").stdout) == []
    cleared = fleet.api().events(kind="info:gate:cleared")
    assert [e["body"]["gate"] for e in cleared if e["body"]["gate_kind"] == "maintenance"] == [
        gate["id"]]
    # The machine's next check finds nothing missing, and no new maintenance flight appears.
    wait_until(lambda: "maintenance: everything profile ui needs is here" in fleet.log("m1"),
               timeout=30, what="a clean maintenance check")
    flights = [f for f in json.loads(fleet.gg("flights", "--json").stdout)
               if f["kind"] == "maintenance"]
    assert [f["stage"] for f in flights] == ["landed"]


def test_a_profile_change_reaches_an_idle_enrolled_runner_without_a_restart(fleet, tmp_path):
    """Its parked claim is its only check-in; the change is pushed down it, and the runner's
    maintenance checks at once (the check interval stays the default five minutes)."""
    airspace = tmp_path / "airspace"
    apply_and_clear(fleet, airspace, "ui", profile_yaml())
    fleet.runner("m1", extra=["--enrol", mint(fleet, "ui")])
    fleet.wait_online("m1")
    wait_until(lambda: "maintenance: everything profile ui needs is here" in fleet.log("m1"),
               timeout=30, what="the first maintenance check")
    apply_and_clear(fleet, airspace, "ui", profile_yaml(credentials=["deploy-token"]))

    def maintenance_flight():
        rows = json.loads(fleet.gg("flights", "--json").stdout)
        return next((f for f in rows if f["kind"] == "maintenance"), None)

    flight = wait_until(maintenance_flight, timeout=60,
                        what="the idle runner to hear its new profile and check at once")
    assert flight["runner_target"] == runner_row(fleet, "m1")["id"]
