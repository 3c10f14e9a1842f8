"""A console to a machine (docs/console.md), end to end: a real server, a real runner process,
and ``gg console`` driven through a pseudo-terminal (pexpect) as a person would type."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pexpect
import psutil

from gg.launch import gg_argv

from support import gone, wait_until

PROMPT = "gg-console> "
STEP = 20  # seconds one expected answer may take on a loaded machine


def spawn(fleet, *args: str, token: str | None = None, rows: int = 30, cols: int = 100):
    env = {**os.environ, **fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir),
           "GG_SERVER": fleet.url, "TERM": "xterm"}
    if token is not None:
        env["GG_TOKEN"] = token
    argv = gg_argv("console", *args)
    return pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(rows, cols), timeout=STEP,
                         encoding="utf-8", codec_errors="replace")


def type_line(child, line: str) -> None:
    child.send(line + "\r")


def set_prompt(child) -> None:
    """Make the remote shell's prompt PROMPT and wait for it. The line typed is quoted in two
    pieces, so its echo (the local terminal's while the console waits, the remote one's
    after) never reads as PROMPT: only the shell's own prompt does, once it has joined."""
    half = len(PROMPT) // 2
    type_line(child, f"PS1='{PROMPT[:half]}''{PROMPT[half:]}'")
    child.expect_exact(PROMPT)


def sandboxed(fleet, name: str) -> None:
    """Put runner ``name`` under the sandbox policy and wait until it applies it."""
    fleet.api().set_policy(name, isolation="sandbox")
    wait_until(lambda: "policy is now" in fleet.log(name) and "sandbox" in fleet.log(name),
               timeout=30, what="the runner to apply the sandbox policy")


def console_events(fleet) -> list[dict]:
    return [e for e in fleet.api().events() if e["kind"].startswith("info:console:")]


def test_a_console_runs_a_shell_on_the_runners_pty_in_its_sandbox(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    sandboxed(fleet, "r1")
    state = fleet.root / "state-r1"
    child = spawn(fleet, "r1", "--", "sh")
    try:
        child.expect("waiting: runner r1")
        if os.geteuid() == 0:  # a console to a root runner itself says whom it runs as
            child.expect_exact("this console on runner r1 runs as host root (uid 0), in the "
                               "runner's sandbox: no capability, /proc/sys read-only; it is "
                               "recorded in the events (info:console:opened)")
        set_prompt(child)
        # a command and its output
        type_line(child, "echo answer-$((6*7))")
        child.expect_exact("answer-42")
        child.expect_exact(PROMPT)
        # the sandbox a flight gets: no capabilities, the runner's key out of sight, a fresh
        # workspace of its own
        type_line(child, "grep CapEff /proc/self/status")
        child.expect(r"CapEff:\s+0000000000000000")
        child.expect_exact(PROMPT)
        type_line(child, f"cat {state}/key.pem >/dev/null 2>&1; echo key-$?")
        child.expect_exact("key-1")
        child.expect_exact(PROMPT)
        type_line(child, "pwd")
        child.expect(r"(/\S*console-c_\w+)")
        workspace = Path(child.match.group(1).strip())
        child.expect_exact(PROMPT)
        assert workspace.is_dir() and str(workspace).startswith(str(state))
        # the window size, and a resize passed through
        type_line(child, "stty size")
        child.expect_exact("30 100")
        child.expect_exact(PROMPT)
        child.setwinsize(40, 120)

        def resized():
            type_line(child, "stty size")
            index = child.expect_exact(["40 120", "30 100"])
            child.expect_exact(PROMPT)
            return index == 0
        wait_until(resized, timeout=STEP, interval=0.2, what="the resize to reach the runner")
        # Ctrl-C interrupts the foreground command, not the console
        type_line(child, "sleep 3017")
        sleeping = wait_until(lambda: [p for p in psutil.process_iter(["cmdline"])
                                       if p.info["cmdline"] == ["sleep", "3017"]],
                              timeout=STEP, what="the sleep to start")
        child.sendintr()
        child.expect_exact(PROMPT)
        type_line(child, "echo status-$?")
        child.expect_exact("status-130")
        child.expect_exact(PROMPT)
        assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in sleeping)
        # the remote command's exit status is gg's
        type_line(child, "exit 7")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 7, child.before
    wait_until(lambda: not workspace.exists(), timeout=STEP, what="the workspace to be removed")
    events = wait_until(lambda: (lambda es: es if len(es) == 2 else None)(console_events(fleet)),
                        timeout=STEP, what="the console's events")
    by_kind = {e["kind"]: e for e in events}
    opened, closed = by_kind["info:console:opened"], by_kind["info:console:closed"]
    for event in (opened, closed):
        assert event["actor"] == "owner" and event["body"]["person"] == "owner"
        assert event["body"]["runner"] == "r1" and event["runner_name"] == "r1"
    assert closed["body"]["exit_code"] == 7 and closed["body"]["joined"] is True
    assert closed["body"]["seconds"] > 0
    assert opened["body"]["identity"] == ("host root" if os.geteuid() == 0
                                          else "the runner's user")


def test_who_may_open_a_console_is_decided_before_the_runner_hears_of_it(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    mia = api.add_person("mia", False)["token"]
    ada = api.add_person("ada", True)["token"]
    sam = api.add_person("sam", False)["token"]

    def refused(token: str, sentence: str) -> None:
        done = fleet.gg("console", "r1", "--", "true", token=token, input="")
        assert done.returncode == 4, (done.returncode, done.stderr)
        assert sentence in done.stderr and "Traceback" not in done.stderr

    # a registered runner is the organisation's: a member is refused
    refused(mia, "runner r1 belongs to the organisation: only an admin may open a console")
    # an admin opens it, then makes it open; a member still must claim it first
    assert fleet.gg("console", "r1", "--", "true", token=ada, input="").returncode == 0
    api.set_ownership("r1", "open")
    refused(mia, "claim it first (gg runner claim r1)")
    fleet.api(mia).change_ownership("r1", "claim")
    # claimed by mia: an admin is refused, and so is a stranger; mia herself may
    refused(ada, "runner r1 is claimed by mia: only its owner may open a console on it")
    refused(sam, "runner r1 is claimed by mia: only its owner may open a console on it")
    done = fleet.gg("console", "r1", "--", "sh", "-c", "exit 5", token=mia, input="")
    assert done.returncode == 5, done.stderr
    # only the two consoles that were allowed ever reached the runner
    opened = [e for e in console_events(fleet) if e["kind"] == "info:console:opened"]
    assert sorted(e["actor"] for e in opened) == ["ada", "mia"]
    assert fleet.log("r1").count("opened by") == 2


def test_a_parked_runner_is_told_of_a_console_at_once(make_fleet):
    # Check-ins and claims an hour apart: only the instruction on the parked claim can bring
    # the runner to the console within the join wait.
    # A header timeout shorter than the console: the WebSocket must outlive it.
    fleet = make_fleet({"GG_CHECK_IN_INTERVAL": "3600", "GG_CLAIM_WAIT": "3600",
                        "GG_OFFLINE_AFTER": "7200", "GG_CONSOLE_JOIN_WAIT": "30",
                        "GG_HEADER_TIMEOUT": "1"})
    fleet.runner("r1")
    fleet.wait_online("r1")
    wait_until(lambda: _parked(fleet), timeout=STEP,
               what="the runner's claim to park")
    done = fleet.gg("console", "r1", "--", "sh", "-c", "sleep 2; echo told; exit 4", input="")
    assert done.returncode == 4, done.stderr
    assert "told" in done.stdout
    assert "was told a console waits" in done.stderr


def _parked(fleet) -> bool:
    """The runner's claim is parked at the control plane (its metrics say so)."""
    import httpx

    text = httpx.get(fleet.url + "/metrics", timeout=10).text
    return any(line.startswith("gg_claims_parked ") and float(line.split()[1]) >= 1
               for line in text.splitlines())


def test_a_runner_that_does_not_join_leaves_a_sentence_not_a_hang(make_fleet):
    fleet = make_fleet({"GG_CONSOLE_JOIN_WAIT": "2", "GG_OFFLINE_AFTER": "60"})
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    os.kill(runner.proc.pid, signal.SIGSTOP)  # alive to the control plane, deaf to it
    try:
        done = fleet.gg("console", "r1", "--", "true", input="")
    finally:
        os.kill(runner.proc.pid, signal.SIGCONT)
    assert done.returncode == 1
    assert "runner r1 did not join the console within 2s" in done.stderr
    closed = wait_until(lambda: console_events(fleet), timeout=STEP, what="the closed event")
    assert [e["kind"] for e in closed] == ["info:console:closed"]
    assert closed[0]["body"]["joined"] is False


def test_a_console_joins_an_attended_flight_only_while_it_flies(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    sandboxed(fleet, "r1")
    api = fleet.api()
    flight = api.open_flight({"command": ["echo agent-notes > notes.txt; id -u > uid.txt; "
                                          "echo flight-private > /tmp/flight-tmp; sleep 3600"],
                              "runner": "r1", "attended": True})
    wait_until(lambda: api.flight(flight["id"])["stage"] == "flying", timeout=STEP,
               what="the attended flight to fly")
    wait_until(lambda: "flying" == api.flight(flight["id"])["stage"] and any(
        f["kind"] == "started" for f in api.flight(flight["id"])["facts"]), timeout=STEP,
        what="the flight to start")
    child = spawn(fleet, "r1", "--flight", flight["id"], "--", "sh")
    try:
        set_prompt(child)
        wait_until(lambda: (type_line(child, "cat notes.txt"),
                            child.expect_exact(["agent-notes", "No such file"]) == 0,
                            child.expect_exact(PROMPT))[1],
                   timeout=STEP, interval=0.2, what="the flight's notes in the console")
        type_line(child, "echo in-$GG_FLIGHT")
        child.expect_exact(f"in-{flight['id']}")
        child.expect_exact(PROMPT)
        # inside the flight's own sandbox: its private /tmp, and its processes
        type_line(child, "cat /tmp/flight-tmp")
        child.expect_exact("flight-private")
        child.expect_exact(PROMPT)
        type_line(child, "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -o 'sleep 36[0]0' "
                         "| head -1 | sed s/sleep/seen/")
        child.expect_exact("seen 3600")
        child.expect_exact(PROMPT)
        # entering it gave the console no more than the flight has
        type_line(child, "grep -E 'CapEff|CapPrm|NoNewPrivs' /proc/self/status | tr -d ' \\t'")
        child.expect_exact("CapPrm:0000000000000000")
        child.expect_exact("CapEff:0000000000000000")
        child.expect_exact("NoNewPrivs:1")
        child.expect_exact(PROMPT)
        # the flight's identity, never root: no host sysctl is written from here either
        type_line(child, "echo me-$(id -u)-$(id -G) flight-$(cat uid.txt)")
        child.expect(r"me-(\d+)-(\d+) flight-(\d+)")
        me, groups, theirs = child.match.groups()
        assert me == theirs and groups == me
        if os.geteuid() == 0:
            assert int(me) != 0
        child.expect_exact(PROMPT)
        # The host's own value written back (harmless if it were allowed); the markers are
        # split in the typed line, so its echo on the terminal matches neither.
        type_line(child, 'v=$(cat /proc/sys/kernel/core_pattern); echo "$v" > '
                         '/proc/sys/kernel/core_pattern && echo WR""OTE; echo tr""ied')
        assert child.expect_exact(["WROTE", "tried"]) == 1
        child.expect_exact(PROMPT)
        type_line(child, "exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    # a flight that is not attended, and one that no longer flies, are refused
    other = api.open_flight({"command": ["true"]})
    done = fleet.gg("console", "r1", "--flight", other["id"], "--", "true", input="")
    assert done.returncode == 6 and "is not attended" in done.stderr, done.stderr
    api.cancel(flight["id"])
    wait_until(lambda: api.flight(flight["id"])["stage"] == "cancelled", timeout=STEP,
               what="the flight to end")
    done = fleet.gg("console", "r1", "--flight", flight["id"], "--", "true", input="")
    assert done.returncode == 6, done.stderr
    assert f"flight {flight['id']} is not flying on runner r1 (it is cancelled)" in done.stderr



def test_a_runner_killed_under_a_console_leaves_a_sentence_and_no_process_behind(fleet):
    runner = fleet.runner("r1")
    fleet.wait_online("r1")
    child = spawn(fleet, "r1", "--", "sh")
    try:
        set_prompt(child)
        type_line(child, "echo pid-$$")
        child.expect(r"pid-(\d+)")
        shell = int(child.match.group(1))
        child.expect_exact(PROMPT)
        runner.proc.kill()
        child.expect_exact("the console ended without the command's status: the runner went away")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 1
    wait_until(lambda: gone(shell), timeout=STEP, what="the console's shell to die with its runner")
    closed = wait_until(lambda: [e for e in console_events(fleet)
                                 if e["kind"] == "info:console:closed"], timeout=STEP,
                        what="the closed event")
    assert closed[0]["body"]["reason"] == "the runner went away"
