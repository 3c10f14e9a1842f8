"""A console whose two sides reach different replicas (docs/console.md, "The relay"): the
person's terminal dials replica 0 only, the runner knows replica 1 only, so every keystroke,
every screenful, the exit status and the end cross between the replicas."""

from __future__ import annotations

import os

import pexpect
import psutil

from gg.launch import gg_argv
from integration.test_console import PROMPT, STEP, type_line
from support import wait_until


def test_a_console_is_relayed_between_the_persons_replica_and_the_runners(make_replicas):
    replicas = make_replicas(2)
    replicas.runner("far", first=1, only=True)
    wait_until(lambda: any(r["name"] == "far" and r["online"]
                           for r in replicas.api(0).runners()),
               timeout=STEP, what="the runner to check in on replica 1")
    env = {**os.environ, **replicas.env, "GG_CONFIG_DIR": str(replicas.config_dir),
           "GG_SERVER": replicas.servers[0].url, "TERM": "xterm"}
    argv = gg_argv("console", "far", "--", "sh")
    child = pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(30, 100), timeout=STEP,
                          encoding="utf-8", codec_errors="replace")
    try:
        child.expect("waiting: runner far")
        type_line(child, f"PS1='{PROMPT}'")
        child.expect_exact(PROMPT)
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

    def console_events():
        return [e for e in replicas.api(1).events() if e["kind"].startswith("info:console:")]

    events = wait_until(lambda: (es := console_events()) and any(
        e["kind"] == "info:console:closed" for e in es) and es, timeout=STEP,
        what="the console's closed event")
    kinds = sorted(e["kind"] for e in events)
    assert kinds == ["info:console:closed", "info:console:opened"], kinds
    closed = next(e for e in events if e["kind"] == "info:console:closed")
    assert closed["body"]["exit_code"] == 7 and closed["body"]["joined"] is True
    assert closed["body"]["runner"] == "far"
