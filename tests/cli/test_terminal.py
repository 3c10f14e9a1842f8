"""The operator's terminal is live and honest (issue 16, point 3): whole values when piped,
colours only on a terminal, a version and completion, a scheme-less --server, the waiting
sentence at once under gg fly --wait, a runner that says when it cannot reach the server,
and --watch listings, against a real control plane and real runners."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pexpect
import pytest

from gg.launch import LocalRunner, free_port, gg_argv

from fleet_support import apply_and_clear, profile_yaml
from support import wait_until

LONG = "runner-with-a-name-longer-than-an-eighty-column-terminal-shows"


def spawn(fleet, *args: str, env: dict | None = None, cols: int = 200) -> pexpect.spawn:
    """The real CLI on a pseudo-terminal, as an operator types it."""
    full = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
            "GG_SERVER": fleet.url, "TERM": "xterm-256color", **(env or {})}
    full.pop("NO_COLOR", None) if "NO_COLOR" not in (env or {}) else None
    argv = gg_argv(*args)
    return pexpect.spawn(argv[0], argv[1:], env=full, encoding="utf-8", timeout=90,
                         dimensions=(50, cols))


@pytest.mark.timeout(600)  # many real commands: slow on a loaded machine
def test_piped_listings_print_every_value_whole_one_row_a_line(fleet, tmp_path):
    fleet.runner(LONG, labels="team=" + "x" * 60)
    fleet.wait_online(LONG)
    runner_id = fleet.runner_row(LONG)["id"]
    apply_and_clear(fleet, tmp_path / "airspace", "ui", profile_yaml("ui"))
    minted = fleet.gg("fleet", "enroll", "ui", "--json", check=True)
    done = fleet.gg("runners")
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if LONG in line)
    assert runner_id in row and "online" in row and "team=" + "x" * 60 in row
    assert "…" not in done.stdout and "\x1b" not in done.stdout
    tokens = fleet.gg("fleet", "tokens").stdout
    fingerprint = __import__("json").loads(minted.stdout)["fingerprint"]
    assert fingerprint in tokens and "…" not in tokens
    assert fleet.gg("fleet", "revoke", fingerprint).returncode == 0


def test_states_are_coloured_on_a_terminal_and_never_with_no_color(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    coloured = spawn(fleet, "runners")
    coloured.expect(pexpect.EOF)
    assert re.search(r"\x1b\[[0-9;]*3[0-9]m", coloured.before), coloured.before
    plain = spawn(fleet, "runners", env={"NO_COLOR": "1"})
    plain.expect(pexpect.EOF)
    assert "r1" in plain.before and not re.search(r"\x1b\[[0-9;]*3[0-9]m", plain.before)


def test_version_completion_and_a_server_without_a_scheme(fleet):
    version = fleet.gg("--version")
    assert version.returncode == 0 and re.match(r"gg \d+\.\d+\.\d+ ", version.stdout)
    # the shell is found among the process's ancestors: run it from bash, as a person would
    line = " ".join(shlex.quote(a) for a in gg_argv("--show-completion")) + "; true"
    script = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "SHELL": "/bin/bash"})
    assert script.returncode == 0 and "_GG_COMPLETE" in script.stdout, script.stderr
    env = {**os.environ, "_GG_COMPLETE": "complete_bash", "COMP_WORDS": "gg fl",
           "COMP_CWORD": "1"}
    words = subprocess.run(gg_argv(), env=env, capture_output=True, text=True, timeout=60)
    assert {"fly", "flights", "fleet"} <= set(words.stdout.split())
    bare = fleet.url.removeprefix("http://")
    done = fleet.gg("--server", bare, "runners")
    assert done.returncode == 0, done.stderr
    assert f"note: {bare} has no scheme; using http://{bare}" in done.stderr


@pytest.mark.timeout(600)
def test_fly_wait_says_why_it_waits_at_once_and_on_every_change_then_why_it_failed(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    assert fleet.gg("runner", "cordon", "r1").returncode == 0
    fleet.runners[0].stop()
    wait_until(lambda: not fleet.runner_row("r1")["online"], what="r1 offline")
    fly = spawn(fleet, "fly", "--runner", "r1", "--wait", "--", "sh", "-c", "echo hello; exit 3")
    fly.expect("opened")
    fly.expect("waiting: it was sent to runner r1, which is not checking in")
    fleet.runner("r1")  # the same machine again: online, still cordoned
    fly.expect("waiting: it was sent to runner r1, which is cordoned")
    assert fleet.gg("runner", "resume", "r1").returncode == 0
    fly.expect("hello")
    fly.expect(r"failed: it failed: the command exited with 3")
    fly.expect(r"remedy: read its output: gg show ")
    fly.expect(pexpect.EOF)
    fly.close()
    assert fly.exitstatus == 3


@pytest.mark.timeout(600)
def test_a_runner_says_at_once_that_it_cannot_reach_the_server_and_once_per_change(fleet):
    nowhere = LocalRunner("lost", f"http://127.0.0.1:{free_port()}", fleet.root / "state-lost",
                          fleet.config_dir, env=fleet.env, log=fleet.root / "runner-lost.log")
    fleet.runners.append(nowhere.start())
    wait_until(lambda: "cannot reach the control plane" in fleet.log("lost"),
               what="the runner saying it cannot reach the control plane")

    fleet.runner("r1")
    fleet.wait_online("r1")
    fleet.server.stop()
    sent = fleet.root / "state-r1" / "sent.jsonl"
    wait_until(lambda: "cannot reach the control plane" in fleet.log("r1"), what="the failure")
    before = len(sent.read_text().splitlines())
    wait_until(lambda: len(sent.read_text().splitlines()) >= before + 4,
               what="several retries while the server is away")
    failures = [line for line in fleet.log("r1").splitlines() if "cannot reach" in line]
    assert len(failures) == 1, failures
    assert re.search(r"retrying in \d+\.\ds", failures[0])
    fleet.server.start()
    wait_until(lambda: "again after" in fleet.log("r1"), what="the runner saying it is back")
    assert re.search(r"reached the control plane at \S+ again after \d+ failed attempts?",
                     fleet.log("r1"))


@pytest.mark.timeout(600)
def test_flights_runners_and_pools_watch_until_q_or_ctrl_c(fleet):
    watch = spawn(fleet, "flights", "--watch")
    watch.expect("no flights")
    flight = fleet.api().open_flight({"command": ["true"], "labels": {"nobody": "here"}})
    watch.expect(flight["id"])
    watch.expect("nobody=here")  # the waiting sentence (wrapped to the terminal's width)
    watch.send("q")
    watch.expect(pexpect.EOF)
    watch.close()
    assert watch.exitstatus == 0

    runners = spawn(fleet, "runners", "--watch")
    runners.expect("no runners yet")
    fleet.runner("r1")
    runners.expect("r1")
    runners.sendintr()
    runners.expect(pexpect.EOF)
    runners.close()
    assert runners.exitstatus in (0, 130)

    pools = spawn(fleet, "pools", "--watch")
    pools.expect("no pools")
    pools.send("q")
    pools.expect(pexpect.EOF)
    pools.close()
    assert pools.exitstatus == 0


def test_watch_refuses_a_pipe_with_a_sentence(fleet):
    done = fleet.gg("flights", "--watch")
    assert done.returncode == 2 and "--watch draws on a terminal" in done.stderr


def test_retire_asks_on_a_terminal_and_a_script_needs_yes(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    piped = fleet.gg("runner", "retire", "r1")
    assert piped.returncode == 2
    assert piped.stderr == ("retire cannot be undone and stdin is not a terminal to ask on: "
                            "pass --yes to retire without asking\n")
    asked = spawn(fleet, "runner", "retire", "r1")
    asked.expect(r"retire runner r1\? .* \[y/N\] ")
    asked.sendline("n")
    asked.expect(pexpect.EOF)
    asked.close()
    assert asked.exitstatus == 1 and fleet.runner_row("r1") is not None
    yes = spawn(fleet, "runner", "retire", "r1")
    yes.expect(r"\[y/N\] ")
    yes.sendline("y")
    yes.expect("is retired")
    yes.expect(pexpect.EOF)
    yes.close()
    assert yes.exitstatus == 0 and fleet.runner_row("r1") is None


def test_events_name_runners_and_print_bodies_as_words(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    assert fleet.gg("runner", "policy", "r1", "--workers", "1").returncode == 0
    done = fleet.gg("events")
    assert done.returncode == 0, done.stderr
    registered = next(line for line in done.stdout.splitlines() if "runner:registered" in line)
    assert "runner r1" in registered
    assert "{" not in done.stdout and "'" not in done.stdout, done.stdout
