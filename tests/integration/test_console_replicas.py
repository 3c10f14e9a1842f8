"""A console whose two sides reach different replicas (docs/console.md, "The relay"): the
person's terminal dials replica 0 only, the runner knows replica 1 only, so every keystroke,
every screenful, the exit status and the end cross between the replicas."""

from __future__ import annotations

import os

import pexpect
import psutil
from integration.test_console import PROMPT, STEP, set_prompt, type_line

from gg.launch import gg_argv

from support import wait_until


def _far_console(replicas):
    """Runner ``far`` on replica 1 only, and ``gg console far -- sh`` on replica 0 only, at
    its prompt."""
    replicas.runner("far", first=1, only=True)
    wait_until(lambda: any(r["name"] == "far" and r["online"]
                           for r in replicas.api(0).runners()),
               timeout=STEP, what="the runner to check in on replica 1")
    env = {**os.environ, **replicas.env, "GG_CONFIG_DIR": str(replicas.config_dir),
           "GG_SERVER": replicas.servers[0].url, "TERM": "xterm"}
    argv = gg_argv("console", "far", "--", "sh")
    child = pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(30, 100), timeout=STEP,
                          encoding="utf-8", codec_errors="replace")
    child.expect("waiting: runner far")
    set_prompt(child)
    return child


def _console_events(replicas, replica: int = 1) -> list[dict]:
    """The console's events once it is closed, read from replica ``replica``."""
    def closed():
        events = [e for e in replicas.api(replica).events()
                  if e["kind"].startswith("info:console:")]
        return events if any(e["kind"] == "info:console:closed" for e in events) else None
    return wait_until(closed, timeout=STEP, what="the console's closed event")


def test_a_console_is_relayed_between_the_persons_replica_and_the_runners(make_replicas):
    replicas = make_replicas(2)
    child = _far_console(replicas)
    try:
        type_line(child, "echo answer-$((6*7))")
        child.expect_exact("answer-42")
        child.expect_exact(PROMPT)
        # a frame larger than one notification crosses whole
        type_line(child, "head -c 20000 /dev/zero | tr '\\0' y; echo; echo tail-mark")
        child.expect(r"y{20000}\s+tail-mark")
        child.expect_exact(PROMPT)
        # Ctrl-C crosses as a keystroke and interrupts the foreground command
        type_line(child, "sleep 3019")
        sleeping = wait_until(lambda: [p for p in psutil.process_iter(["cmdline"])
                                       if p.info["cmdline"] == ["sleep", "3019"]],
                              timeout=STEP, what="the sleep to start")
        child.sendintr()
        child.expect_exact(PROMPT)
        type_line(child, "echo status-$?")
        child.expect_exact("status-130")
        child.expect_exact(PROMPT)
        assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in sleeping)
        type_line(child, "exit 7")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 7, child.before
    events = _console_events(replicas)
    kinds = sorted(e["kind"] for e in events)
    assert kinds == ["info:console:closed", "info:console:opened"], kinds
    closed = next(e for e in events if e["kind"] == "info:console:closed")
    assert closed["body"]["exit_code"] == 7 and closed["body"]["joined"] is True
    assert closed["body"]["runner"] == "far"


def test_a_replica_that_restarts_leaves_the_consoles_the_others_relay_open(make_replicas):
    replicas = make_replicas(3)
    child = _far_console(replicas)
    try:
        replicas.kill(2)
        replicas.restart(2)  # the console's sides are on replicas 0 and 1
        type_line(child, "echo still-$((6*7))")
        child.expect_exact("still-42")
        child.expect_exact(PROMPT)
        type_line(child, "exit 7")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 7, child.before
    events = _console_events(replicas, replica=2)
    closed = [e for e in events if e["kind"] == "info:console:closed"]
    assert len(closed) == 1 and closed[0]["body"]["exit_code"] == 7, closed


def test_the_person_leaving_ends_the_runners_side_on_the_other_replica(make_replicas):
    replicas = make_replicas(2)
    child = _far_console(replicas)
    try:
        type_line(child, "sleep 3023")
        wait_until(lambda: [p for p in psutil.process_iter(["cmdline"])
                            if p.info["cmdline"] == ["sleep", "3023"]],
                   timeout=STEP, what="the sleep to start")
        child.kill(9)  # the terminal goes away without a word
    finally:
        child.close(force=True)
    closed = [e for e in _console_events(replicas) if e["kind"] == "info:console:closed"]
    assert len(closed) == 1 and closed[0]["body"]["exit_code"] is None, closed
    assert closed[0]["body"]["reason"] == "the person left", closed
    wait_until(lambda: not [p for p in psutil.process_iter(["cmdline"])
                            if p.info["cmdline"] == ["sleep", "3023"]],
               timeout=STEP, what="the console's command to end with the runner's side")


def test_the_runner_going_away_ends_the_persons_side_on_the_other_replica(make_replicas):
    replicas = make_replicas(2)
    child = _far_console(replicas)
    try:
        replicas.runners[0].proc.kill()
        child.expect_exact("the console ended without the command's status: the runner went away")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 1
    closed = [e for e in _console_events(replicas, replica=0)
              if e["kind"] == "info:console:closed"]
    assert len(closed) == 1 and closed[0]["body"]["reason"] == "the runner went away", closed
