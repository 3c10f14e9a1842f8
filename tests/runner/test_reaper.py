"""The reaper an ``isolation: none`` flight runs under: real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gg.runner.flight import REAPER, SPAWNER, kept
from support import gone, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal is Linux's")


def _run(command: list[str]) -> int:
    return subprocess.run(kept(command), start_new_session=True, timeout=30).returncode


def test_the_reaper_ends_as_its_command_ended():
    assert _run(["sh", "-c", "exit 3"]) == 3
    assert _run(["sh", "-c", "kill -TERM $$"]) == -signal.SIGTERM
    assert _run(["no-such-command-here"]) == 127


def test_sigterm_to_the_group_reaches_the_command_and_the_reaper_waits_for_it(tmp_path):
    done = tmp_path / "done"
    proc = subprocess.Popen(kept(["sh", "-c", f"trap 'echo bye > {done}; exit 7' TERM; "
                                              "echo up; while :; do sleep 0.05; done"]),
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline() == b"up\n"
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 7  # the command's own answer, not the reaper's
        assert done.read_text() == "bye\n"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_reaper_kills_its_whole_group_when_its_parent_is_killed(tmp_path):
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import os, signal, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-I', '-S', {str(REAPER)!r}, str(os.getpid()), '--',"
        f" 'sh', '-c', 'sleep 600 & echo $! > {pids}.tmp; echo $$ >> {pids}.tmp; "
        f"mv {pids}.tmp {pids}; wait'], start_new_session=True)\n"
        "signal.pause()\n")])
    found: list[int] = []
    try:
        wait_until(pids.exists, what="the command to start")
        found = [int(line) for line in pids.read_text().split()]
        assert len(found) == 2 and not any(gone(pid) for pid in found)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: all(gone(pid) for pid in found), timeout=10,
                   what="the command and its child to be gone")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in found:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_flight_outlives_the_thread_that_started_it():
    """The parent-death signal follows the thread that forked: flights are forked from the
    spawner's thread, which lives as long as the runner, not from the flight's own."""
    box: dict = {}

    def start_and_wait_until_armed():
        proc = box["proc"] = SPAWNER.popen(kept(["cat"]), stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, start_new_session=True)
        proc.stdin.write(b"ping\n")  # cat answers only once the reaper has armed its signal
        proc.stdin.flush()
        box["echo"] = proc.stdout.readline()

    asking = threading.Thread(target=start_and_wait_until_armed)
    asking.start()
    asking.join(timeout=30)
    proc = box["proc"]
    try:
        assert box["echo"] == b"ping\n"
        wait_until(lambda: not Path(f"/proc/self/task/{asking.native_id}").exists(),
                   what="the asking thread to be gone")
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0  # a parent-death signal would have made it -9
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_reaper_starts_without_the_signal_modules_enum_classes():
    """Every isolation-none flight starts a Python for its reaper: its start-up is per-flight
    CPU, so it imports only what it needs (the signal module's C half, not its enums)."""
    argv = kept(["true"])
    argv[1:1] = ["-X", "importtime"]  # the reaper as the runner starts it, imports listed
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                          start_new_session=True)
    assert done.returncode == 0, done.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
              if line.startswith("import time:")}
    assert "ctypes" in loaded  # the listing is the reaper's own
    assert "enum" not in loaded and "signal" not in loaded, sorted(loaded)
